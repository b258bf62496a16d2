"""The contestants: polystream and its peers, each turning the same bytes into the
same answer (the final text and the tool calls' arguments).

Each peer has a ``prepare(workload, level)`` that does the set-up that is not
measured (imports, building an SDK client around a mock transport) and returns a
zero-argument ``run`` callable. ``run()`` processes the whole workload once and returns
an :class:`Outcome`; when only part of a run is to be counted (the SDKs at the core
level count iteration + accumulation, not the request that opens the stream), ``run``
sets ``Outcome.elapsed`` itself.

Two levels, compared like for like:

* ``core`` — bytes in memory to the final result. polystream: ``polystream.decode``.
  SDKs: the lowest level that still builds their final object from bytes: an
  ``httpx2.MockTransport`` answers with the whole body, and only iteration +
  accumulation is counted.
* ``http`` — through the HTTP client: a mock transport feeds the body cut at event
  boundaries (one chunk per wire event, as a network delivers a token stream), and
  the whole call is counted (request, iteration, accumulation). polystream:
  ``httpx.MockTransport`` + :class:`polystream.StreamDecoder`.

Peers that cannot read a workload (the SDKs on Gemini's JSON array, ``httpx-sse`` on a
non-SSE body) say so through :func:`applies`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from benchmarks.workloads import Workload

__all__ = ["LEVELS", "PEERS", "Outcome", "Peer", "applies", "check", "prepare"]

LEVELS = ("core", "http")

CLOCK_ENV = "POLYSTREAM_BENCH_CLOCK"
"""``wall`` switches every timing to wall-clock time (default: CPU time)."""

# CPU time of this process: the work measured is CPU-bound (the transports are mocks),
# and CPU time is not inflated by other processes on a busy machine, as wall time is.
clock = time.perf_counter if os.environ.get(CLOCK_ENV) == "wall" else time.process_time
Runner = Callable[[], "Outcome"]


@dataclass
class Outcome:
    """What a peer produced, normalised for comparison.

    Attributes:
        text: The final visible text.
        tools: ``(name, arguments)`` per tool call; arguments as JSON text or parsed.
        elapsed: Seconds to count, when the peer excludes part of its run.
        first_event: Seconds from the start to the first text/argument delta.
    """

    text: str
    tools: list[tuple[str | None, Any]] = field(default_factory=list)
    elapsed: float | None = None
    first_event: float | None = None


def check(work: Workload, outcome: Outcome) -> str | None:
    """None when ``outcome`` is the workload's correct answer, else what differs."""
    if outcome.text != work.text:
        n = next(
            (i for i, (a, b) in enumerate(zip(outcome.text, work.text, strict=False)) if a != b),
            min(len(outcome.text), len(work.text)),
        )
        return (
            f"text differs at {n} (got {len(outcome.text)} chars, want {len(work.text)}): "
            f"{outcome.text[n : n + 30]!r} vs {work.text[n : n + 30]!r}"
        )
    if len(outcome.tools) != len(work.tools):
        return f"{len(outcome.tools)} tool calls, want {len(work.tools)}"
    for (name, args), (want_name, want_args) in zip(outcome.tools, work.tools, strict=True):
        if name != want_name:
            return f"tool name {name!r}, want {want_name!r}"
        got = json.loads(args) if isinstance(args, str) else args
        if got != json.loads(want_args):
            return f"tool arguments differ ({str(args)[:60]!r}...)"
    return None


# -- shared: a dict-based extraction (generic peers) ---------------------------------------


