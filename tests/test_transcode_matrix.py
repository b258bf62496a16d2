"""The transcoding matrix: every stream fixture of every dialect, converted to each
target, consumed by the target's official SDK streaming helper.

For a source that completed (or stopped early on purpose), the SDK must accept the
converted stream, and its final object must agree with polystream's Result of the
*source* on text, tool calls (names and parsed arguments), finish reason (mapped through
the unified value) and usage where the target carries it. For a source that failed or
was truncated, the converted stream must say so in the target's own way: the SDK raises
or reports a failure, never a clean completion.

``google-genai`` only consumes SSE (``alt=sse``); for the JSON-array framing the test
asserts that the SDK rejects it, and checks the converted array through polystream's
own decoder against the SSE conversion instead.

Where an SDK *helper* rejects a valid provider stream, the test asserts that it does
(so a fixed SDK shows up here) and checks the SDK's raw iteration instead:

* ``openai`` ``responses.stream().get_final_response()`` raises ``RuntimeError`` for a
  stream that ends ``response.incomplete`` or ``response.failed``;
* ``openai`` ``chat.completions.stream().get_final_completion()`` raises
  ``LengthFinishReasonError`` on a ``length`` finish, merges two tool calls that
  reuse an ``index`` with different ids, and raises ``AttributeError`` on a custom
  (free-form) tool call (its parser reads ``custom.name`` of the snapshot's dict);
* ``google-genai`` has no types for the legacy Interactions schema (its events come out
  as unknown events).

Tool arguments are compared where the source's arguments are valid JSON; a call whose
arguments were cut off or are not JSON (custom tools) is compared by name.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gtypes

from polystream import Result, decode
from polystream.transcode import convert

from .helpers import fixture_dialect, stream_fixtures

TARGETS = [
    "openai_responses",
    "openai_chat",
    "anthropic_messages",
    "gemini_generate",
    "gemini_generate:json_array",
    "gemini_interactions",
]
FIXTURES = stream_fixtures()
CASES = [(path, target) for path in FIXTURES for target in TARGETS]
IDS = [f"{p.parent.name}/{p.name}->{t}" for p, t in CASES]

_SERVED: list[bytes] = [b""]


def _handler(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=_SERVED[0])


def _http() -> httpx2.Client:
    return httpx2.Client(transport=httpx2.MockTransport(_handler))


@functools.cache
def _openai() -> openai.OpenAI:
    return openai.OpenAI(api_key="x", base_url="http://test/v1", http_client=_http(), max_retries=0)


@functools.cache
def _anthropic() -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="x", base_url="http://test", http_client=_http(), max_retries=0
    )


@functools.cache
def _genai() -> genai.Client:
    return genai.Client(
        api_key="x", http_options=gtypes.HttpOptions(base_url="http://test", httpx_client=_http())
    )


@functools.cache
def _source(path: Path) -> Result:
    return decode(path.read_bytes(), fixture_dialect(path))


def _expected_calls(result: Result) -> list[tuple[str | None, Any]]:
    return [(c.name, c.arguments) for c in result.tool_calls]


def _same_calls(seen: list[tuple[str | None, Any]], expected: list[tuple[str | None, Any]]) -> bool:
    if [name for name, _ in seen] != [name for name, _ in expected]:
        return False
    return all(
        want is None
        or got is None
        or got == want
        # A free-form input (text) in a dialect whose tool input is an object: carried
        # as {"input": text} (the tool_input:text loss).
        or (isinstance(want, str) and got == {"input": want})
        for (_, got), (_, want) in zip(seen, expected, strict=True)
    )


class Seen:
    """What an SDK reported, in comparable terms."""

    def __init__(
        self,
        text: str,
        calls: list[tuple[str | None, Any]],
        finish: str | None,
        input_tokens: int | None,
        output_tokens: int | None,
        ok: bool,
    ) -> None:
        self.text = text
        self.calls = calls
        self.finish = finish
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.ok = ok


def _args(text: str | None) -> Any:
    if text is None:
        return None
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return None  # not JSON (a custom tool's input, or cut off): compared by name


def _via_openai_responses(data: bytes) -> Seen:
    try:
        with _openai().responses.stream(model="m", input="x") as stream:
            response = stream.get_final_response()
    except RuntimeError as exc:
        # The helper only returns `response.completed` streams, and needs
        # `response.created` first (a resumed stream has none); documented above.
        assert "response.completed" in str(exc) or "response.created" in str(exc)
        response = None
        for event in _openai().responses.create(model="m", input="x", stream=True):
            if event.type in ("response.completed", "response.incomplete", "response.failed"):
                response = event.response
        assert response is not None
    calls = [
        (item.name, _args(item.arguments) if item.type == "function_call" else None)
        for item in response.output
        if item.type in ("function_call", "custom_tool_call")
    ]
    usage = response.usage
    text = "".join(
        part.text
        for item in response.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text"
    )
    return Seen(
        text,
        calls,
        response.incomplete_details.reason if response.incomplete_details else None,
        usage.input_tokens if usage else None,
        usage.output_tokens if usage else None,
        response.status in ("completed", "incomplete"),
    )


def _chat_raw(data: bytes) -> Seen:
    """The SDK's raw iteration (``stream=True``), folded by call id (never by index alone)."""
    text: list[str] = []
    calls: dict[tuple[int, str], list[Any]] = {}
    current: dict[int, tuple[int, str]] = {}
    finish = None
    usage = None
    for chunk in _openai().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True
    ):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            if choice.delta.content:
                text.append(choice.delta.content)
            for call in choice.delta.tool_calls or []:
                # A custom call's fragment: ``custom`` (not in the SDK's chunk model).
                custom = getattr(call, "custom", None)
                custom = custom if isinstance(custom, dict) else {}
                if call.id:
                    current[call.index] = (call.index, call.id)
                    name = call.function.name if call.function else custom.get("name")
                    calls[current[call.index]] = [name, ""]
                key = current[call.index]
                if call.function and call.function.arguments:
                    calls[key][1] += call.function.arguments
                elif custom.get("input"):
                    calls[key][1] += custom["input"]
            if choice.finish_reason:
                finish = choice.finish_reason
    return Seen(
        "".join(text),
        [(name, _args(args)) for name, args in calls.values()],
        finish,
        usage.prompt_tokens if usage else None,
        usage.completion_tokens if usage else None,
        finish is not None,
    )


