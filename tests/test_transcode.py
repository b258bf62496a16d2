"""The Transcoder is incremental: target bytes leave as source bytes arrive."""

from __future__ import annotations

from polystream import decode
from polystream.transcode import Transcoder
from tests.helpers import FIXTURES


def test_output_is_produced_before_the_input_ends() -> None:
    source = sorted((FIXTURES / "anthropic_messages").glob("*.sse"))
    data = next(p for p in source if p.name.startswith("skeleton")).read_bytes()
    transcoder = Transcoder("openai_chat")
    # Cut the source right after its first text delta (the rest has not "arrived").
    cut = data.index(b"\n\n", data.index(b"text_delta")) + 2
    first = transcoder.feed(data[:cut])
    # That text is already out in the target dialect: nothing waits for the end.
    assert b"chat.completion.chunk" in first and b"[DONE]" not in first
    assert decode(first + b"data: [DONE]\n\n", "openai_chat").text
    rest = transcoder.feed(data[cut:]) + transcoder.close()
    assert b"[DONE]" in rest
    assert transcoder.source == "anthropic_messages"
    assert transcoder.content_type == "text/event-stream"
    assert decode(first + rest, "openai_chat").text == decode(data).text
