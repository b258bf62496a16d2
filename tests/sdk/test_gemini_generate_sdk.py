"""gemini_generate against the official google-genai SDK, on the same bytes.

``client.models.generate_content_stream`` is served the fixture bytes through an
injected ``httpx2.MockTransport`` (``HttpOptions.client_args={"transport": ...}``). The
SDK yields one ``GenerateContentResponse`` per chunk and does not merge them, so the
test folds its chunks the way a caller would (text per candidate, thoughts, function
calls, signatures, grounding chunks, the last usage and finish reason) and compares
with polystream's Result, events and rebuilt native object.

The SDK always requests ``?alt=sse`` and cannot read the JSON-array framing (it buffers
lines until braces balance, which never yields valid JSON for ``[{...}``): that is
asserted below, and the array fixtures are held to the SDK through rebuild equality
with their SSE twins (and tests/dialects/test_gemini_generate.py's byte-exact
cross-framing encoding).
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from polystream.accumulate import accumulate
from polystream.dialects.gemini_generate import Decoder, Encoder, rebuild
from polystream.events import ErrorEvent, Event, SignatureDelta
from tests.dialects.test_gemini_generate import CARRIED_SIG, foreign_events
from tests.helpers import FIXTURES

HERE = FIXTURES / "gemini_generate"
SSE = sorted(p for p in HERE.glob("*.sse") if p.name != "error_bare.sse")
ARRAYS = sorted(HERE.glob("*.jsonarray"))


def sdk_chunks(data: bytes, content_type: str = "text/event-stream") -> list[Any]:
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(str(request.url))
        return httpx2.Response(200, headers={"content-type": content_type}, content=data)

    client = genai.Client(
        api_key="test-key",
        http_options=types.HttpOptions(
            base_url="http://test/", client_args={"transport": httpx2.MockTransport(handler)}
        ),
    )
    out: list[Any] = []
    try:
        for chunk in client.models.generate_content_stream(model="gemini-3.8-flash", contents="hi"):
            out.append(chunk)
    finally:
        assert seen and seen[0].endswith(":streamGenerateContent?alt=sse")
    return out


def decode(data: bytes) -> list[Event]:
    decoder = Decoder()
    return decoder.feed(data) + decoder.close()


def fold_sdk(chunks: list[Any]) -> dict[str, Any]:
    """What a caller of the SDK gets by folding its chunks."""
    text: dict[int, str] = {}
    thoughts = ""
    calls: list[tuple[Any, Any, Any]] = []
    signatures: list[str] = []
    grounding: list[Any] = []
    usage = None
    finish: dict[int, str] = {}
    for chunk in chunks:
        if chunk.usage_metadata is not None:
            usage = chunk.usage_metadata
        for pos, cand in enumerate(chunk.candidates or []):
            number = cand.index if cand.index is not None else pos
            if cand.finish_reason is not None:
                finish[number] = getattr(cand.finish_reason, "value", cand.finish_reason)
            if cand.grounding_metadata is not None:
                grounding += [
                    c.model_dump(exclude_none=True)
                    for c in cand.grounding_metadata.grounding_chunks or []
                ]
            for part in (cand.content.parts if cand.content else None) or []:
                if part.thought_signature is not None:
                    signatures.append(base64.b64encode(part.thought_signature).decode())
                if part.text is not None:
                    if part.thought:
                        thoughts += part.text
                    else:
                        text[number] = text.get(number, "") + part.text
                call = part.function_call
                if call is not None and call.name is not None:
                    calls.append((call.name, call.args, call.id))
    return {
        "text": text,
        "thoughts": thoughts,
        "calls": calls,
        "signatures": signatures,
        "grounding": grounding,
        "usage": usage,
        "finish": finish,
    }


@pytest.mark.parametrize("path", SSE, ids=[p.name for p in SSE])
def test_sdk_agrees_on_every_sse_fixture(path: Path) -> None:
    data = path.read_bytes()
    sdk = fold_sdk(sdk_chunks(data))
    events = decode(data)
    result = accumulate(events)

    text: dict[int, str] = {}
    for block in result.blocks:
        if block.kind == "text":
            text[block.candidate] = text.get(block.candidate, "") + (block.text or "")
    assert {k: v for k, v in sdk["text"].items() if v} == {k: v for k, v in text.items() if v}
    assert sdk["thoughts"] == result.reasoning

    # Function calls: name and id always; arguments whenever the SDK has them whole
    # (a streamed call's fragments carry partialArgs, which the SDK does not assemble).
    ours = [(c.name, c.arguments, c.id) for c in result.tool_calls]
    assert [(n, i) for n, _, i in sdk["calls"]] == [(n, i) for n, _, i in ours]
    for (_, sdk_args, _), (_, args, _) in zip(sdk["calls"], ours, strict=True):
        if sdk_args is not None:
            assert sdk_args == args

    # Every thought signature, byte for byte, in order.
    assert sdk["signatures"] == [e.delta for e in events if isinstance(e, SignatureDelta)]

    # Grounding: the SDK's per-chunk grounding chunks, concatenated, are ours.
    ours_grounding = result.metadata.get("grounding", {}).get("groundingChunks", [])
    assert sdk["grounding"] == ours_grounding

    usage = sdk["usage"]
    if usage is not None and usage.total_token_count is not None:
        assert result.usage.total_tokens == usage.total_token_count
        assert result.usage.input_tokens == (usage.prompt_token_count or 0) + (
            usage.tool_use_prompt_token_count or 0
        )
        assert result.usage.output_tokens == (
            None
            if usage.candidates_token_count is None and usage.thoughts_token_count is None
            else (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
        )
        assert result.usage.reasoning_tokens == usage.thoughts_token_count
        assert result.usage.cache_read_tokens == usage.cached_content_token_count

    if sdk["finish"]:
        first = 0 if 0 in sdk["finish"] else min(sdk["finish"])
        assert result.finish_reason is not None
        assert result.finish_reason.raw == sdk["finish"][first]
        assert result.metadata.get("finish", {}).get("finishReason") == sdk["finish"].get(0)
    else:
        assert result.status in ("truncated", "failed")


@pytest.mark.parametrize("path", SSE, ids=[p.name for p in SSE])
def test_sdk_reads_the_rebuilt_native_object(path: Path) -> None:
    events = decode(path.read_bytes())
    # As the SDK reads a non-streaming response (unknown fields dropped, not rejected).
    native = types.GenerateContentResponse._from_response(
        response=copy.deepcopy(rebuild(events)), kwargs={}
    )
    result = accumulate(events)
    if native.candidates:
        first = native.candidates[0]
        parts = (first.content.parts if first.content else None) or []
        plain = "".join(p.text for p in parts if p.text is not None and not p.thought)
        assert plain == "".join(
            b.text or "" for b in result.blocks if b.kind == "text" and b.candidate == 0
        )
        calls = [p.function_call for p in parts if p.function_call is not None]
        assert [(c.name, c.args, c.id) for c in calls] == [
            (c.name, c.arguments, c.id) for c in result.tool_calls
        ]
        signatures = [
            base64.b64encode(p.thought_signature).decode() for p in parts if p.thought_signature
        ]
        assert signatures == [
            b.signature for b in result.blocks if b.signature and b.candidate == 0
        ]
    if native.usage_metadata is not None and native.usage_metadata.total_token_count is not None:
        assert native.usage_metadata.total_token_count == result.usage.total_tokens


def test_sdk_raises_the_bare_json_error_we_report() -> None:
    data = (HERE / "error_bare.sse").read_bytes()
    with pytest.raises(errors.ServerError) as info:
        sdk_chunks(data)
    events = decode(data)
    error = next(e.error for e in events if isinstance(e, ErrorEvent))
    assert info.value.code == error.http_status == 503
    assert info.value.status == error.code == "UNAVAILABLE"
    assert info.value.message == error.message


def test_sdk_raises_our_error_element_reframed_as_sse() -> None:
    events = decode((HERE / "error_element.jsonarray").read_bytes())
    data = Encoder().encode_all(events)
    with pytest.raises(errors.ClientError) as info:
        sdk_chunks(data)
    assert (info.value.code, info.value.status) == (429, "RESOURCE_EXHAUSTED")


@pytest.mark.parametrize("path", ARRAYS, ids=[p.name for p in ARRAYS])
def test_sdk_cannot_read_the_json_array_framing(path: Path) -> None:
    with pytest.raises(errors.UnknownApiResponseError):
        sdk_chunks(path.read_bytes(), "application/json")
    twin = path.with_suffix(".sse")
    if twin.exists():
        # Held to the SDK through its SSE twin: the same rebuilt response.
        assert rebuild(decode(path.read_bytes())) == rebuild(decode(twin.read_bytes()))
    # Re-framed as SSE, the SDK reads what we decoded from the array.
    events = decode(path.read_bytes())
    if not any(isinstance(e, ErrorEvent) for e in events):
        sdk = fold_sdk(sdk_chunks(Encoder().encode_all(events)))
        assert sdk["text"].get(0, "") == accumulate(events).text


def test_sdk_accepts_another_dialects_events() -> None:
    data = Encoder().encode_all(foreign_events())
    chunks = sdk_chunks(data)
    sdk = fold_sdk(chunks)
    assert sdk["text"] == {0: "Checking the weather."}
    assert sdk["thoughts"] == "Let me think."
    assert sdk["calls"] == [("get_weather", {"city": "Paris"}, "toolu_01")]
    # The carrier (origin marker + the signature) is base64: the SDK reads it as bytes.
    assert sdk["signatures"] == [CARRIED_SIG]
    assert sdk["finish"] == {0: "STOP"}
    usage = sdk["usage"]
    assert (usage.prompt_token_count, usage.candidates_token_count) == (30, 30)
    assert (usage.thoughts_token_count, usage.total_token_count) == (12, 72)
    assert usage.cached_content_token_count == 10
