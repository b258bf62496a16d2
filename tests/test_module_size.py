"""No source module passes 1,000 lines: a module that grows past it is split along its
seams (see docs/architecture.md), not left to grow."""

from __future__ import annotations

from pathlib import Path

import pytest

import polystream

SRC = Path(polystream.__file__).parent
MAX_LINES = 1000
MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_module_is_under_the_size_limit(path: Path) -> None:
    lines = path.read_text().count("\n")
    assert lines <= MAX_LINES, f"{path.relative_to(SRC)} has {lines} lines (limit {MAX_LINES})"
