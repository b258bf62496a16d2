"""The Transcoder is incremental: target bytes leave as source bytes arrive."""

from __future__ import annotations

from polystream import decode
from polystream.transcode import Transcoder
from tests.helpers import FIXTURES


def test_output_is_produced_before_the_input_ends() -> None:
    source = sorted((FIXTURES / "anthropic_messages").glob("*.sse"))
    data = next(p for p in source if p.name.startswith("skeleton")).read_bytes()
    transcoder = Transcoder("openai_chat")
    half = len(data) // 2
    first = transcoder.feed(data[:half])
    # The first half of the source already yields target bytes: nothing waits for the end.
    assert first.startswith(b": ping\n\n") or first.startswith(b"data: ")
    assert b"chat.completion.chunk" in first and b"[DONE]" not in first
    rest = transcoder.feed(data[half:]) + transcoder.close()
    assert b"[DONE]" in rest
    assert transcoder.source == "anthropic_messages"
    assert transcoder.content_type == "text/event-stream"
    assert decode(first + rest, "openai_chat").text == decode(data).text
