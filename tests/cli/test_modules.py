"""How the command line's modules fit together: the subcommands import their shared
input and output helpers from below (no import circle), and ``frames``' framing
detection is one function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import polystream.cli
from polystream.cli._main import detect_framing

CLI = Path(polystream.cli.__file__).parent


def _cli_imports(path: Path) -> set[str]:
    """The ``polystream.cli`` modules ``path`` imports (at any depth of its code)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module.startswith("polystream.cli."):
                found.add(node.module.rpartition(".")[2])
            elif node.module == "polystream.cli":
                found.update(alias.name for alias in node.names)
    return found


def test_no_cli_module_imports_another_that_imports_it_back() -> None:
    graph = {path.stem: _cli_imports(path) for path in CLI.glob("_*.py")}
    assert graph["_convert"] >= {"_io"}
    assert "_main" not in graph["_convert"]

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for name in graph.get(start, set()) - seen:
            if name == goal or reaches(name, goal, seen | {name}):
                return True
        return False

    circles = sorted(name for name in graph if reaches(name, name, set()))
    assert circles == []


@pytest.mark.parametrize(
    ("chunk", "framing"),
    [
        (b"", None),
        (b" \r\n\t\n", None),
        (b"[", "json_array"),
        (b"\r\n  [{}]", "json_array"),
        (b"data: {}\n\n", "sse"),
        (b"\n: comment\n", "sse"),
        (b"{", "sse"),
    ],
)
def test_the_framing_is_the_first_non_blank_byte_s(chunk: bytes, framing: str | None) -> None:
    assert detect_framing(chunk) == framing
