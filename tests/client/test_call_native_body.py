"""``StreamCall(native_body=...)``: a request parsed from a body of the call's own
dialect is sent as that body came, but for what the call decides (the gateway's
pass-through)."""

from __future__ import annotations

import json

import msgspec

from polystream.call import StreamCall
from polystream.request import parse_request

BODY = {
    "model": "alias",
    "messages": [{"role": "user", "name": "ann", "content": "hi"}],
    "seed": 7,
    "stream": False,
}


def test_the_native_body_goes_as_it_came_with_the_calls_model_and_streaming() -> None:
    request = msgspec.structs.replace(parse_request("openai_chat", BODY), model="gpt-x")
    call = StreamCall(
        "openai_chat", request, api_key="k", base_url="http://127.0.0.1:1/v1", native_body=BODY
    )
    first = call.next_request()
    assert first is not None and first.url == "http://127.0.0.1:1/v1/chat/completions"
    assert json.loads(first.body or b"") == {**BODY, "model": "gpt-x", "stream": True}
    # Without it, the body is built from the unified request (the message's name, which
    # it has no place for, is not there).
    built = StreamCall("openai_chat", request, api_key="k", base_url="http://127.0.0.1:1/v1")
    sent = built.next_request()
    assert sent is not None
    assert json.loads(sent.body or b"")["messages"] == [{"role": "user", "content": "hi"}]
