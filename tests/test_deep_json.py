"""JSON nested past the depth bound (128 levels) is a typed error everywhere.

A payload 10,000 levels deep would make msgspec (and any walker of its value) give up
with a RecursionError: every stream decoder, ``polystream.decode``, the CLI, and the
request bodies of the gateway and the emulator check the nesting before parsing.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

import polystream
from polystream import StreamDecoder
from polystream.dialects.gemini_generate import Decoder as GeminiDecoder
from polystream.errors import BufferLimitExceeded, LocalProtocolError, PolystreamError
from polystream.events import ErrorEvent, ErrorInfo
from polystream.wire.jsonarray import DEFAULT_MAX_DEPTH as ARRAY_MAX_DEPTH
from polystream.wire.jsondepth import DEFAULT_MAX_DEPTH, JSONTooDeep, decode_body, too_deep

from .helpers import assert_chunking_invariant, feed_all, feed_steps, split_at

DEPTH = 10_000
DEEP = b"[" * DEPTH + b"]" * DEPTH
FIXTURES = Path(__file__).parent / "fixtures"

# One ordinary stream per SSE dialect; the deep event goes after its first event.
SSE_STREAMS = {
    "openai_chat": "reply_ok",
    "xai_chat": "skeleton",
    "openai_responses": "skeleton",
    "xai_responses": "skeleton",
    "anthropic_messages": "skeleton",
    "xai_messages": "tool_use",
    "gemini_generate": "skeleton",
    "gemini_interactions": "text",
}
DEEP_DATA = b'{"deep":' + DEEP + b"}"
# The 129th "[" of the data is past the bound: after '{"deep":' (8 characters).
MESSAGE = "event data nests deeper than max_depth=128 (at character 135 of its data)"


def _with_deep_event(dialect: str) -> tuple[bytes, bytes, int]:
    """The fixture, the fixture with the deep event after its first event, and the
    deep event's byte offset."""
    data = (FIXTURES / dialect / f"{SSE_STREAMS[dialect]}.sse").read_bytes()
    end = b"\r\n\r\n" if b"\r\n\r\n" in data else b"\n\n"
    first = data.index(end) + len(end)
    return data, data[:first] + b"data: " + DEEP_DATA + end + data[first:], first


def _events(dialect: str, data: bytes, **options: Any) -> list[Any]:
    decoder = StreamDecoder(dialect, **options)
    return decoder.feed(data) + decoder.close()


# -- the check itself ---------------------------------------------------------------------


def test_the_default_bound_is_128_everywhere() -> None:
    assert DEFAULT_MAX_DEPTH == 128
    assert ARRAY_MAX_DEPTH == 128


@pytest.mark.parametrize("text", [b"[" * 128 + b"]" * 128, "[" * 128 + "]" * 128])
def test_at_the_bound_is_accepted(text: bytes | str) -> None:
    assert too_deep(text) is None
    assert too_deep(text[:1] + text, 128) == 128


def test_the_first_bracket_past_the_bound_is_named() -> None:
    assert too_deep(b'{"a":[[[1]]],"b":[[[[2]]]]}', 4) == 20
    assert too_deep('{"a":[[[1]]],"b":[[[[2]]]]}', 4) == 20
    assert too_deep(b"[[[1]]]", 3) is None
    assert too_deep(b"[[[[1]]]]", 3) == 3


def test_brackets_in_strings_are_not_structure() -> None:
    brackets = '"' + "[{" * 200 + '\\"' + "[" * 200 + '"'
    assert too_deep("[" + brackets + "]", 2) is None
    assert too_deep(("[" + brackets + ",") * 3, 2) == 2 * len(brackets) + 4
    # A string still open at the end: what follows its quote is inside it.
    assert too_deep('["' + "[" * 300, 2) is None


def test_closers_bring_the_depth_back() -> None:
    assert too_deep(b"[[]]" * 100, 2) is None
    assert too_deep(b"]]]]" + b"[[[" + b"]]]", 3) is None


# -- every SSE dialect ----------------------------------------------------------------------