def _via_openai_chat(data: bytes) -> Seen:
    if b'"type":"custom"' in data:
        # The helper cannot finish a custom tool call (documented above).
        with (
            pytest.raises(AttributeError, match="'dict' object has no attribute 'name'"),
            _openai().chat.completions.stream(
                model="m", messages=[{"role": "user", "content": "x"}]
            ) as stream,
        ):
            stream.get_final_completion()
        return _chat_raw(data)
    try:
        with _openai().chat.completions.stream(
            model="m", messages=[{"role": "user", "content": "x"}]
        ) as stream:
            completion = stream.get_final_completion()
    except openai.LengthFinishReasonError:
        # The helper refuses every `length` finish (documented above).
        # (any choice's `length` counts, not only choice 0's)
        return _chat_raw(data)
    choice = completion.choices[0]
    calls = [
        (c.function.name, _args(c.function.arguments)) for c in choice.message.tool_calls or []
    ]
    raw = _chat_raw(data)
    if len(raw.calls) != len(calls):
        # The helper merged calls that reuse an index (documented above); raw iteration
        # keyed by id is what the stream says.
        assert len(calls) < len(raw.calls)
        return raw
    usage = completion.usage
    return Seen(
        choice.message.content or "",
        calls,
        choice.finish_reason,
        usage.prompt_tokens if usage else None,
        usage.completion_tokens if usage else None,
        True,
    )


def _via_anthropic(data: bytes) -> Seen:
    with _anthropic().messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    ) as stream:
        message = stream.get_final_message()
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = [(b.name, b.input) for b in message.content if b.type == "tool_use"]
    usage = message.usage
    total_input = (
        usage.input_tokens
        + (usage.cache_read_input_tokens or 0)
        + (usage.cache_creation_input_tokens or 0)
    )
    return Seen(text, calls, message.stop_reason, total_input, usage.output_tokens, True)


def _via_gemini(data: bytes) -> Seen:
    chunks = list(_genai().models.generate_content_stream(model="m", contents="x"))
    text, calls = [], []
    finish = None
    usage = None
    for chunk in chunks:
        if chunk.usage_metadata is not None:
            usage = chunk.usage_metadata
        for candidate in chunk.candidates or []:
            if candidate.index not in (None, 0):
                continue
            if candidate.finish_reason is not None:
                finish = candidate.finish_reason.value
            for part in (candidate.content.parts if candidate.content else None) or []:
                if part.text is not None and not part.thought:
                    text.append(part.text)
                call = part.function_call
                if call is not None:
                    if call.partial_args or call.will_continue or (call.name is None):
                        # Streamed arguments: the SDK has no assembler; compare by name.
                        if call.name is not None:
                            calls.append((call.name, None))
                    else:
                        calls.append((call.name, call.args or {}))
    input_tokens = None
    output_tokens = None
    if usage is not None:
        input_tokens = (usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0)
        output_tokens = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    return Seen("".join(text), calls, finish, input_tokens, output_tokens, finish is not None)


