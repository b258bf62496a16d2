"""A string UTF-8 cannot carry (a lone surrogate) in a hand-made event is the caller's
error: every encoder raises LocalProtocolError naming the dialect, the event being
encoded and where the string holds the character, and what it returned before stands.

Decoders never produce such strings (msgspec refuses them on the wire), so these
events are made by hand, as a caller of the encoders may.
"""

from __future__ import annotations

from typing import Any

import pytest

from polystream.dialects import DIALECTS, get_dialect
from polystream.errors import LocalProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishReason,
    StreamStart,
    TextDelta,
    ToolInputDelta,
)

TARGETS = [(name, {}) for name in DIALECTS] + [("gemini_generate", {"framing": "json_array"})]
IDS = [name + ("/" + "array" if options else "") for name, options in TARGETS]
BAD = "ok \ud800 here"  # the lone surrogate at index 3


def _opening(source: str) -> list[Event]:
    return [StreamStart(dialect=source, id="s1", model="m"), BlockStart(index=0, kind="text")]


def _cases(source: str) -> list[tuple[str, list[Event], Event, int]]:
    """(what, the events before, the event that holds the bad string, the index of
    the surrogate in that string)."""
    return [
        ("text delta", _opening(source), TextDelta(index=0, delta=BAD), 3),
        (
            "tool input delta",
            [
                StreamStart(dialect=source, id="s1", model="m"),
                BlockStart(index=0, kind="tool_call", id="call_1", call_id="call_1", name="f"),
            ],
            ToolInputDelta(index=0, delta='{"a": "' + BAD + '"}'),
            10,
        ),
        (
            "tool name",
            [StreamStart(dialect=source, id="s1", model="m")],
            BlockStart(index=0, kind="tool_call", id="call_1", call_id="call_1", name=BAD),
            3,
        ),
    ]


def _finish(index: int) -> list[Event]:
    return [
        BlockEnd(index=index),
        Finish(status="completed", reason=FinishReason(unified="stop")),
    ]


@pytest.mark.parametrize(("target", "options"), TARGETS, ids=IDS)
@pytest.mark.parametrize("source", ["openai_chat", "gemini_generate"])
def test_a_lone_surrogate_is_a_local_error_where_it_is_written(
    target: str, options: dict[str, Any], source: str
) -> None:
    for what, before, bad, where in _cases(source):
        encoder = get_dialect(target).encoder(**options)
        written = [encoder.encode(event) for event in before]
        failure: LocalProtocolError | None = None
        # The encoder may hold the event back (a same-dialect chunk's text waits for
        # its usage, a block's start for its first delta): then it fails on the event
        # that writes it, or at the end of the stream.
        at = len(before)
        try:
            encoder.encode(bad)
            for event in _finish(0):
                at += 1
                encoder.encode(event)
            at += 1
            encoder.close()
        except LocalProtocolError as exc:
            failure = exc
        if failure is None:
            # Only a tool name may be dropped by a target with no place for it, or what
            # a target carries none of (a speech stream: text, tools), reported lost with
            # its block.
            lost = {loss.event_index for loss in encoder.losses}
            assert what == "tool name" or len(before) - 1 in lost, (target, what)
            continue
        assert failure.dialect == DIALECTS[target].name, (target, what)
        assert failure.event_index == at, (target, what)
        assert f"'\\ud800' at index {where}," in failure.message, failure.message
        assert "UTF-8 cannot carry" in failure.message
        # What was returned before the failure is bytes, untouched.
        assert all(type(data) is bytes for data in written)


@pytest.mark.parametrize(("target", "options"), TARGETS, ids=IDS)
def test_the_failing_event_is_named(target: str, options: dict[str, Any]) -> None:
    encoder = get_dialect(target).encoder(**options)
    for event in _opening("openai_chat"):
        encoder.encode(event)
    if any(loss.what == "block:text" for loss in encoder.losses):
        # A target that carries no text (a speech stream) reported the block lost, once:
        # its bad delta is not written, so it cannot fail. What else the target lacks
        # (an image stream's image) may be reported at its end.
        for event in [TextDelta(index=0, delta=BAD), *_finish(0)]:
            encoder.encode(event)
        encoder.close()
        assert [loss.what for loss in encoder.losses].count("block:text") == 1
        return
    with pytest.raises(LocalProtocolError) as caught:
        for event in [TextDelta(index=0, delta=BAD), *_finish(0)]:
            encoder.encode(event)
        encoder.close()
    message = caught.value.message
    assert message.startswith("cannot encode a "), message
    assert str(caught.value).endswith(f"(dialect {target}, event {caught.value.event_index})"), str(
        caught.value
    )


@pytest.mark.parametrize("framing", ["sse", "json_array"])
def test_text_held_to_the_end_fails_at_close(framing: str) -> None:
    # Gemini's own chunk's text waits for its usage; a stream cut before it is written
    # at close, where the string then fails.
    encoder = get_dialect("gemini_generate").encoder(framing=framing)
    for event in _opening("gemini_generate"):
        encoder.encode(event)
    assert encoder.encode(TextDelta(index=0, delta=BAD)) == b""
    with pytest.raises(LocalProtocolError) as caught:
        encoder.close()
    assert caught.value.message == (
        "cannot encode the end of the stream: a string holds '\\ud800' at index 3, which "
        "UTF-8 cannot carry (surrogates not allowed)"
    )
    assert (caught.value.dialect, caught.value.event_index) == ("gemini_generate", 3)
