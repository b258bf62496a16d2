"""The official google-genai SDK against the emulator, over loopback:
``generateContent``, ``streamGenerateContent`` (``alt=sse``, and the default JSON array
read raw), and the Interactions API with ``last_event_id`` resume."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import httpx2
import pytest
from google import genai
from google.genai import errors, types

from polystream.decoding import StreamDecoder
from polystream.server import ServerThread
from tests.server.support import WEATHER, require, track

MODEL = "gemini-3.8-flash"


def client(server: ServerThread) -> genai.Client:
    return track(
        genai.Client(
            api_key="test", http_options=types.HttpOptions(base_url=server.base_url + "/gemini")
        )
    )


def test_generate_and_stream_default_reply(server: ServerThread) -> None:
    require("gemini_generate")
    sdk = client(server)
    reply = sdk.models.generate_content(model=MODEL, contents="Bonjour, ça va ?")
    assert reply.text is not None and "Bonjour, ça va ?" in reply.text
    assert reply.candidates is not None and reply.candidates[0].finish_reason == "STOP"
    chunks = list(sdk.models.generate_content_stream(model=MODEL, contents="Bonjour, ça va ?"))
    assert len(chunks) > 1
    assert "".join(c.text or "" for c in chunks) == reply.text
    assert chunks[-1].usage_metadata is not None
    assert chunks[-1].usage_metadata.total_token_count


def test_stream_function_call_and_thoughts(serve: Callable[..., ServerThread]) -> None:
    require("gemini_generate")
    server = serve([WEATHER])
    sdk = client(server)
    chunks = list(sdk.models.generate_content_stream(model=MODEL, contents="weather in Paris?"))
    parts = [p for c in chunks for p in (c.candidates or [])[0].content.parts or []]  # type: ignore[union-attr]
    calls = [p.function_call for p in parts if p.function_call is not None]
    assert len(calls) == 1
    assert calls[0].name == "get_weather" and calls[0].args == {"city": "Paris"}
    thoughts = "".join(p.text or "" for p in parts if p.thought)
    assert thoughts == "The user wants the weather. Call the tool."
    text = "".join(p.text or "" for p in parts if p.text and not p.thought)
    assert text == "Let me check."
    unary = sdk.models.generate_content(model=MODEL, contents="weather in Paris?")
    assert unary.function_calls is not None and unary.function_calls[0].name == "get_weather"


def test_json_array_framing_without_alt_sse(server: ServerThread) -> None:
    require("gemini_generate")
    url = f"{server.base_url}/gemini/v1beta/models/{MODEL}:streamGenerateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "array please"}]}]}
    response = httpx.post(url, json=body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.content.lstrip().startswith(b"[")
    assert response.content.rstrip().endswith(b"]")
    decoder = StreamDecoder("gemini_generate", framing="json_array")
    decoder.feed(response.content)
    decoder.close()
    result = decoder.result()
    assert result.status == "completed"
    assert "array please" in result.text


def test_rate_limit_and_unknown_model(serve: Callable[..., ServerThread]) -> None:
    require("gemini_generate")
    server = serve(
        [
            {
                "match": {"contains": "busy"},
                "faults": {"http_error": {"status": 429, "retry_after": 2}},
            }
        ]
    )
    sdk = client(server)
    with pytest.raises(errors.ClientError) as caught:
        sdk.models.generate_content(model=MODEL, contents="busy")
    assert caught.value.code == 429
    assert caught.value.status == "RESOURCE_EXHAUSTED"
    with pytest.raises(errors.ClientError) as missing:
        sdk.models.generate_content(model="no-such-model", contents="x")
    assert missing.value.code == 404
    assert missing.value.status == "NOT_FOUND"


def test_interactions_stream_unary_and_resume(serve: Callable[..., ServerThread]) -> None:
    require("gemini_interactions")
    server = serve([WEATHER])
    sdk = client(server)
    events = list(sdk.interactions.create(model=MODEL, input="weather in Paris?", stream=True))
    names = [e.event_type for e in events]
    assert names[0] == "interaction.created"
    interaction_id = events[0].interaction.id  # type: ignore[union-attr]
    ids = [e.event_id for e in events if getattr(e, "event_id", None)]
    assert len(ids) >= 4
    # Resume after the third event: the server sends exactly the rest.
    rest = list(sdk.interactions.get(interaction_id, stream=True, last_event_id=ids[2]))
    rest_ids = [e.event_id for e in rest if getattr(e, "event_id", None)]
    assert rest_ids == ids[3:]
    final = sdk.interactions.get(interaction_id)
    assert final.id == interaction_id
    assert final.status == "requires_action"  # a client tool call is pending
    unary = sdk.interactions.create(model=MODEL, input="Say hi")
    assert unary.status == "completed"


def test_in_band_errors_and_drops(serve: Callable[..., ServerThread]) -> None:
    require("gemini_generate", "gemini_interactions")
    server = serve(
        [
            {"match": {"contains": "err"}, "faults": {"error": {"after": 2, "kind": "overloaded"}}},
            {"match": {"contains": "drop"}, "faults": {"drop_at_event": 2}},
        ]
    )
    sdk = client(server)
    # generateContent has no documented in-band error: the SDK yields the error element
    # as a chunk without candidates and raises nothing; polystream's decoder types it.
    chunks = list(sdk.models.generate_content_stream(model=MODEL, contents="err please"))
    assert any(c.candidates is None for c in chunks)  # the error element, as a chunk
    finishes = [c.candidates[0].finish_reason for c in chunks if c.candidates]
    assert "STOP" not in finishes
    raw = httpx.post(
        f"{server.base_url}/gemini/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
        json={"contents": [{"parts": [{"text": "err please"}]}]},
    ).content
    decoder = StreamDecoder("gemini_generate")
    decoder.feed(raw)
    decoder.close()
    result = decoder.result()
    assert result.status == "failed"
    assert result.error is not None and result.error.kind == "overloaded"
    assert result.error.retryable
    with pytest.raises(httpx2.RemoteProtocolError):
        list(sdk.models.generate_content_stream(model=MODEL, contents="drop it"))
    # Interactions states the error as an event of its own.
    events = list(sdk.interactions.create(model=MODEL, input="err please", stream=True))
    errors_seen = [e for e in events if e.event_type == "error"]
    assert len(errors_seen) == 1
    assert errors_seen[0].error.message == "Overloaded"  # type: ignore[union-attr]
    with pytest.raises(Exception, match="incomplete chunked read"):
        list(sdk.interactions.create(model=MODEL, input="drop it", stream=True))


def test_interactions_background(server: ServerThread) -> None:
    require("gemini_interactions")
    sdk = client(server)
    pending = sdk.interactions.create(model=MODEL, input="later please", background=True)
    assert pending.status == "in_progress"
    final = sdk.interactions.get(pending.id)
    assert final.status == "completed"
    assert final.id == pending.id
