"""``StreamCall(keep_result=False)``: the events are the same, and nothing accumulates
(the gateway's way: it re-encodes each event and never reads a result)."""

from __future__ import annotations

from pathlib import Path

import pytest

from polystream.call import StreamCall
from polystream.request import Request

FIXTURE = Path(__file__).parent.parent / "fixtures" / "openai_chat" / "annotations.sse"


def _run(**options: bool) -> tuple[StreamCall, list[object]]:
    call = StreamCall(
        "openai_chat",
        Request(model="gpt-test", messages=[]),
        api_key="x",
        base_url="http://127.0.0.1:1/v1",
        **options,
    )
    assert call.next_request() is not None
    call.on_open(200, {"content-type": "text/event-stream"})
    body = FIXTURE.read_bytes()
    events = [e for at in range(0, len(body), 7) for e in call.feed(body[at : at + 7])]
    events += call.on_eof()
    return call, events


def test_without_a_result_the_events_are_the_same_and_nothing_accumulates() -> None:
    full, expected = _run()
    lean, events = _run(keep_result=False, keep_events=False)
    assert events == expected and full.finished and lean.finished
    assert full.result().status == "completed"
    assert lean.accumulator is None and lean.events is None
    with pytest.raises(ValueError, match="keep_result=True"):
        lean.result()
    assert lean.cancelled() == []  # finished already: nothing to add, nothing to feed


def test_cancelling_a_call_without_a_result() -> None:
    call = StreamCall(
        "openai_chat",
        Request(model="gpt-test", messages=[]),
        api_key="x",
        base_url="http://127.0.0.1:1/v1",
        keep_result=False,
    )
    call.next_request()
    call.on_open(200, {})
    call.feed(FIXTURE.read_bytes()[:200])
    (finish,) = call.cancelled()
    assert finish.status == "failed" and finish.error is not None
    assert finish.error.kind == "cancelled" and call.finished
