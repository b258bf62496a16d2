"""How ``polystream call`` shows a reply: the answer alone on stdout, each reasoning
block on stderr after ``[reasoning]`` (dimmed on a terminal unless ``NO_COLOR``), and
a final line that says why a reply failed or was cut and leaves out the counts it did
not report."""

from __future__ import annotations

import io

import pytest

from polystream.accumulate import Result
from polystream.cli import main
from polystream.cli._call_show import TRUNCATED, Media, Printer, summary
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorInfo,
    Finish,
    FinishReason,
    ReasoningDelta,
    StreamStart,
    TextDelta,
    Usage,
)
from polystream.scenario import Emulator, parse_scenarios
from polystream.server import ServerThread

REPLY = [
    StreamStart(dialect="anthropic_messages"),
    BlockStart(index=0, kind="reasoning"),
    ReasoningDelta(index=0, delta="Hmm, "),
    ReasoningDelta(index=0, delta="a greeting."),
    BlockEnd(index=0),
    BlockStart(index=1, kind="text"),
    TextDelta(index=1, delta="Hello "),
    TextDelta(index=1, delta="there."),
    BlockEnd(index=1),
    BlockStart(index=2, kind="reasoning"),
    ReasoningDelta(index=2, delta="Done."),
    BlockEnd(index=2),
    Finish(status="completed", reason=FinishReason(unified="stop", raw="end_turn")),
]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def show(out: io.StringIO, err: io.StringIO) -> None:
    printer = Printer(out, err, Media(None), as_json=False)
    for event in REPLY:
        printer.show(event)


def test_reasoning_goes_apart_from_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    out, err = io.StringIO(), io.StringIO()
    show(out, err)
    assert out.getvalue() == "Hello there.\n"
    assert err.getvalue() == "[reasoning] Hmm, a greeting.\n[reasoning] Done.\n"


def test_reasoning_is_dimmed_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    out, err = Terminal(), Terminal()
    show(out, err)
    dim, off = "\x1b[2m", "\x1b[0m"
    assert err.getvalue() == (
        f"{dim}[reasoning] {off}{dim}Hmm, {off}{dim}a greeting.{off}\n"
        f"{dim}[reasoning] {off}{dim}Done.{off}\n"
    )
    assert out.getvalue() == "Hello there.\n"  # (\n: the reasoning after it began a line)


def test_no_color_means_no_escape_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out, err = Terminal(), Terminal()
    show(out, err)
    assert "\x1b" not in out.getvalue() + err.getvalue()
    assert err.getvalue() == "[reasoning] Hmm, a greeting.\n[reasoning] Done.\n"


def test_text_cut_by_reasoning_ends_its_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(out, err, Media(None), as_json=False)
    for event in [
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Hel"),
        ReasoningDelta(index=1, delta="think"),
        TextDelta(index=0, delta="lo"),
        Finish(status="completed", reason=FinishReason(unified="stop")),
    ]:
        printer.show(event)
    assert (out.getvalue(), err.getvalue()) == ("Hel\nlo\n", "[reasoning] think\n")


def _result(status: str, **fields: object) -> Result:
    return Result(dialect="openai_responses", status=status, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("result", "first", "line"),
    [
        (
            _result(
                "completed",
                finish_reason=FinishReason(unified="stop", raw="end_turn"),
                usage=Usage(input_tokens=5, output_tokens=7, reasoning_tokens=2),
            ),
            0.0123,
            "-- completed (end_turn); tokens in 5 out 7 reasoning 2; first event 12 ms, "
            "total 40 ms",
        ),
        (  # a reason without a raw word: the unified one; only the counts reported
            _result(
                "completed",
                finish_reason=FinishReason(unified="stop"),
                usage=Usage(input_tokens=22, output_tokens=6),
            ),
            0.001,
            "-- completed (stop); tokens in 22 out 6; first event 1 ms, total 40 ms",
        ),
        (  # cut without an error that says why
            _result("truncated", finish_reason=FinishReason(unified="error")),
            0.02,
            f"-- truncated ({TRUNCATED}); first event 20 ms, total 40 ms",
        ),
        (
            _result(
                "truncated",
                finish_reason=FinishReason(unified="error"),
                error=ErrorInfo(kind="truncated", message="stream ended without its end"),
            ),
            0.02,
            "-- truncated (stream ended without its end); first event 20 ms, total 40 ms",
        ),
        (  # failed before any event: no time to the first one
            _result(
                "failed",
                finish_reason=FinishReason(unified="error", raw="model_not_found"),
                error=ErrorInfo(kind="invalid_request", message="No such model."),
            ),
            None,
            "-- failed (No such model.); total 40 ms",
        ),
        (_result("completed"), None, "-- completed; total 40 ms"),
    ],
)
def test_the_final_line(result: Result, first: float | None, line: str) -> None:
    assert summary(result, first, 0.04) == line
    assert "None" not in line


def test_a_base_url_on_this_machine_needs_no_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    reply = {"reasoning": "Hmm.", "text": "Hi.", "usage": {"input_tokens": 3, "output_tokens": 2}}
    with ServerThread(Emulator(parse_scenarios([{"reply": reply}]))) as server:
        argv = ["call", "anthropic", "--model", "claude-haiku-4-5", "say hi"]
        status = main([*argv, "--base-url", server.base_url + "/anthropic"])
        out, err = capsys.readouterr()
    assert (status, out) == (0, "Hi.\n")
    assert err.startswith("[reasoning] Hmm.\n-- completed (end_turn); tokens in 3 out 2; ")
    # Elsewhere, a key is needed, and the message says how to give one.
    assert main([*argv, "--base-url", "https://example.com/anthropic"]) == 2
    assert capsys.readouterr() == (
        "",
        "polystream: error: no API key for anthropic: pass --api-key or set ANTHROPIC_API_KEY\n",
    )