class _Collect:
    """Joins text and tool-argument fragments the way a hand-written loop would."""

    __slots__ = ("args", "first", "names", "start", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.names: dict[Any, str | None] = {}
        self.args: dict[Any, list[str]] = {}
        self.first: float | None = None
        self.start = clock()

    def mark(self) -> None:
        if self.first is None:
            self.first = clock() - self.start

    def outcome(self) -> Outcome:
        tools = [(self.names.get(key), "".join(parts)) for key, parts in self.args.items()]
        for key, name in self.names.items():
            if key not in self.args:
                tools.append((name, "{}"))
        return Outcome("".join(self.text), tools, first_event=self.first)


def _dict_handler(family: str) -> Callable[[dict[str, Any], _Collect], None]:
    """Per-dialect extraction of text and tool arguments from decoded JSON objects."""
    if family == "openai_responses":

        def handle(obj: dict[str, Any], acc: _Collect) -> None:
            kind = obj.get("type")
            if kind == "response.output_text.delta":
                acc.text.append(obj["delta"])
                acc.mark()
            elif kind == "response.function_call_arguments.delta":
                acc.args.setdefault(obj["output_index"], []).append(obj["delta"])
                acc.mark()
            elif kind == "response.output_item.added" and obj["item"]["type"] == "function_call":
                acc.names[obj["output_index"]] = obj["item"]["name"]
                acc.args.setdefault(obj["output_index"], [])

    elif family == "openai_chat":

        def handle(obj: dict[str, Any], acc: _Collect) -> None:
            for choice in obj.get("choices") or ():
                delta = choice["delta"]
                content = delta.get("content")
                if content:
                    acc.text.append(content)
                    acc.mark()
                for call in delta.get("tool_calls") or ():
                    function = call.get("function") or {}
                    if function.get("name"):
                        acc.names[call["index"]] = function["name"]
                    if function.get("arguments"):
                        acc.args.setdefault(call["index"], []).append(function["arguments"])
                        acc.mark()

    elif family == "anthropic":

        def handle(obj: dict[str, Any], acc: _Collect) -> None:
            kind = obj.get("type")
            if kind == "content_block_delta":
                delta = obj["delta"]
                if delta["type"] == "text_delta":
                    acc.text.append(delta["text"])
                    acc.mark()
                elif delta["type"] == "input_json_delta":
                    acc.args.setdefault(obj["index"], []).append(delta["partial_json"])
                    acc.mark()
            elif kind == "content_block_start" and obj["content_block"]["type"] == "tool_use":
                acc.names[obj["index"]] = obj["content_block"]["name"]
                acc.args.setdefault(obj["index"], [])

    elif family in ("gemini", "gemini_array"):

        def handle(obj: dict[str, Any], acc: _Collect) -> None:
            for candidate in obj.get("candidates") or ():
                for part in (candidate.get("content") or {}).get("parts") or ():
                    text = part.get("text")
                    if text and not part.get("thought"):
                        acc.text.append(text)
                        acc.mark()

    elif family == "interactions":

        def handle(obj: dict[str, Any], acc: _Collect) -> None:
            if obj.get("event_type") == "step.delta":
                delta = obj["delta"]
                if delta.get("type") == "text":
                    acc.text.append(delta["text"])
                    acc.mark()

    else:  # pragma: no cover - a new family must add its handler
        raise ValueError(family)
    return handle


# -- the mock transports -------------------------------------------------------------------


def _content_type(work: Workload) -> str:
    return "application/json" if work.framing == "json_array" else "text/event-stream"


def _httpx2_client(work: Workload, level: str) -> Any:
    """An httpx2 client (what the SDKs use) whose transport answers with ``work``."""
    import httpx2

    body = work.body
    chunks = work.chunks()
    headers = {"content-type": _content_type(work)}

    def handler(request: Any) -> Any:
        if level == "core":
            return httpx2.Response(200, headers=headers, content=body)
        return httpx2.Response(200, headers=headers, content=iter(chunks))

    return httpx2.Client(transport=httpx2.MockTransport(handler))


def _httpx_client(work: Workload) -> Any:
    """An httpx client whose transport feeds ``work`` one wire event per chunk."""
    import httpx

    chunks = work.chunks()
    headers = {"content-type": _content_type(work)}

    def handler(request: Any) -> Any:
        return httpx.Response(200, headers=headers, content=iter(chunks))

    return httpx.Client(transport=httpx.MockTransport(handler))


# -- polystream ----------------------------------------------------------------------------


def _polystream_outcome(result: Any, first: float | None = None) -> Outcome:
    return Outcome(
        result.text,
        [(call.name, call.arguments_json) for call in result.tool_calls],
        first_event=first,
    )


_DELTA_TYPES: tuple[type, ...] | None = None


def _prepare_polystream(work: Workload, level: str) -> Runner:
    import polystream
    from polystream.events import TextDelta, ToolInputDelta

    module = polystream.get_dialect(work.dialect).module()  # raises when it is missing
    if not hasattr(module, "Decoder"):
        raise LookupError(f"dialect {work.dialect} has no Decoder in this build")
    options: dict[str, Any] = {}
    if work.dialect == "gemini_generate":
        options["framing"] = work.framing
    body = work.body
    dialect = work.dialect
    if level == "core":

        def run() -> Outcome:
            return _polystream_outcome(polystream.decode(body, dialect, **options))

        return run

    client = _httpx_client(work)
    deltas = (TextDelta, ToolInputDelta)

    def run_http() -> Outcome:
        start = clock()
        first: float | None = None
        decoder = polystream.StreamDecoder(dialect, **options)
        with client.stream("POST", "http://test/v1/stream", json={"stream": True}) as response:
            for chunk in response.iter_raw():
                events = decoder.feed(chunk)
                if first is None and any(type(e) in deltas for e in events):
                    first = clock() - start
        decoder.close()
        return _polystream_outcome(decoder.result(), first)

    return run_http


def _prepare_polystream_client(work: Workload, level: str) -> Runner:
    """polystream's own HTTP client (``polystream.client.Client``) over the mock."""
    if level != "http":
        raise LookupError("the polystream client is measured through HTTP only")
    import httpx

    from polystream.client import Client
    from polystream.events import TextDelta, ToolInputDelta

    chunks = work.chunks()
    headers = {"content-type": _content_type(work)}

    def handler(request: Any) -> Any:
        return httpx.Response(200, headers=headers, content=iter(chunks))

    client = Client(transport=httpx.MockTransport(handler), api_key="x", base_url="http://test")
    deltas = (TextDelta, ToolInputDelta)
    dialect = work.dialect
    framing = work.framing

    def run() -> Outcome:
        start = clock()
        first: float | None = None
        stream = client.stream(dialect, model="benchmark-model", prompt="go", framing=framing)
        for event in stream:
            if first is None and type(event) in deltas:
                first = clock() - start
        return _polystream_outcome(stream.result(), first)

    return run


# -- the minimal loop: split on blank lines, msgspec-decode each payload, join -----------------


class _RItem(msgspec.Struct):
    type: str
    name: str | None = None


class _RPayload(msgspec.Struct):
    type: str
    delta: str = ""
    output_index: int = 0
    item: _RItem | None = None


class _CFunction(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _CCall(msgspec.Struct):
    index: int
    function: _CFunction | None = None


class _CDelta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_CCall] | None = None


class _CChoice(msgspec.Struct):
    delta: _CDelta


class _CPayload(msgspec.Struct):
    choices: list[_CChoice] = []


class _ADelta(msgspec.Struct):
    type: str = ""
    text: str = ""
    partial_json: str = ""


class _ABlock(msgspec.Struct):
    type: str
    name: str | None = None


class _APayload(msgspec.Struct):
    type: str
    index: int = 0
    delta: _ADelta | None = None
    content_block: _ABlock | None = None


class _GPart(msgspec.Struct):
    text: str | None = None
    thought: bool = False


class _GContent(msgspec.Struct):
    parts: list[_GPart] = []


class _GCandidate(msgspec.Struct):
    content: _GContent | None = None


class _GPayload(msgspec.Struct):
    candidates: list[_GCandidate] = []


class _IDelta(msgspec.Struct):
    type: str
    text: str = ""


class _IPayload(msgspec.Struct):
    event_type: str
    delta: _IDelta | None = None


def _typed_handler(
    family: str,
) -> tuple[msgspec.json.Decoder[Any], Callable[[Any, _Collect], None]]:
    if family == "openai_responses":

        def handle(p: _RPayload, acc: _Collect) -> None:
            kind = p.type
            if kind == "response.output_text.delta":
                acc.text.append(p.delta)
                acc.mark()
            elif kind == "response.function_call_arguments.delta":
                acc.args.setdefault(p.output_index, []).append(p.delta)
                acc.mark()
            elif kind == "response.output_item.added" and p.item and p.item.type == "function_call":
                acc.names[p.output_index] = p.item.name
                acc.args.setdefault(p.output_index, [])

        return msgspec.json.Decoder(_RPayload), handle
    if family == "openai_chat":

        def handle(p: _CPayload, acc: _Collect) -> None:
            for choice in p.choices:
                delta = choice.delta
                if delta.content:
                    acc.text.append(delta.content)
                    acc.mark()
                if delta.tool_calls:
                    for call in delta.tool_calls:
                        function = call.function
                        if function is None:
                            continue
                        if function.name:
                            acc.names[call.index] = function.name
                        if function.arguments:
                            acc.args.setdefault(call.index, []).append(function.arguments)
                            acc.mark()

        return msgspec.json.Decoder(_CPayload), handle
    if family == "anthropic":

        def handle(p: _APayload, acc: _Collect) -> None:
            if p.type == "content_block_delta" and p.delta is not None:
                if p.delta.type == "text_delta":
                    acc.text.append(p.delta.text)
                    acc.mark()
                elif p.delta.type == "input_json_delta":
                    acc.args.setdefault(p.index, []).append(p.delta.partial_json)
                    acc.mark()
            elif (
                p.type == "content_block_start"
                and p.content_block is not None
                and p.content_block.type == "tool_use"
            ):
                acc.names[p.index] = p.content_block.name
                acc.args.setdefault(p.index, [])

        return msgspec.json.Decoder(_APayload), handle
    if family in ("gemini", "gemini_array"):

        def handle(p: _GPayload, acc: _Collect) -> None:
            for candidate in p.candidates:
                if candidate.content is not None:
                    for part in candidate.content.parts:
                        if part.text and not part.thought:
                            acc.text.append(part.text)
                            acc.mark()

        return msgspec.json.Decoder(_GPayload), handle
    if family == "interactions":

        def handle(p: _IPayload, acc: _Collect) -> None:
            if p.event_type == "step.delta" and p.delta is not None and p.delta.type == "text":
                acc.text.append(p.delta.text)
                acc.mark()

        return msgspec.json.Decoder(_IPayload), handle
    raise ValueError(family)  # pragma: no cover


def _separator(work: Workload) -> bytes:
    """What splits the body into payloads: the blank line (SSE), or for Gemini's JSON
    array the comma line between two elements (Google's pretty-printed layout, in
    which a comma alone on its line is found nowhere else: a string holds no raw line
    break, and the commas inside an element end their lines)."""
    newline = work.body.find(b"\n")
    crlf = work.body[newline - 1 : newline] == b"\r"
    if work.framing == "json_array":
        return b"\r\n,\r\n" if crlf else b"\n,\n"
    return b"\r\n\r\n" if crlf else b"\n\n"


def _minimal_blocks(
    blocks: list[bytes], decoder: msgspec.json.Decoder[Any], handle: Any, acc: _Collect
) -> None:
    decode = decoder.decode
    for block in blocks:
        i = block.find(b"data:")
        if i < 0:
            continue
        payload = block[i + 5 :]
        if payload[:1] == b" ":
            payload = payload[1:]
        if payload[:1] != b"{":  # [DONE]
            continue
        handle(decode(payload), acc)


def _minimal_elements(
    elements: list[bytes],
    decoder: msgspec.json.Decoder[Any],
    handle: Any,
    acc: _Collect,
    *,
    opens: bool = True,
    closes: bool = True,
) -> None:
    """The JSON array's payloads: each element as split, the array's opening bracket
    still before the first (``opens``) and its closing one after the last
    (``closes``)."""
    decode = decoder.decode
    last = len(elements) - 1
    for i, element in enumerate(elements):
        if i == 0 and opens:
            element = element[element.index(b"[") + 1 :]
        if i == last and closes:
            element = element.rstrip()[:-1]
        handle(decode(element), acc)


def _prepare_minimal(work: Workload, level: str) -> Runner:
    """The minimal loop: split the body on what separates its payloads (the blank
    line; the JSON array's comma line), ``msgspec`` decode each payload into a typed
    Struct that holds only what the answer needs, join the text."""
    decoder, handle = _typed_handler(work.family)
    body = work.body
    sep = _separator(work)
    array = work.framing == "json_array"
    if level == "core":
        if array:

            def run_array() -> Outcome:
                acc = _Collect()
                _minimal_elements(body.split(sep), decoder, handle, acc)
                return acc.outcome()

            return run_array

        def run() -> Outcome:
            acc = _Collect()
            _minimal_blocks(body.split(sep), decoder, handle, acc)
            return acc.outcome()

        return run
    client = _httpx_client(work)

    def run_http() -> Outcome:
        acc = _Collect()
        buffer = b""
        first = True
        with client.stream("POST", "http://test/v1/stream") as response:
            for chunk in response.iter_raw():
                buffer += chunk
                if sep in buffer:
                    blocks = buffer.split(sep)
                    buffer = blocks.pop()
                    if array:
                        _minimal_elements(blocks, decoder, handle, acc, opens=first, closes=False)
                        first = False
                    else:
                        _minimal_blocks(blocks, decoder, handle, acc)
        if array:
            _minimal_elements([buffer], decoder, handle, acc, opens=first)
        else:
            _minimal_blocks([buffer], decoder, handle, acc)
        return acc.outcome()

    return run_http


def _whole_array(
    work: Workload, level: str, elements: Callable[[bytes], Any], handle: Any
) -> Runner:
    """A peer that reads Gemini's JSON array whole (at the http level, once the body
    has arrived), decodes it with ``elements`` and hands each element to ``handle``."""
    body = work.body
    if level == "core":

        def run() -> Outcome:
            acc = _Collect()
            for element in elements(body):
                handle(element, acc)
            return acc.outcome()

        return run
    client = _httpx_client(work)

    def run_http() -> Outcome:
        acc = _Collect()
        with client.stream("POST", "http://test/v1/stream") as response:
            data = b"".join(response.iter_raw())
        for element in elements(data):
            handle(element, acc)
        return acc.outcome()

    return run_http


def _prepare_whole_array(work: Workload, level: str) -> Runner:
    """Gemini's JSON array decoded whole, in one ``msgspec`` call into a list of the
    minimal loop's Structs: no loop over payloads and no streaming (nothing is given
    before the array's last byte), the least work there is for those bytes."""
    _, handle = _typed_handler(work.family)
    return _whole_array(work, level, msgspec.json.Decoder(list[_GPayload]).decode, handle)


# -- generic: httpx-sse + json.loads (or json.loads of the whole array) --------------------


def _prepare_generic(work: Workload, level: str) -> Runner:
    handle = _dict_handler(work.family)
    loads = json.loads
    if work.framing == "json_array":
        return _whole_array(work, level, loads, handle)

    import httpx
    import httpx_sse

    def consume(source: Any, acc: _Collect) -> None:
        for event in source.iter_sse():
            data = event.data
            if data[:1] == "{":
                handle(loads(data), acc)

    if level == "core":
        headers = {"content-type": "text/event-stream"}
        body = work.body

        def run() -> Outcome:
            # The response is built from bytes in memory: httpx-sse's line splitting,
            # UTF-8 decoding and event assembly, then json.loads, are what is counted.
            response = httpx.Response(200, headers=headers, content=body)
            acc = _Collect()
            consume(httpx_sse.EventSource(response), acc)
            return acc.outcome()

        return run
    client = _httpx_client(work)

    def run_http() -> Outcome:
        acc = _Collect()
        with httpx_sse.connect_sse(client, "POST", "http://test/v1/stream") as source:
            consume(source, acc)
        return acc.outcome()

    return run_http


# -- the official SDKs ---------------------------------------------------------------------


def _openai_client(work: Workload, level: str) -> Any:
    import openai

    return openai.OpenAI(
        api_key="x",
        base_url="http://test/v1",
        http_client=_httpx2_client(work, level),
        max_retries=0,
    )


def _anthropic_client(work: Workload, level: str) -> Any:
    import anthropic

    return anthropic.Anthropic(
        api_key="x",
        base_url="http://test",
        http_client=_httpx2_client(work, level),
        max_retries=0,
    )


def _genai_client(work: Workload, level: str) -> Any:
    from google import genai
    from google.genai import types

    return genai.Client(
        api_key="x",
        http_options=types.HttpOptions(
            base_url="http://test/", httpx_client=_httpx2_client(work, level)
        ),
    )


_TOOLS_RESPONSES = [
    {"type": "function", "name": "lookup_rows", "parameters": {"type": "object"}, "strict": False}
]
_TOOLS_CHAT = [
    {"type": "function", "function": {"name": "lookup_rows", "parameters": {"type": "object"}}}
]
_TOOLS_ANTHROPIC = [{"name": "lookup_rows", "input_schema": {"type": "object"}}]


def _timed(
    level: str, open_stream: Callable[[], Any], consume: Callable[[Any], Outcome]
) -> Outcome:
    """Open the stream, then consume it; at the core level only consuming is counted."""
    start = clock()
    stream = open_stream()
    begin = clock()
    outcome = consume(stream)
    end = clock()
    if level == "core":
        outcome.elapsed = end - begin
    if outcome.first_event is not None:
        outcome.first_event += begin - start
    return outcome


def _prepare_sdk(work: Workload, level: str) -> Runner:
    """The SDK helper that builds the SDK's own final object."""
    family = work.family
    if family == "openai_responses":
        client = _openai_client(work, level)
        tools = _TOOLS_RESPONSES if work.tools else []

        def run() -> Outcome:
            def open_stream() -> Any:
                manager = client.responses.stream(model="gpt-5.4-nano", input="go", tools=tools)
                return manager.__enter__()

            def consume(stream: Any) -> Outcome:
                final = stream.get_final_response()
                stream.close()
                calls = [(o.name, o.arguments) for o in final.output if o.type == "function_call"]
                return Outcome(final.output_text, calls)

            return _timed(level, open_stream, consume)

        return run
    if family == "openai_chat":
        client = _openai_client(work, level)

        def run_chat() -> Outcome:
            def open_stream() -> Any:
                manager = client.chat.completions.stream(
                    model="gpt-5.4-nano",
                    messages=[{"role": "user", "content": "go"}],
                    stream_options={"include_usage": True},
                )
                return manager.__enter__()

            def consume(stream: Any) -> Outcome:
                final = stream.get_final_completion()
                stream.close()
                message = final.choices[0].message
                calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or ()]
                return Outcome(message.content or "", calls)

            return _timed(level, open_stream, consume)

        return run_chat
    if family == "anthropic":
        client = _anthropic_client(work, level)
        tools = _TOOLS_ANTHROPIC if work.tools else []

        def run_anthropic() -> Outcome:
            def open_stream() -> Any:
                manager = client.messages.stream(
                    model="claude-haiku-4-5",
                    max_tokens=64000,
                    messages=[{"role": "user", "content": "go"}],
                    tools=tools,
                )
                return manager.__enter__()

            def consume(stream: Any) -> Outcome:
                final = stream.get_final_message()
                stream.close()
                text = "".join(b.text for b in final.content if b.type == "text")
                calls = [(b.name, b.input) for b in final.content if b.type == "tool_use"]
                return Outcome(text, calls)

            return _timed(level, open_stream, consume)

        return run_anthropic
    if family == "gemini":
        client = _genai_client(work, level)

        def run_gemini() -> Outcome:
            # generate_content_stream is a generator: the request is sent on the first
            # next(), so it is counted at both levels (a mock round trip, ~1 ms).
            def open_stream() -> Any:
                return client.models.generate_content_stream(
                    model="gemini-3.5-flash-lite", contents="go"
                )

            def consume(stream: Any) -> Outcome:
                acc = _Collect()
                for chunk in stream:
                    # The documented way to read the text: the text parts of each chunk
                    # (chunk.text would also warn about the thoughtSignature part).
                    for candidate in chunk.candidates or ():
                        for part in (candidate.content and candidate.content.parts) or ():
                            if part.text and not part.thought:
                                acc.text.append(part.text)
                                acc.mark()
                return acc.outcome()

            return _timed(level, open_stream, consume)

        return run_gemini
    raise LookupError(f"no SDK helper for {family}")