@pytest.mark.parametrize("dialect", sorted(SSE_STREAMS))
def test_a_deep_event_is_an_error_event_in_its_place(dialect: str) -> None:
    plain, data, offset = _with_deep_event(dialect)
    events = _events(dialect, data)
    error = ErrorEvent(
        error=ErrorInfo(
            kind="protocol",
            message=MESSAGE,
            dialect=dialect,
            event_index=1,
            byte_offset=offset,
        )
    )
    expected = _events(dialect, plain)
    before = _events(dialect, plain[:offset])
    # (What the first event gives, then the error, then the rest as without it.)
    position = len([e for e in before if type(e).__name__ != "Finish"])
    assert events[position] == error
    assert events[:position] + events[position + 1 :] == expected
    assert_chunking_invariant(lambda: StreamDecoder(dialect), data, events, seeds=5)


@pytest.mark.parametrize("dialect", sorted(SSE_STREAMS))
def test_a_deep_event_in_strict_mode_raises_buffer_limit_exceeded(dialect: str) -> None:
    _, data, offset = _with_deep_event(dialect)
    before = _events(dialect, data[:offset], strict=True)[:-1]  # (less its Finish)
    for chunks in ([data], [data[i : i + 1] for i in range(len(data))], split_at(data, [9, 400])):
        events, _, error = feed_steps(StreamDecoder(dialect, strict=True), chunks)
        assert events == before
        assert error == (
            "BufferLimitExceeded",
            f"{MESSAGE} (dialect {dialect}, event 1, byte {offset})",
            1,
            offset,
        )


@pytest.mark.parametrize("dialect", sorted(SSE_STREAMS))
def test_decode_keeps_what_came_before_and_after(dialect: str) -> None:
    plain, data, offset = _with_deep_event(dialect)
    expected = polystream.decode(plain, dialect).to_dict()
    result = polystream.decode(data, dialect).to_dict()
    assert result.pop("error") == {
        "kind": "protocol",
        "message": MESSAGE,
        "retryable": False,
        "event_index": 1,
        "byte_offset": offset,
    }
    expected.pop("error")
    assert result == expected
    with pytest.raises(BufferLimitExceeded) as caught:
        polystream.decode(data, dialect, strict=True)
    assert (caught.value.dialect, caught.value.event_index, caught.value.byte_offset) == (
        dialect,
        1,
        offset,
    )


@pytest.mark.parametrize("dialect", sorted(SSE_STREAMS))
def test_auto_detection_passes_over_a_deep_first_event(dialect: str) -> None:
    plain, _, _ = _with_deep_event(dialect)
    end = b"\r\n\r\n" if b"\r\n\r\n" in plain else b"\n\n"
    data = b"data: " + DEEP_DATA + end + plain
    events = _events("auto", data)
    assert events[0] == ErrorEvent(
        error=ErrorInfo(
            kind="protocol", message=MESSAGE, dialect=dialect, event_index=0, byte_offset=0
        )
    )


def test_the_bound_is_an_option() -> None:
    _, data, _ = _with_deep_event("openai_chat")
    shallow = data.replace(DEEP, b"[" * 8 + b"1" + b"]" * 8)
    error = polystream.decode(shallow, "openai_chat", max_depth=8).to_dict()["error"]
    assert error["message"] == (
        "event data nests deeper than max_depth=8 (at character 15 of its data)"
    )
    assert polystream.decode(shallow, "openai_chat", max_depth=9).to_dict()["error"] is None
    with pytest.raises(LocalProtocolError):
        StreamDecoder("openai_chat", max_depth=0)


# -- Gemini's JSON array, and the chunks its fast path reads itself ------------------------


def _gemini_chunk(text: str, usage: bytes) -> bytes:
    chunk = {
        "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
        "usageMetadata": "USAGE",
        "modelVersion": "gemini-3.8-flash",
        "responseId": "resp-1",
    }
    return msgspec.json.encode(chunk).replace(b'"USAGE"', usage)


