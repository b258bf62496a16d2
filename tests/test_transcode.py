"""The Transcoder is incremental: target bytes leave as source bytes arrive."""

from __future__ import annotations

from polystream import decode
from polystream.transcode import Transcoder
from tests.helpers import FIXTURES


def test_output_is_produced_before_the_input_ends() -> None:
    source = sorted((FIXTURES / "anthropic_messages").glob("*.sse"))
    data = next(p for p in source if p.name.startswith("skeleton")).read_bytes()
    transcoder = Transcoder("openai_chat")
    produced_before_close = []
    for i in range(0, len(data), 64):
        produced_before_close.append(transcoder.feed(data[i : i + 64]))
    tail = transcoder.close()
    early = b"".join(produced_before_close)
    assert early, "nothing was written before the end of the input"
    assert b"[DONE]" not in early and b"[DONE]" in tail  # the terminal only at the end
    assert transcoder.source == "anthropic_messages"
    assert transcoder.content_type == "text/event-stream"
    assert decode(early + tail, "openai_chat").text == decode(data).text