def _prepare_sdk_raw(work: Workload, level: str) -> Runner:
    """The SDK's raw event iteration (``stream=True``), text joined by hand."""
    family = work.family
    if family in ("openai_responses", "openai_chat", "anthropic", "interactions"):
        handle_family = family
    else:
        raise LookupError(f"no raw SDK iteration for {family}")

    if family == "openai_responses":
        client = _openai_client(work, level)
        tools = _TOOLS_RESPONSES if work.tools else []

        def open_stream() -> Any:
            return client.responses.create(
                model="gpt-5.4-nano", input="go", tools=tools, stream=True
            )

        def handle(event: Any, acc: _Collect) -> None:
            kind = event.type
            if kind == "response.output_text.delta":
                acc.text.append(event.delta)
                acc.mark()
            elif kind == "response.function_call_arguments.delta":
                acc.args.setdefault(event.output_index, []).append(event.delta)
                acc.mark()
            elif kind == "response.output_item.added" and event.item.type == "function_call":
                acc.names[event.output_index] = event.item.name
                acc.args.setdefault(event.output_index, [])

    elif family == "openai_chat":
        client = _openai_client(work, level)

        def open_stream() -> Any:
            return client.chat.completions.create(
                model="gpt-5.4-nano", messages=[{"role": "user", "content": "go"}], stream=True
            )

        def handle(chunk: Any, acc: _Collect) -> None:
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    acc.text.append(delta.content)
                    acc.mark()
                for call in delta.tool_calls or ():
                    function = call.function
                    if function is None:
                        continue
                    if function.name:
                        acc.names[call.index] = function.name
                    if function.arguments:
                        acc.args.setdefault(call.index, []).append(function.arguments)
                        acc.mark()

    elif family == "anthropic":
        client = _anthropic_client(work, level)
        tools = _TOOLS_ANTHROPIC if work.tools else []

        def open_stream() -> Any:
            return client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=64000,
                messages=[{"role": "user", "content": "go"}],
                tools=tools,
                stream=True,
            )

        def handle(event: Any, acc: _Collect) -> None:
            kind = event.type
            if kind == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta":
                    acc.text.append(delta.text)
                    acc.mark()
                elif delta.type == "input_json_delta":
                    acc.args.setdefault(event.index, []).append(delta.partial_json)
                    acc.mark()
            elif kind == "content_block_start" and event.content_block.type == "tool_use":
                acc.names[event.index] = event.content_block.name
                acc.args.setdefault(event.index, [])

    else:
        assert handle_family == "interactions"
        client = _genai_client(work, level)

        def open_stream() -> Any:
            return client.interactions.create(
                model="gemini-3.5-flash-lite", input="go", stream=True
            )

        def handle(event: Any, acc: _Collect) -> None:
            if getattr(event, "event_type", None) == "step.delta":
                delta = event.delta
                if getattr(delta, "type", None) == "text":
                    acc.text.append(delta.text)
                    acc.mark()

    def consume(stream: Any) -> Outcome:
        acc = _Collect()
        for event in stream:
            handle(event, acc)
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        return acc.outcome()

    def run() -> Outcome:
        return _timed(level, open_stream, consume)

    return run


