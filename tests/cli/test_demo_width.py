"""``polystream demo`` at 80 columns: every figure whole, the two steps named, the
scripted delay of the first event said where the times are shown."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console

from polystream.cli._demo import STEPS, _console, render
from polystream.dialects import SSE_DIALECTS


def report() -> dict[str, object]:
    """A demo report with the widest figures and finish reasons of a real run."""
    rows = []
    for n, dialect in enumerate(SSE_DIALECTS):
        rows.append(
            {
                "dialect": dialect,
                "ok": n != 3,
                "status": "completed" if n != 3 else "failed",
                "ttfe_ms": 1234.5 if n == 0 else 38.2,
                "events": 10_071 + n,
                "bytes": 12_345_678 + n,
                "reasoning": ["Think once.", "Think twice."],
                "tool_call": {"id": "c", "name": "get_weather", "arguments": {"city": "Paris"}},
                "text": "It is sunny.",
                "finish_reasons": [
                    {"unified": "tool_calls", "raw": "requires_action"},
                    {"unified": "stop", "raw": "completed"},
                ],
                "problems": [] if n != 3 else ["step 2: status failed"],
            }
        )
    return {"ok": False, "question": "Weather?", "expected_text": "It is sunny.", "dialects": rows}


def test_the_table_fits_80_columns_and_cuts_no_figure() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=True, color_system=None)
    render(report(), console)
    text = buffer.getvalue()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text
    for n, dialect in enumerate(SSE_DIALECTS):
        row = next(line for line in lines if line.startswith(dialect + " "))
        assert f" {12_345_678 + n} " in row and f" {10_071 + n} " in row
        assert "requires_action" in row and "tool_calls" in row
    assert " 1234.5 " in text
    assert f"step 1: {STEPS[0]}" in text and f"step 2: {STEPS[1]}" in text
    assert "ms*" in text
    # The caption says what the first-event time holds (the scenario's 30 ms).
    caption = " ".join(line.strip() for line in lines if line.strip())
    assert (
        "* from the request to the first event of step 1, including the 30 ms the emulator "
        "waits before a reply's first event (scripted)"
    ) in caption
    # A dialect that failed is marked, and its problems listed below the table.
    assert next(line for line in lines if line.startswith("xai_responses ")).rstrip()[-1] == "✗"
    assert "xai_responses: step 2: status failed" in lines
    assert lines[-1] == "7/8 dialects produced the expected result."


def test_a_terminal_s_width_is_taken_from_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        encoding = "utf-8"

        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("TERM", raising=False)
    assert _console().width == 80
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert (_console().width, _console().is_terminal) == (120, False)
