"""Data loaders and models of the biomedical case studies, one module per data set.

``drugreviews``: 979 real patient drug reviews (UCI, CC BY 4.0) used from lesson 05 on.
Submodules are imported explicitly: ``from course_lib.bio import drugreviews``.
"""