# -- LiteLLM (optional) --------------------------------------------------------------------

LITELLM_PATH_ENV = "POLYSTREAM_BENCH_LITELLM_PATH"
"""A folder to append to ``sys.path`` for LiteLLM (installed with ``pip --target``)."""


def _import_litellm() -> Any:
    extra = os.environ.get(LITELLM_PATH_ENV)
    if extra and extra not in sys.path:
        sys.path.append(extra)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


def _prepare_litellm(work: Workload, level: str) -> Runner:
    """LiteLLM's stream wrapper over the OpenAI SDK, then ``stream_chunk_builder``."""
    if work.family != "openai_chat":
        raise LookupError("LiteLLM peer covers Chat Completions only")
    litellm = _import_litellm()
    client = _openai_client(work, level)

    def run() -> Outcome:
        def open_stream() -> Any:
            return litellm.completion(
                model="openai/gpt-5.4-nano",
                messages=[{"role": "user", "content": "go"}],
                stream=True,
                client=client,
                api_key="x",
                api_base="http://test/v1",
            )

        def consume(stream: Any) -> Outcome:
            chunks = list(stream)
            final = litellm.stream_chunk_builder(chunks)
            message = final.choices[0].message
            calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or ()]
            return Outcome(message.content or "", calls)

        return _timed(level, open_stream, consume)

    return run