def _gemini_stream(framing: str, deep_usage: bytes) -> bytes:
    usage = b'{"promptTokenCount":7,"candidatesTokenCount":1,"totalTokenCount":8}'
    chunks = [_gemini_chunk(f"w{i}", usage) for i in range(4)]
    chunks.append(_gemini_chunk("deep", deep_usage))
    chunks.append(_gemini_chunk("after", usage))
    if framing == "sse":
        return b"".join(b"data: " + c + b"\r\n\r\n" for c in chunks)
    return b"[" + b"\r\n,\r\n".join(chunks) + b"\r\n]"


def test_json_array_element_past_the_bound_is_a_framing_error() -> None:
    data = _gemini_stream("json_array", b'{"deep":' + DEEP + b"}")
    # (The framing names the byte of the bracket past the bound.)
    offset = data.index(b'{"deep":') + 8 + 126
    for strict in (False, True):
        for chunks in ([data], split_at(data, [100, 700, 5000])):
            events, _, error = feed_steps(GeminiDecoder(strict=strict), chunks)
            assert error == (
                "BufferLimitExceeded",
                f"element nested deeper than max_depth=128 (dialect json_array, event 4, "
                f"byte {offset})",
                4,
                offset,
            )
            assert "".join(e.delta for e in events if type(e).__name__ == "TextDelta") == (
                "w0w1w2w3"
            )
    with pytest.raises(BufferLimitExceeded):
        polystream.decode(data, "gemini_generate")


@pytest.mark.parametrize("depth", [126, 127, 1500])
def test_sse_usage_read_by_the_fast_path_is_bounded(depth: int) -> None:
    # 1,500 levels fit the window in which the fast path looks for a usage object.
    deep = b'{"deep":' + b"[" * depth + b"]" * depth + b"}"
    data = _gemini_stream("sse", deep)
    offset = data.index(b'data: {"candidates":[{"content":{"parts":[{"text":"deep"')

    class General(GeminiDecoder):
        _fast_paths = False

    for strict in (False, True):
        for chunks in ([data], split_at(data, [50, 900]), [data[:offset], data[offset:]]):
            fast = feed_steps(GeminiDecoder(strict=strict), chunks)
            assert fast == feed_steps(General(strict=strict), chunks)
    events = feed_all(GeminiDecoder, [data])
    errors = [e for e in events if type(e) is ErrorEvent]
    at = _gemini_chunk("deep", deep).index(b'{"deep":') + 8 + 126
    if depth + 2 <= 128:
        assert errors == []
    else:
        assert errors == [
            ErrorEvent(
                error=ErrorInfo(
                    kind="protocol",
                    message=MESSAGE.replace("135", str(at)),
                    dialect="gemini_generate",
                    event_index=4,
                    byte_offset=offset,
                )
            )
        ]


# -- the CLI --------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    # (The checkout this test imports polystream from.)
    env = {"PYTHONPATH": str(Path(polystream.__file__).parents[1]), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "polystream", *args],
        check=False,
        capture_output=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize("dialect", sorted(SSE_STREAMS))
def test_cli_decode_strict_of_a_deep_event(tmp_path: Path, dialect: str) -> None:
    _, data, offset = _with_deep_event(dialect)
    path = tmp_path / "deep.sse"
    path.write_bytes(data)
    for args in (("--strict", "--dialect", dialect), ("--strict", "--result")):
        done = _cli("decode", *args, str(path))
        assert done.returncode == 1
        assert (
            done.stderr
            == (
                f"polystream: error: {MESSAGE} (dialect {dialect}, event 1, byte {offset})\n"
            ).encode()
        )


def test_cli_decode_of_a_deep_event(tmp_path: Path) -> None:
    # Tolerant: the error is one event line, and the input decoded (exit 0, as for
    # any stream with a protocol error in it).
    _, data, offset = _with_deep_event("openai_chat")
    path = tmp_path / "deep.sse"
    path.write_bytes(data)
    tolerant = _cli("decode", "--dialect", "openai_chat", str(path))
    assert tolerant.returncode == 0
    assert tolerant.stderr == b""
    lines = [line for line in tolerant.stdout.splitlines() if b'"type":"error"' in line]
    assert [msgspec.json.decode(line) for line in lines] == [
        {
            "type": "error",
            "error": {
                "kind": "protocol",
                "message": MESSAGE,
                "dialect": "openai_chat",
                "event_index": 1,
                "byte_offset": offset,
            },
        }
    ]


