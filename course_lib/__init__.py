"""Transformers for Medicine: reference implementations and grading checks.

One module per lesson topic (``attention``, ``masking``, ``multihead``,
``positional``, ``blocks``, ``bpe``, ``efficient``), ``checks`` for the graded
tests, ``plotting`` for the pictures, ``bio`` for the case studies' data.
Numpy versions teach; torch versions train. Submodules are imported explicitly:
``from course_lib import attention``.
"""
__version__ = "0.1.0"
