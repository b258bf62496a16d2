"""What a dialect is lives in its folder under ``polystream/dialects/``: the modules
checked here name no registered dialect and no provider in a string literal (a table
keyed by dialect, an if-chain over names); they ask the registry. Docstrings may name
them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import polystream
from polystream.dialects import DIALECTS, PROVIDERS

SRC = Path(polystream.__file__).parent

CHECKED = sorted(
    str(path.relative_to(SRC))
    for path in SRC.iterdir()
    if path.name != "dialects" and (path.suffix == ".py" or (path / "__init__.py").exists())
)
"""Every package and module outside ``polystream/dialects/`` (relative to
``polystream/``): none keeps dialect knowledge of its own."""

NAMES = frozenset(DIALECTS) | frozenset(PROVIDERS)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module, its classes and functions, and
    of every bare string statement (an attribute's docstring)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for statement in body:
            if (
                isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                out.add(id(statement.value))
    return out


def named_dialects(source: str) -> list[tuple[int, str]]:
    """The string literals of ``source`` (but its docstrings) that are a registered
    dialect's or a provider's name, with their lines."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in NAMES
        and id(node) not in skip
    )


def _files(checked: str) -> list[Path]:
    path = SRC / checked
    assert path.exists(), f"{path}: no such package or module"
    assert SRC / "dialects" not in (path, *path.parents), "the dialects own their names"
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


@pytest.mark.parametrize("checked", CHECKED)
def test_no_dialect_or_provider_name_in_a_string_literal(checked: str) -> None:
    found = [
        f"{path.relative_to(SRC)}:{line}: {name!r}"
        for path in _files(checked)
        for line, name in named_dialects(path.read_text())
    ]
    assert not found, "ask the registry (polystream.dialects) instead:\n" + "\n".join(found)


def test_the_check_sees_a_table_and_an_if_chain_but_not_a_docstring() -> None:
    source = '''
"""Module docstring naming openai_chat."""
_FAMILY = {"openai_chat": "chat"}


def build(dialect):
    """Builds for gemini_generate."""
    if dialect == "xai_messages":
        return f"{dialect}"
    provider = "anthropic"
    """An attribute docstring naming openai."""
    return "openai_chats"
'''
    assert named_dialects(source) == [(3, "openai_chat"), (8, "xai_messages"), (10, "anthropic")]
