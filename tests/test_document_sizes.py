"""The README and the performance page stay short enough to read.

A newcomer reads README.md from top to bottom, and docs/performance.md to find the
current figures and how they were measured. Detail belongs in the page about its
subject (docs/*.md), and figures that no longer hold belong to the history in git,
not on the page.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

MAX_LINES = {
    "README.md": 300,
    "docs/performance.md": 800,
}


@pytest.mark.parametrize(("name", "limit"), sorted(MAX_LINES.items()))
def test_document_is_at_most_its_line_limit(name: str, limit: int) -> None:
    lines = len((ROOT / name).read_text(encoding="utf-8").splitlines())
    assert lines <= limit, f"{name} has {lines} lines; at most {limit}"
