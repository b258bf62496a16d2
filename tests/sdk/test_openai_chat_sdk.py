"""The official ``openai`` SDK on the same bytes, for ``openai_chat`` and ``xai_chat``.

For every fixture, the SDK's own accumulated final object (the ``.stream()`` helper's
``get_final_completion()`` and, separately, raw iteration with ``stream=True`` folded by
the SDK's ``ChatCompletionStreamState``) must agree with polystream's rebuilt
``ChatCompletion`` and unified Result on content, refusal, reasoning, tool calls
(names and parsed arguments), finish reason and usage — except where the SDK itself
deviates, which is asserted here case by case (and listed in the docs):

* an in-band error chunk: the SDK raises ``APIError`` (polystream: ErrorEvent, failed);
* ``finish_reason: "length"``: the ``.stream()`` helper raises ``LengthFinishReasonError``
  even without a response format (raw iteration works);
* usage not on the last chunk (a moderation chunk after the usage chunk; xAI usage on
  the second-to-last chunk): the SDK keeps the *last* chunk's usage, i.e. none;
* a tool index reused with a new id: the SDK merges both calls into one, concatenating
  ids, names and arguments (polystream keeps two calls);
* a no-argument tool: the SDK leaves ``arguments`` as ``""`` (not JSON); polystream
  parses it to ``{}`` and the rebuilt object says ``"{}"``;
* a truncated stream: the SDK returns a completion without complaint (polystream:
  ``truncated``);
* xAI's whole tool calls with the finish in one chunk: the helper's
  ``tool_calls.function.arguments.done`` fires for the first call only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState

from polystream import StreamDecoder, decode_events, get_dialect
from polystream import accumulate_events as accumulate
from tests.dialects.test_openai_chat import foreign_events
from tests.helpers import fixture_dialect, stream_fixtures

FIXTURES = stream_fixtures("openai_chat") + stream_fixtures("xai_chat")
IDS = [f"{fixture_dialect(p)}/{p.name}" for p in FIXTURES]

SDK_RAISES: dict[str, type[Exception]] = {
    "openai_chat/error_mid_stream.sse": openai.APIError,
    "openai_chat/n2_choices.sse": openai.LengthFinishReasonError,
    "openai_chat/openrouter_error_mid_stream.sse": openai.APIError,
}
RAW_RAISES: dict[str, type[Exception]] = {
    "openai_chat/error_mid_stream.sse": openai.APIError,
    "openai_chat/openrouter_error_mid_stream.sse": openai.APIError,
}
SDK_LOSES_USAGE = {"openai_chat/usage_then_moderation.sse", "xai_chat/usage_second_to_last.sse"}
SDK_MERGES_IDS = {"openai_chat/tool_index_reused.sse"}


def client_for(data: bytes) -> openai.OpenAI:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    return openai.OpenAI(
        api_key="x",
        base_url="http://test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def _args(text: str | None) -> Any:
    # "" is what a no-argument tool streams; both sides read it as {} (see the docstring).
    return json.loads(text) if text and text.strip() else {}


def sdk_view(completion: Any, *, parse: bool = True) -> list[dict[str, Any]]:
    out = []
    for choice in completion.choices:
        message = choice.message
        out.append(
            {
                "index": choice.index,
                "content": message.content,
                "refusal": message.refusal,
                "reasoning": getattr(message, "reasoning_content", None),
                "tools": [
                    (
                        t.id,
                        t.function.name,
                        _args(t.function.arguments) if parse else t.function.arguments,
                    )
                    for t in message.tool_calls or []
                ],
                "finish_reason": choice.finish_reason,
            }
        )
    return out


def our_view(native: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for choice in native["choices"]:
        message = choice["message"]
        out.append(
            {
                "index": choice["index"],
                "content": message["content"],
                "refusal": message["refusal"],
                "reasoning": message.get("reasoning_content"),
                "tools": [
                    (t["id"], t["function"]["name"], _args(t["function"]["arguments"]))
                    for t in message.get("tool_calls", [])
                ],
                "finish_reason": choice["finish_reason"],
            }
        )
    return out


def _native(path: Path) -> dict[str, Any]:
    decoder = StreamDecoder(fixture_dialect(path), keep_events=True)
    decoder.feed(path.read_bytes())
    decoder.close()
    return decoder.native()


def _usage(sdk_usage: Any) -> Any:
    return None if sdk_usage is None else sdk_usage.model_dump(exclude_none=True)


def _compare(key: str, completion: Any, native: dict[str, Any]) -> None:
    merges = key in SDK_MERGES_IDS
    sdk, ours = sdk_view(completion, parse=not merges), our_view(native)
    if merges:
        # The SDK folds both calls into one: ids, names and arguments concatenated.
        (merged,) = sdk[0]["tools"]
        assert merged == (
            "".join(t[0] for t in ours[0]["tools"]),
            "".join(t[1] for t in ours[0]["tools"]),
            '{"q": "a"}{"q": "b"}',
        )
        assert len(ours[0]["tools"]) == 2
        sdk[0]["tools"] = ours[0]["tools"]
    assert sdk == ours
    if key in SDK_LOSES_USAGE:
        assert completion.usage is None
        assert native["usage"] is not None and native["usage"]["total_tokens"] > 0
    else:
        assert _usage(completion.usage) == native["usage"]


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_stream_helper_agrees(path: Path) -> None:
    key = f"{fixture_dialect(path)}/{path.name}"
    client = client_for(path.read_bytes())
    stream = client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "hi"}])
    if key in SDK_RAISES:
        with pytest.raises(SDK_RAISES[key]), stream as events:
            events.get_final_completion()
        return
    with stream as events:
        completion = events.get_final_completion()
    native = _native(path)
    _compare(key, completion, native)
    # the unified Result agrees with the SDK on choice 0 as well
    result = accumulate(decode_events(path.read_bytes(), fixture_dialect(path)))
    choice = sdk_view(completion, parse=key not in SDK_MERGES_IDS)[0]
    assert result.text == (choice["content"] or "")
    assert result.refusal == choice["refusal"]
    if key not in SDK_MERGES_IDS:
        assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == choice["tools"]
    assert result.finish_reason is not None or key.endswith("truncated.sse")
    if result.finish_reason is not None:
        assert result.finish_reason.raw == choice["finish_reason"]


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_raw_iteration_agrees(path: Path) -> None:
    key = f"{fixture_dialect(path)}/{path.name}"
    client = client_for(path.read_bytes())
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    state = ChatCompletionStreamState()
    if key in RAW_RAISES:
        with pytest.raises(RAW_RAISES[key]):
            for chunk in stream:
                state.handle_chunk(chunk)
        return
    for chunk in stream:
        state.handle_chunk(chunk)
    _compare(key, state.current_completion_snapshot, _native(path))


def test_truncated_stream_is_not_flagged_by_the_sdk() -> None:
    path = next(p for p in FIXTURES if p.name == "truncated.sse")
    with client_for(path.read_bytes()).chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "hi"}]
    ) as events:
        completion = events.get_final_completion()
    assert completion.choices[0].message.content == "Once upon a time"
    assert completion.choices[0].finish_reason is None
    assert accumulate(decode_events(path.read_bytes(), "openai_chat")).status == "truncated"


@pytest.mark.parametrize("dialect", ["openai_chat", "xai_chat"])
def test_sdk_accepts_a_stream_encoded_from_another_dialect(dialect: str) -> None:
    events = foreign_events()
    data = get_dialect(dialect).encoder().encode_all(events)
    with client_for(data).chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        completion = stream.get_final_completion()
    (choice,) = completion.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == "Checking both."
    assert choice.message.reasoning_content == "Think about both cities."  # type: ignore[attr-defined]
    assert [
        (t.id, t.function.name, json.loads(t.function.arguments))
        for t in choice.message.tool_calls or []
    ] == [
        ("toolu_A", "get_weather", {"city": "Paris"}),
        ("toolu_B", "get_weather", {"city": "Tokyo"}),
    ]
    assert choice.finish_reason == "tool_calls"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.total_tokens) == (20, 65)
    assert completion.id.startswith("chatcmpl-")
    # and it agrees with polystream's own rebuild of the same events
    assert sdk_view(completion) == our_view(get_dialect(dialect).rebuild(events))


def _other_fixtures() -> list[Path]:
    return [p for p in stream_fixtures() if not fixture_dialect(p).endswith("_chat")]


@pytest.mark.parametrize(
    "path", _other_fixtures(), ids=[f"{fixture_dialect(p)}/{p.name}" for p in _other_fixtures()]
)
def test_sdk_accepts_every_other_dialect_transcoded(path: Path) -> None:
    source = fixture_dialect(path)
    events = decode_events(path.read_bytes(), source)
    result = accumulate(events)
    data = get_dialect("openai_chat").encoder().encode_all(events)
    stream = client_for(data).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    state = ChatCompletionStreamState()
    if result.status == "failed" and any(b'"error"' in line for line in data.split(b"\n\n")):
        with pytest.raises(openai.APIError):
            for chunk in stream:
                state.handle_chunk(chunk)
        return
    for chunk in stream:
        state.handle_chunk(chunk)
    if result.status == "truncated" and not data:
        return
    snapshot = state.current_completion_snapshot
    choice0 = next(c for c in snapshot.choices if c.index == 0) if snapshot.choices else None
    text = (choice0.message.content or "") if choice0 else ""
    assert text == result.text
    tool_calls = (choice0.message.tool_calls or []) if choice0 else []
    # Arguments as text: a custom tool's input or a call cut by max_tokens is not JSON.
    # A free-form call is Chat's custom call (its ``custom`` a dict in the snapshot).
    calls = [
        (t.custom["name"], t.custom["input"])  # type: ignore[attr-defined]
        if t.type == "custom"
        else (t.function.name, t.function.arguments)
        for t in tool_calls
    ]
    assert calls == [(c.name, c.arguments_json) for c in result.tool_calls]


def _done_events(path: Path) -> list[tuple[int, str]]:
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
    with client_for(path.read_bytes()).chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=[tool]
    ) as stream:
        return [
            (e.index, e.arguments) for e in stream if e.type == "tool_calls.function.arguments.done"
        ]


def test_sdk_misses_the_last_done_event_for_whole_xai_tool_calls() -> None:
    """xAI sends both calls and finish_reason in one chunk: the SDK helper fires
    ``tool_calls.function.arguments.done`` for the first call only (it checks the
    finish before walking the chunk's calls). polystream ends both blocks."""
    xai = FIXTURES[[p.name for p in FIXTURES].index("whole_tool_calls.sse")]
    assert _done_events(xai) == [(0, '{"city":"Paris"}')]
    ends = [
        e for e in decode_events(xai.read_bytes(), "xai_chat") if type(e).__name__ == "BlockEnd"
    ]
    assert len(ends) == 3  # reasoning + both tool calls
    # The same calls streamed in fragments (OpenAI) get both done events.
    openai_path = next(p for p in FIXTURES if p.name == "parallel_tool_calls.sse")
    assert [index for index, _ in _done_events(openai_path)] == [0, 1]
