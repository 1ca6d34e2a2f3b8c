"""Token runs shared between texts: what tests/test_fair.py compares (issue 65).

A function's code tokens come from Python's ``tokenize`` (its docstring and comments left out), each split
again into words and single punctuation marks, so that a message's prose (which ``tokenize`` cannot read:
"don't") splits the same way: ``e.sum(axis=-1)`` is ``e . sum ( axis = - 1 )`` on both sides.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import io
import re
import textwrap
import tokenize

_WORD = re.compile(r"\.\.\.|[A-Za-z_][A-Za-z_0-9]*|\d+(?:\.\d+)?|[^\sA-Za-z_0-9]")
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
         tokenize.ENDMARKER, tokenize.ENCODING}


def words(text: str) -> list[str]:
    """A text's tokens, quotes left out (so that 'utf-8' and "utf-8" compare equal)."""
    return [t for t in _WORD.findall(text) if t not in ("'", '"')]


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def _docstring_nodes(tree: ast.AST) -> list[ast.AST]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.append(first.value)
    return out


def source_tokens(source: str, *, body_only: bool = True, normalise_first: bool = False) -> list[str]:
    """The code tokens of a function's (or class's) source: no docstring, no comment, no ``def`` line when
    ``body_only`` (the signature is the stub's too, shipped on purpose)."""
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    skip = _docstring_lines(tree)
    top = tree.body[0]
    if body_only and isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
        skip.update(range(top.lineno, top.body[0].lineno))
        for deco in top.decorator_list:
            skip.update(range(deco.lineno, deco.end_lineno + 1))
    first = None  # a method's self and a function's layer/module argument read alike: "SELF"
    if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) and top.args.args:
        first = top.args.args[0].arg
    out: list[str] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in _SKIP or tok.start[0] in skip:
            continue
        if tok.type == tokenize.NAME and first is not None and tok.string == first and normalise_first:
            out.append("SELF")
            continue
        if tok.type == tokenize.STRING and re.search(r"\s", tok.string):
            continue  # prose (an error message of the reference's own): no part of the solution's code
        out += words(tok.string)
    return out


def body_of(obj):
    """What holds ``obj``'s code: a reference of a topic module (``course_lib.bpe.decode_ids``) hands its calls to
    the same-named function of its lesson's solutions file (``course_lib/solutions/bpe.py``); anything else is its
    own."""
    module = getattr(obj, "__module__", "") or ""
    if module.startswith("course_lib.") and module.count(".") == 1:
        try:
            return getattr(importlib.import_module("course_lib.solutions." + module.split(".")[1]), obj.__name__)
        except (ImportError, AttributeError):
            pass
    return obj


def object_tokens(obj, normalise_first: bool = False) -> list[str]:
    return source_tokens(inspect.getsource(body_of(obj)), normalise_first=normalise_first)


def longest_shared_run(a: list[str], b: list[str]) -> tuple[int, list[str]]:
    """The longest run of consecutive tokens that ``a`` and ``b`` share, and the run."""
    best, end = 0, 0
    prev = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        cur = [0] * (len(b) + 1)
        ai = a[i - 1]
        for j in range(1, len(b) + 1):
            if ai == b[j - 1]:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best, end = cur[j], i
        prev = cur
    return best, a[end - best:end]


def _prose(text: str) -> bool:
    return bool(re.search(r"[A-Za-z]{2,} [A-Za-z]{2,}", text))


def string_constants(module) -> list[str]:
    """Every string literal of a module's source that reads as prose, but its docstrings (an f-string's literal
    parts joined by ``{}``): the messages its checks can show."""
    tree = ast.parse(inspect.getsource(module))
    out: list[str] = []
    inside_fstring: set[int] = set(id(d) for d in _docstring_nodes(tree))  # docstrings are no messages
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                inside_fstring.add(id(v))
                parts.append(v.value if isinstance(v, ast.Constant) else "{}")
            out.append("".join(parts))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstring:
            out.append(node.value)
    return [s for s in out if _prose(s)]  # an einsum spec or a dtype name is code, not a message


# ---------------------------------------------------------------- promises
_STOP = set("the a an and or not of in to is are be by for with its it as at on no any each from that this than "
            "into one two all such so only".split())


def key_words(text: str) -> list[str]:
    """The content words of a promise, each cut to its first 5 letters (normalised ~ normalises)."""
    return [w.lower()[:5] for w in re.findall(r"[A-Za-z][A-Za-z0-9_]+", text)
            if w.lower() not in _STOP and len(w) > 2]


def notebook_docstring(assignment: str, name: str) -> str:
    """The docstring of the exercise's stub in its notebook (what the student reads), or ''."""
    import json
    from pathlib import Path
    folder = Path(__file__).resolve().parents[1] / "notebooks" / assignment
    for path in sorted(folder.glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] != "code" or f"def {name}(" not in src:
                continue
            try:
                tree = ast.parse(src)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return ast.get_docstring(node) or ""
    return ""


# ---------------------------------------------------------------- solutions and what ships
class _NoInputChecks(ast.NodeTransformer):
    """``if <bad input>: raise ...``: the docstring's contract, no part of the solution's idea."""

    def visit_If(self, node):
        self.generic_visit(node)
        if len(node.body) == 1 and isinstance(node.body[0], ast.Raise) and not node.orelse:
            return ast.Pass()
        return node


def solution_tokens(fn) -> list[str]:
    """A reference's body as tokens, its input checks left out, ``self``-like first argument as SELF."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(body_of(fn))))
    tree = ast.fix_missing_locations(_NoInputChecks().visit(tree))
    return source_tokens(ast.unparse(tree), normalise_first=True)


def shipped_functions(source: str):
    """(qualified name, tokens) of each function and method in a module's source (the students' edition)."""
    tree = ast.parse(source)
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, source_tokens(ast.unparse(child), normalise_first=True)))
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")

    walk(tree, "")
    return out


def ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}
