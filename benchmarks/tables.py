"""What the benchmark runners share to report: Markdown tables and target rows."""

from __future__ import annotations

from typing import Any

__all__ = ["markdown", "target"]


def markdown(rows: list[list[str]]) -> str:
    """A Markdown table: the first row is the header, columns padded to their widest."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def target(name: str, ok: bool | None, figure: str) -> dict[str, Any]:
    """One target's row: PASS, FAIL, or N/A (a figure reported without a bound)."""
    return {
        "target": name,
        "status": "N/A" if ok is None else "PASS" if ok else "FAIL",
        "figure": figure,
    }