# -- the registry --------------------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    """A contestant.

    Attributes:
        name: Short key (JSON output, ``--peers``).
        label: Column label.
        prepare: ``prepare(workload, level) -> run``.
        families: Workload families it reads (None: all).
        levels: The levels it is measured at.
    """

    name: str
    label: str
    prepare: Callable[[Workload, str], Runner]
    families: frozenset[str] | None = None
    levels: tuple[str, ...] = LEVELS


PEERS: dict[str, Peer] = {
    peer.name: peer
    for peer in (
        Peer("polystream", "polystream", _prepare_polystream),
        Peer(
            "polystream_client",
            "polystream Client",
            _prepare_polystream_client,
            levels=("http",),
        ),
        Peer("minimal", "minimal loop (msgspec)", _prepare_minimal),
        Peer(
            "whole_array",
            "msgspec, whole array",
            _prepare_whole_array,
            frozenset({"gemini_array"}),
        ),
        Peer("generic", "httpx-sse + json.loads", _prepare_generic),
        Peer(
            "sdk",
            "SDK helper",
            _prepare_sdk,
            frozenset({"openai_responses", "openai_chat", "anthropic", "gemini"}),
        ),
        Peer(
            "sdk_raw",
            "SDK raw stream=True",
            _prepare_sdk_raw,
            frozenset({"openai_responses", "openai_chat", "anthropic", "interactions"}),
        ),
        Peer("litellm", "LiteLLM", _prepare_litellm, frozenset({"openai_chat"})),
    )
}
"""Every peer, in column order."""


def applies(peer: Peer, work: Workload, level: str | None = None) -> bool:
    """Whether ``peer`` can read ``work`` at all (at ``level``, when given)."""
    if level is not None and level not in peer.levels:
        return False
    return peer.families is None or work.family in peer.families


def prepare(peer_name: str, work: Workload, level: str) -> Runner:
    """Set a peer up for a workload; the returned callable runs it once."""
    return PEERS[peer_name].prepare(work, level)


def iterate(run: Runner, repeat: int) -> Iterator[Outcome]:
    """Run ``repeat`` times, yielding each outcome (helper for callers and tests)."""
    for _ in range(repeat):
        yield run()