def test_cli_decode_of_a_deep_array_element(tmp_path: Path) -> None:
    data = _gemini_stream("json_array", b'{"deep":' + DEEP + b"}")
    path = tmp_path / "deep.json"
    path.write_bytes(data)
    for args in (("decode",), ("decode", "--result"), ("frames",)):
        done = _cli(*args, str(path))
        assert done.returncode == 1, args
        assert done.stderr.startswith(
            b"polystream: error: element nested deeper than max_depth=128 (dialect json_array"
        )
        assert done.stderr.count(b"\n") == 1
        assert b"Traceback" not in done.stderr


# -- request bodies ---------------------------------------------------------------------------


def test_decode_body() -> None:
    assert decode_body(b'{"a":[[1]]}') == {"a": [[1]]}
    with pytest.raises(JSONTooDeep) as caught:
        decode_body(b'{"a":' + DEEP + b"}")
    assert str(caught.value) == "the request body nests deeper than 128 levels (at byte 132)"
    assert isinstance(caught.value, msgspec.DecodeError)
    with pytest.raises(msgspec.DecodeError):
        decode_body(b'{"a":')


def test_errors_are_polystream_errors() -> None:
    assert issubclass(BufferLimitExceeded, PolystreamError)
    rng = random.Random(5)
    # Random texts: the check never raises, whatever it is given.
    for _ in range(200):
        text = bytes(rng.choice(b'[]{}"\\a,') for _ in range(rng.randrange(300)))
        found = too_deep(text, 5)
        assert found is None or text[found : found + 1] in (b"[", b"{")


# -- the gateway and the emulator -----------------------------------------------------------

DEEP_BODY = (
    b'{"model":"m","max_tokens":10,"stream":true,'
    b'"messages":[{"role":"user","content":"x"}],"x":' + DEEP + b"}"
)
DEEP_BODY_AT = DEEP_BODY.index(DEEP) + 127  # (the body's own object is level 1)
PATHS = {
    "openai_chat": "/openai/v1/chat/completions",
    "openai_responses": "/openai/v1/responses",
    "anthropic_messages": "/anthropic/v1/messages",
    "gemini_generate": "/gemini/v1beta/models/g:streamGenerateContent",
    "gemini_interactions": "/gemini/v1beta/interactions",
}


@pytest.fixture
def upstream_with_a_deep_chunk() -> Iterator[tuple[str, bytes]]:
    """A Chat upstream on loopback whose stream has a deep chunk after its first."""
    from tests.gateway.conftest import AppThread

    plain, data, _ = _with_deep_event("openai_chat")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    upstream = AppThread(app).start()
    yield upstream.base_url, plain
    upstream.stop()


@pytest.fixture
def gateway(upstream_with_a_deep_chunk: tuple[str, bytes]) -> Iterator[str]:
    from polystream.gateway_core import GatewayConfig, Route, Upstream
    from polystream.server.gateway import create_gateway
    from tests.gateway.conftest import CANARY, GATEWAY_KEY, AppThread

    base_url, _ = upstream_with_a_deep_chunk
    upstream = Upstream(
        name="openai", dialect="openai_chat", base_url=base_url + "/v1", api_key=CANARY
    )
    config = GatewayConfig(
        upstreams={"openai": upstream},
        routes=[Route(model="*", upstream="openai", rewrite="gpt-5.4-nano")],
        api_key=GATEWAY_KEY,
    )
    server = AppThread(create_gateway(config)).start()
    yield server.base_url
    server.stop()


def _auth() -> dict[str, str]:
    from tests.gateway.conftest import GATEWAY_KEY

    return {
        "x-api-key": GATEWAY_KEY,
        "authorization": f"Bearer {GATEWAY_KEY}",
        "x-goog-api-key": GATEWAY_KEY,
    }


