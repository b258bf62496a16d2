"""One text turn against the emulator: a Realtime request the server answers with an
``error`` before any reply ends the turn at once, failed with that error (it used to
wait for the idle timeout); and ``polystream call --realtime`` end to end."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator

import pytest

from polystream.cli import main
from polystream.dialects._realtime.session import Routed
from polystream.events import (
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    StreamStart,
    TextDelta,
)
from polystream.realtime import text_turn, text_turn_sync
from polystream.realtime._turn import Turn
from polystream.scenario import Emulator
from polystream.server import ServerThread

RATE_LIMITED = "Rate limit exceeded. Please retry after the time given in Retry-After."


def test_a_refused_response_fails_the_turn_at_once(serve: Callable[..., ServerThread]) -> None:
    server = serve(
        [{"match": {"dialect": "openai_realtime"}, "faults": {"http_error": {"status": 429}}}]
    )
    seen: list[Routed] = []
    result = asyncio.run(
        text_turn(
            "openai_realtime",
            "Say hi",
            model="gpt-realtime",
            api_key="x",
            base_url=server.base_url + "/openai/v1",
            idle_timeout=30,  # (not reached: the error ends the turn)
            on_event=seen.append,
        )
    )
    assert (result.status, result.dialect, result.text) == ("failed", "openai_realtime", "")
    assert result.finish_reason == FinishReason(unified="error", raw="rate_limit_exceeded")
    assert result.error is not None
    assert (result.error.kind, result.error.code, result.error.message) == (
        "rate_limit",
        "rate_limit_exceeded",
        RATE_LIMITED,
    )
    assert result.errors == [result.error]
    assert [r.stream for r in seen if type(r.event) is ErrorEvent] == [0]


def test_an_unknown_model_fails_the_turn_with_its_error(plain_server: ServerThread) -> None:
    result = text_turn_sync(
        "openai_realtime",
        "Say hi",
        model="llama-3",
        api_key="x",
        base_url=plain_server.base_url + "/openai/v1",
        idle_timeout=30,
    )
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.code, result.error.message) == (
        "model_not_found",
        "The model `llama-3` does not exist or you do not have access to it.",
    )


def _error(kind: str, code: str | None) -> Routed:
    return Routed(event=ErrorEvent(error=ErrorInfo(kind=kind, message="no", code=code)))


def test_which_errors_end_a_turn() -> None:
    # A protocol error of the session (a malformed message, tolerated) is no answer.
    turn = Turn("openai_realtime")
    assert turn.feed(_error("protocol", None)) is False
    assert (turn.answered, turn.result().status) == (False, "in_progress")
    # Once the reply began, a session error does not end it: its Finish does.
    assert (
        turn.feed(Routed(event=StreamStart(dialect="openai_realtime", id="r"), stream=1)) is False
    )
    assert turn.feed(_error("invalid_request", "invalid_value")) is False
    assert turn.feed(Routed(event=BlockStart(index=0, kind="text"), stream=1)) is False
    assert turn.feed(Routed(event=TextDelta(index=0, delta="x"), stream=1)) is False
    done = Finish(status="completed", reason=FinishReason(unified="stop"))
    assert turn.feed(Routed(event=done, stream=1)) is True
    assert turn.result().status == "completed"
    # Before it, the server's error is the request's answer.
    refused = Turn()
    assert refused.feed(_error("invalid_request", "invalid_value")) is True
    assert refused.answered and refused.stream is None
    result = refused.result()
    assert (result.status, result.dialect, result.finish_reason) == (
        "failed",
        None,
        FinishReason(unified="error", raw="invalid_value"),
    )


def test_call_realtime_against_the_emulator(
    plain_server: ServerThread, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # (a local --base-url needs none)
    base = plain_server.base_url + "/openai/v1"
    argv = ["call", "openai", "--realtime", "--model", "gpt-realtime", "--base-url", base]
    assert main([*argv, "Say hi"]) == 0
    out, err = capsys.readouterr()
    assert out == "Emulated reply from gpt-realtime. You said: Say hi\n"
    assert re.fullmatch(
        r"-- completed \(completed\); tokens in \d+ out \d+ reasoning None; "
        r"first event \d+ ms, total \d+ ms\n",
        err,
    ), err


@pytest.fixture(scope="module")
def plain_server() -> Iterator[ServerThread]:
    with ServerThread(Emulator()) as server:
        yield server