def _via_interactions(data: bytes) -> Seen:
    text: list[str] = []
    calls: dict[str, list[Any]] = {}
    order: list[str] = []
    status = None
    input_tokens = output_tokens = None
    for event in _genai().interactions.create(model="m", input="x", stream=True):
        kind = getattr(event, "event_type", None)
        if kind == "step.start":
            step = event.step  # type: ignore[union-attr]
            stype = getattr(step, "type", None)
            if stype == "function_call":
                key = str(event.index)  # type: ignore[union-attr]
                calls[key] = [step.name, "", step.arguments]
                order.append(key)
            elif stype == "model_output":
                # ``ModelOutputStep.content``: output the step starts with, before its deltas.
                for item in step.content or []:
                    if getattr(item, "type", None) == "text":
                        text.append(item.text)
        elif kind == "step.delta":
            delta = event.delta  # type: ignore[union-attr]
            dtype = getattr(delta, "type", None)
            if dtype == "text":
                text.append(delta.text)
            elif dtype == "arguments_delta" and str(event.index) in calls:  # type: ignore[union-attr]
                # google-genai ``ArgumentsDelta.arguments``: a fragment of the JSON text.
                calls[str(event.index)][1] += delta.arguments or ""  # type: ignore[union-attr]
        elif kind == "interaction.completed":
            interaction = event.interaction  # type: ignore[union-attr]
            status = interaction.status
            usage = interaction.usage
            if usage is not None:
                # Tool-use prompt tokens are reported beside the prompt, not inside it
                # (as generateContent's toolUsePromptTokenCount); canonical input has both.
                input_tokens = (usage.total_input_tokens or 0) + (usage.total_tool_use_tokens or 0)
                output_tokens = (usage.total_output_tokens or 0) + (usage.total_thought_tokens or 0)
    found = []
    for key in order:
        name, streamed, whole = calls[key]
        if not streamed:
            found.append((name, whole or {}))
            continue
        try:
            found.append((name, json.loads(streamed)))
        except ValueError:
            # Arguments cut off or not JSON: unparsed, as polystream's ToolCall says.
            found.append((name, None))
    # ``InteractionStatus`` values that end a turn without failing it.
    ended = ("completed", "incomplete", "requires_action", "requires_continuation")
    return Seen("".join(text), found, status, input_tokens, output_tokens, status in ended)


CONSUMERS = {
    "openai_responses": _via_openai_responses,
    "openai_chat": _via_openai_chat,
    "anthropic_messages": _via_anthropic,
    "gemini_generate": _via_gemini,
    "gemini_interactions": _via_interactions,
}


@pytest.mark.parametrize(("path", "target"), CASES, ids=IDS)
def test_official_sdk_accepts_converted_stream(path: Path, target: str) -> None:
    source = _source(path)
    dialect, _, framing = target.partition(":")
    options = {"target_options": {"framing": framing}} if framing else {}
    data, losses = convert(path.read_bytes(), dialect, source=fixture_dialect(path), **options)
    back = decode(data, dialect)
    # polystream reads its own output back to the same reply.
    assert back.text == source.text
    assert _same_calls(_expected_calls(back), _expected_calls(source))
    assert back.status == source.status or (
        source.status == "incomplete" and back.status in ("incomplete", "completed")
    ), (source.status, back.status, [loss.what for loss in losses])
    if framing == "json_array":
        _SERVED[0] = data
        if data.strip() == b"[]":
            # Nothing of the source could be carried (a cut media stream): the SDK reads
            # no element, so it has nothing to reject and reads no candidate.
            chunks = list(_genai().models.generate_content_stream(model="m", contents="x"))
            assert not any(chunk.candidates for chunk in chunks)
        else:
            with pytest.raises(genai_errors.UnknownApiResponseError):
                list(_genai().models.generate_content_stream(model="m", contents="x"))
        sse, _ = convert(path.read_bytes(), dialect, source=fixture_dialect(path))
        sse_result = decode(sse, dialect).to_dict()
        array_result = back.to_dict()
        for result in (sse_result, array_result):
            result["blocks"] = None
            if result["error"]:  # where a cut was detected differs between framings
                result["error"] = {k: result["error"][k] for k in ("kind", "retryable")}
        assert sse_result == array_result
        return
    _SERVED[0] = data
    consume = CONSUMERS[dialect]
    if (
        dialect == "gemini_interactions"
        and path.name == "legacy.sse"
        and (fixture_dialect(path) == "gemini_interactions")
    ):
        # Same-dialect re-encoding keeps the legacy schema, which the SDK does not type.
        kinds = {
            type(e).__name__
            for e in _genai().interactions.create(model="m", input="x", stream=True)
        }
        assert "UnknownInteractionSSEEvent" in kinds
        return
    if source.status in ("failed", "truncated"):
        try:
            seen = consume(data)
        except Exception:
            return  # the SDK saw the failure
        assert not seen.ok or seen.finish is None or back.status in ("failed", "truncated")
        return
    seen = consume(data)
    assert seen.ok
    assert seen.text == source.text
    assert _same_calls(seen.calls, _expected_calls(source)), (seen.calls, _expected_calls(source))
    if source.usage.output_tokens is not None and seen.output_tokens is not None:
        assert seen.output_tokens == source.usage.output_tokens
    if source.usage.input_tokens is not None and seen.input_tokens is not None:
        assert seen.input_tokens == source.usage.input_tokens
    assert back.finish_reason is not None and source.finish_reason is not None
    if back.finish_reason.unified != source.finish_reason.unified:
        # Only where the target has no word for the source's reason, and says so.
        assert any(loss.what.startswith("finish") for loss in losses), (
            source.finish_reason,
            back.finish_reason,
        )