@pytest.mark.parametrize("dialect", sorted(PATHS))
def test_gateway_answers_a_deep_request_body_with_400(gateway: str, dialect: str) -> None:
    from polystream.request import error_body

    response = httpx.post(gateway + PATHS[dialect], content=DEEP_BODY, headers=_auth())
    assert response.status_code == 400
    message = f"the request body nests deeper than 128 levels (at byte {DEEP_BODY_AT})"
    assert response.json() == error_body(dialect, 400, message, kind="invalid_request")


def test_gateway_through_the_sdks_is_a_bad_request(gateway: str) -> None:
    import anthropic
    import openai

    deep: Any = 1
    for _ in range(200):  # (past the bound, within what the SDKs' json can write)
        deep = [deep]
    client = openai.OpenAI(base_url=gateway + "/openai/v1", api_key=_auth()["x-api-key"])
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], extra_body={"x": deep}
        )
    assert "nests deeper than 128 levels" in caught.value.message
    claude = anthropic.Anthropic(base_url=gateway + "/anthropic", api_key=_auth()["x-api-key"])
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.create(
            model="m",
            max_tokens=5,
            messages=[{"role": "user", "content": "x"}],
            extra_body={"x": deep},
        )


def test_gateway_upstream_deep_chunk_does_not_kill_the_stream(
    gateway: str, upstream_with_a_deep_chunk: tuple[str, bytes], caplog: pytest.LogCaptureFixture
) -> None:
    # The upstream's deep chunk is decoded as an error event in its place (see
    # test_a_deep_event_is_an_error_event_in_its_place): the client's stream carries on
    # with what came before and after it, and ends as the upstream's did.
    import anthropic

    claude = anthropic.Anthropic(base_url=gateway + "/anthropic", api_key=_auth()["x-api-key"])
    with claude.messages.stream(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
    ) as stream:
        message = stream.get_final_message()
    assert [block.text for block in message.content if block.type == "text"] == ["OK."]
    assert message.stop_reason == "end_turn"
    # The gateway says what it skipped, and where.
    _, _, offset = _with_deep_event("openai_chat")
    skipped = [r.getMessage() for r in caplog.records if "could not be read" in r.getMessage()]
    assert skipped == [
        f"upstream openai_chat event 1 at byte {offset} could not be read, skipped: "
        "event data nests deeper than max_depth=128 (at character 135 of its data)"
    ]


@pytest.mark.parametrize("dialect", sorted(PATHS))
def test_emulator_answers_a_deep_request_body_with_400(dialect: str) -> None:
    from polystream.scenario import Emulator

    answer = Emulator().answer(dialect, DEEP_BODY, content_type="application/json")
    plain = Emulator().answer(dialect, b"{nope", content_type="application/json")
    assert answer.status == plain.status == 400
    assert answer.plan == plain.plan  # the provider's own invalid-JSON error


def test_emulator_over_http() -> None:
    from polystream.scenario import Emulator
    from polystream.server import ServerThread

    server = ServerThread(Emulator()).start()
    try:
        response = httpx.post(
            server.base_url + PATHS["openai_chat"],
            content=DEEP_BODY,
            headers={"content-type": "application/json"},
        )
    finally:
        server.stop()
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


# -- the chunk-level guard of the SSE framing ----------------------------------------------


def test_depth_guard_flags_a_deep_text_however_it_is_cut() -> None:
    from polystream.wire.jsondepth import DepthGuard

    text = b'data: {"a":' + b"[" * 129 + b"]" * 129 + b"}\n\n"
    ok = b'data: {"a":' + b"[" * 127 + b"]" * 127 + b"}\n\n"
    for size in (1, 7, 100, len(text)):
        guard = DepthGuard(128)
        flags = [guard.feed(text[i : i + size]) for i in range(0, len(text), size)]
        assert any(flags), size
        guard = DepthGuard(128)
        assert not any(guard.feed(ok[i : i + size]) for i in range(0, len(ok), size)), size
    # Many shallow texts in one chunk: no check of each.
    assert not DepthGuard(128).feed(ok * 50)


