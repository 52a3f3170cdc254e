"""Small ``ast`` helpers shared by the rules (names of expressions, function walks)."""

from __future__ import annotations

import ast
from typing import Iterator

FunctionNode = (ast.FunctionDef, ast.AsyncFunctionDef)


def dotted_name(node: ast.AST) -> str | None:
    """Return ``"a.b.c"`` for a ``Name``/``Attribute`` chain, else ``None``.

    ``torch.no_grad`` -> ``"torch.no_grad"``; ``self.x.y`` -> ``"self.x.y"``; ``f().x`` -> ``None``.
    """
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def last_name(node: ast.AST) -> str | None:
    """Return the last component of a name (``torch.no_grad`` -> ``no_grad``; ``x`` -> ``x``)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def call_name(node: ast.AST) -> str | None:
    """Return the dotted name of the callee if ``node`` is a call of a plain name chain."""
    if isinstance(node, ast.Call):
        return dotted_name(node.func)
    return None


def iter_functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Yield every function and method definition in ``tree`` (nested ones included)."""
    for node in ast.walk(tree):
        if isinstance(node, FunctionNode):
            yield node


def walk_function_body(func: ast.AST) -> Iterator[ast.AST]:
    """Yield the nodes of a function body without entering nested functions, lambdas or classes."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def string_value(node: ast.AST) -> str | None:
    """Return the value of a ``str`` constant node, else ``None``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
