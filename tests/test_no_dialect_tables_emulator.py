"""The emulator keeps no table of dialect or provider names: it reads the registry.

No string literal in the emulator's modules (``polystream.scenario``, the emulator's ASGI
app, the demo command) equals a registered dialect's or provider's name; docstrings are
prose and may name them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from polystream.dialects import DIALECTS, PROVIDERS

SRC = Path(__file__).resolve().parents[1] / "src" / "polystream"
FILES = sorted(
    [
        *(SRC / "scenario").glob("*.py"),
        SRC / "server" / "_app.py",
        SRC / "cli" / "_demo.py",
    ]
)
NAMES = frozenset(DIALECTS) | frozenset(PROVIDERS)


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes (module, class, function) and of the string
    expressions that document an assignment (a bare string after it)."""
    found: set[int] = set()
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
                found.add(id(statement.value))
    return found


def named_literals(path: Path) -> list[tuple[int, str]]:
    """The (line, value) of each string literal in ``path`` that is a registered name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    prose = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in NAMES
        and id(node) not in prose
    ]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_dialect_or_provider_name_is_a_literal(path: Path) -> None:
    assert named_literals(path) == []


def test_the_check_sees_a_table_and_passes_over_prose(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Speaks openai_chat."""\n'
        'TABLE = {"xai_messages": "msg_"}\n'
        '"""The gemini table."""\n'
        "def f(p):\n"
        '    """For anthropic."""\n'
        '    return p == "gemini"\n',
        encoding="utf-8",
    )
    assert named_literals(sample) == [(2, "xai_messages"), (6, "gemini")]