def test_depth_guard_keeps_a_bounded_carry() -> None:
    from polystream.wire.jsondepth import DepthGuard

    guard = DepthGuard(128)
    for chunk in (b"]" * 1000, b"[]" * 1000, b"[" * 100, b"x" * 1000):
        for _ in range(100):
            guard.feed(chunk)
            assert len(guard._carry) <= 4 * 128 + len(chunk)


# -- tool arguments: JSON text inside a string, parsed by the accumulator and encoders -------


def _chat_with_deep_arguments() -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return b"data: " + msgspec.json.encode({**body, "choices": [choice]}) + b"\n\n"

    start = {"index": 0, "id": "call_1", "type": "function"}
    return (
        chunk({"role": "assistant", "content": None})
        + chunk({"tool_calls": [{**start, "function": {"name": "f", "arguments": ""}}]})
        + chunk({"tool_calls": [{"index": 0, "function": {"arguments": DEEP.decode()}}]})
        + chunk({}, "tool_calls")
        + b"data: [DONE]\n\n"
    )


def test_deep_tool_arguments_are_an_argument_error() -> None:
    from polystream.accumulate import Accumulator
    from polystream.errors import ToolArgumentsError

    data = _chat_with_deep_arguments()
    result = polystream.decode(data, "openai_chat")
    (call,) = result.tool_calls
    assert (call.arguments, call.error) == (
        None,
        "tool arguments nest deeper than 128 levels (at byte 128)",
    )
    accumulator = Accumulator(strict=True)
    accumulator.feed_all(_events("openai_chat", data))
    with pytest.raises(ToolArgumentsError, match="nest deeper than 128 levels"):
        accumulator.result()


@pytest.mark.parametrize(
    "target",
    [
        "anthropic_messages",
        "gemini_generate",
        "gemini_interactions",
        "openai_chat",
        "openai_responses",
        "xai_chat",
        "xai_messages",
        "xai_responses",
    ],
)
def test_deep_tool_arguments_transcode_to_every_dialect(target: str) -> None:
    from polystream import get_dialect
    from polystream.transcode import convert

    data = _chat_with_deep_arguments()
    out, losses = convert(data, target, source="openai_chat")
    decoder = StreamDecoder(target, keep_events=True)
    decoder.feed(out)
    decoder.close()
    assert decoder.result().status == "completed"
    get_dialect(target).rebuild(decoder.events)  # (the native object, arguments unparsed)
    if target == "gemini_generate":
        # Gemini's functionCall args are an object: arguments that do not parse are lost.
        assert "tool_call.arguments" in [loss.what for loss in losses]


def test_a_deep_upstream_error_body_is_kept_as_text() -> None:
    # An upstream's error status with a body nested past the bound: the call raises its
    # typed status error (the body kept as text), never a RecursionError.
    from polystream.call import StreamCall
    from polystream.errors import APIStatusError
    from polystream.request import Request
    from polystream.retry import RetryPolicy

    call = StreamCall(
        "openai_chat",
        Request(model="m", messages=[]),
        api_key="k",
        policy=RetryPolicy(max_retries=0),
    )
    body = b'{"error": ' + DEEP + b"}"
    with pytest.raises(APIStatusError) as raised:
        call.on_error_status(400, {}, body)
    assert raised.value.status_code == 400
    assert raised.value.kind == "invalid_request"


@pytest.mark.parametrize("kind", [str, bytes])
def test_many_shallow_brackets_are_not_deep(kind: type) -> None:
    # More opening brackets than the bound, none nested past it: the quick count says
    # "maybe" and the scan says no; one more level past the bound is found where it is.
    flat = "[" + ",".join(["{}", "[]"] * 200) + "]"
    deep = "[" * 128 + "{}" + "]" * 128
    assert too_deep(flat if kind is str else flat.encode()) is None
    assert too_deep(deep if kind is str else deep.encode()) == 128
