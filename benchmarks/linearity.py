"""Cost against size where a stream reader can turn quadratic.

``python -m benchmarks.linearity [--quick] [--repeat N] [--json OUT]``

A reader that keeps part of its input and copies or reads it again on every feed costs
time quadratic in what it keeps. Each case here runs at a size and at four times that
size, and reports the ratio of the two times: near 4 when the cost is linear, near 16
when it is quadratic. The cases are where a reader keeps input across feeds:

* ``event:<dialect>``: one event (one JSON-array element for ``gemini_array``) whose
  text is 4 MiB, then 16 MiB, in a stream of that dialect, fed in 64 KiB reads;
* ``detect``: ``StreamDecoder("auto")`` behind 200 KiB, then 800 KiB, of SSE comment
  blocks, fed in 1 KiB reads, then one Chat chunk that decides the dialect;
* ``blank``: 4 MiB, then 16 MiB, of blank bytes before a Gemini stream whose framing is
  ``auto``, fed in 64 KiB reads;
* ``rebuild:<dialect>``: the dialect's rebuild of its own final object from the events
  of a stream of 10,000, then 40,000, text deltas (chunks for Gemini, step deltas for
  Interactions): where a fold joins each delta to the text so far, it is quadratic;
* ``rebuild:openai_chat+logprobs``: the Chat rebuild of 5,000, then 20,000, chunks that
  each carry a token's ``logprobs``;
* ``rebuild:gemini_generate+audio``: the Gemini rebuild of 500, then 2,000, audio parts
  of 4 KiB (one run, joined into one part);
* ``args:gemini_partial``: a Gemini function call whose string argument is streamed in
  20,000, then 80,000, ``partialArgs`` fragments (one SSE event each);
* ``server:head``, ``server:trailer``, ``server:ahead``: the HTTP server that the
  emulator and the gateway run, reading in 16-byte reads a request head with a header
  value of 16 KiB, then 64 KiB; a chunked body's trailer line of that size; and a
  request with a body of 256 KiB, then 1 MiB, sent while the response before it is
  under way (the server holds it until then).

Every run checks its answer (the decoded text holds the long text; detection finds the
dialect; the rebuilt object holds the stream's text, checked before the timed runs).
Times are medians of ``--repeat`` runs of this process's *user* CPU time: the system
time of a run holds the page faults of its fresh memory, which depend on the
allocator's state more than on the input (glibc serves a freed block again, or maps
new pages, by a threshold that moves with what was freed before), and peak memory is
measured elsewhere (``benchmarks.run``). The verdict is PASS when the ratio is at most
6. ``--quick`` divides the sizes by 64 and runs once: it checks that the benchmark
works, not its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import math
import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks import workloads
from polystream import StreamDecoder
from polystream.decoding import decode_events
from polystream.dialects import get_dialect

__all__ = ["CASES", "main", "measure"]

LIMIT = 6.0
"""Largest ratio of the two times that passes (the input grows 4x)."""

SAMPLE = 0.05
"""Seconds of the small size's runs in one timed sample (see :func:`measure`)."""

MAX_LOOPS = 50
"""Most runs in one timed sample."""

_READ = 65536
_CHAT_CHUNK = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,'
    b'"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},'
    b'"finish_reason":null}]}\n\n'
)
_TEXT_KEYS = (b'"delta":"', b'"content":"', b'"text":"', b'"text": "')

# The streams the event cases inflate, by case name.
_STREAMS: dict[str, Callable[[], workloads.Workload]] = {
    "openai_responses": lambda: workloads.responses("r", text_deltas=40),
    "openai_chat": lambda: workloads.chat("c", text_chunks=40),
    "anthropic_messages": lambda: workloads.anthropic("a", text_deltas=40),
    "gemini_sse": lambda: workloads.gemini_sse("g", chunks=40),
    "gemini_array": lambda: workloads.gemini_array("ga", chunks=40),
    "gemini_interactions": lambda: workloads.interactions("i", step_deltas=40),
}


def _inflate(body: bytes, size: int) -> bytes:
    """``body`` with ``size`` bytes of text added to a delta in its middle."""
    middle = len(body) // 2
    for key in _TEXT_KEYS:
        at = body.find(key, middle)
        if at >= 0:
            at += len(key)
            return body[:at] + b"y" * size + body[at:]
    raise ValueError("no text delta in the second half of the stream")


def _feed(decoder: StreamDecoder, data: bytes, read: int) -> None:
    for at in range(0, len(data), read):
        decoder.feed(data[at : at + read])


def _event_case(name: str) -> Callable[[int], Callable[[], None]]:
    def prepare(size: int) -> Callable[[], None]:
        work = _STREAMS[name]()
        data = _inflate(work.body, size)
        framing: dict[str, Any] = {"framing": work.framing} if work.framing else {}

        def run() -> None:
            decoder = StreamDecoder(work.dialect, **framing)
            _feed(decoder, data, _READ)
            decoder.close()
            if decoder.result().text.count("y") < size:
                raise AssertionError(f"event:{name}: the long text did not come through")

        return run

    return prepare


def _detect_case(size: int) -> Callable[[], None]:
    comment = b": " + b"x" * 1020 + b"\n\n"
    data = comment * (size // len(comment)) + _CHAT_CHUNK

    def run() -> None:
        decoder = StreamDecoder()
        _feed(decoder, data, 1024)
        decoder.close()
        if decoder.dialect != "openai_chat":
            raise AssertionError(f"detect: found {decoder.dialect}")

    return run


def _blank_case(size: int) -> Callable[[], None]:
    stream = workloads.gemini_array("ga", chunks=40)
    data = b"\r\n" * (size // 2) + stream.body

    def run() -> None:
        decoder = StreamDecoder("gemini_generate")
        _feed(decoder, data, _READ)
        decoder.close()
        if decoder.result().text != stream.text:
            raise AssertionError("blank: the text differs")

    return run


# The streams of the rebuild cases, by dialect, for a number of deltas.
_REBUILT: dict[str, Callable[[int], workloads.Workload]] = {
    "openai_responses": lambda n: workloads.responses("r", text_deltas=n),
    "openai_chat": lambda n: workloads.chat("c", text_chunks=n),
    "anthropic_messages": lambda n: workloads.anthropic("a", text_deltas=n),
    "gemini_generate": lambda n: workloads.gemini_sse("g", chunks=n),
    "gemini_interactions": lambda n: workloads.interactions("i", step_deltas=n),
}


def _holds(value: Any, text: str) -> bool:
    """Whether a string in ``value`` (a JSON-like object) holds ``text``."""
    if isinstance(value, str):
        return text in value
    if isinstance(value, dict):
        return any(_holds(v, text) for v in value.values())
    if isinstance(value, list):
        return any(_holds(v, text) for v in value)
    return False


def _rebuilding(
    case: str, name: str, data: bytes, check: Callable[[Any], bool]
) -> Callable[[], None]:
    """The run of a rebuild case: dialect ``name``'s rebuild of the events of ``data``,
    decoded once, here; ``check`` is asked of the object once, before any run."""
    events = decode_events(data, name)
    dialect = get_dialect(name)
    if not check(dialect.rebuild(events)):
        raise AssertionError(f"{case}: the rebuilt object is not the stream's")

    def run() -> None:
        dialect.rebuild(events)

    return run


def _rebuild_case(name: str) -> Callable[[int], Callable[[], None]]:
    def prepare(deltas: int) -> Callable[[], None]:
        work = _REBUILT[name](deltas)
        return _rebuilding(
            f"rebuild:{name}", name, work.body, lambda rebuilt: _holds(rebuilt, work.text)
        )

    return prepare


def _gemini_event(part: dict[str, Any], finish: str | None = None) -> bytes:
    """A Gemini SSE event: one chunk of one candidate with one part."""
    candidate: dict[str, Any] = {"content": {"parts": [part], "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return b"data: " + json.dumps({"candidates": [candidate]}).encode() + b"\r\n\r\n"


def _logprobs_case(chunks: int) -> Callable[[], None]:
    def chunk(delta: dict[str, Any], logprobs: Any, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1}
        body |= {"model": "gpt-x", "choices": [choice]}
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    entry = {"token": "w", "logprob": -0.1, "bytes": [119], "top_logprobs": []}
    logprobs = {"content": [entry], "refusal": None}
    data = b"".join(
        [
            chunk({"role": "assistant", "content": "w"}, logprobs),
            chunk({"content": "w"}, logprobs) * (chunks - 1),
            chunk({}, None, "stop"),
            b"data: [DONE]\n\n",
        ]
    )
    return _rebuilding(
        "rebuild:openai_chat+logprobs",
        "openai_chat",
        data,
        lambda rebuilt: len(rebuilt["choices"][0]["logprobs"]["content"]) == chunks,
    )


def _audio_case(parts: int) -> Callable[[], None]:
    mime = "audio/L16;codec=pcm;rate=24000"
    data = b"".join(
        _gemini_event(
            {
                "inlineData": {
                    "mimeType": mime,
                    "data": base64.b64encode(bytes([i % 256]) * 4096).decode(),
                }
            },
            "STOP" if i == parts - 1 else None,
        )
        for i in range(parts)
    )

    def whole(rebuilt: Any) -> bool:
        joined = rebuilt["candidates"][0]["content"]["parts"]
        return (
            len(joined) == 1
            and len(base64.b64decode(joined[0]["inlineData"]["data"])) == 4096 * parts
        )

    return _rebuilding("rebuild:gemini_generate+audio", "gemini_generate", data, whole)


def _partial_args_case(fragments: int) -> Callable[[], None]:
    def event(call: dict[str, Any], finish: str | None = None) -> bytes:
        return _gemini_event({"functionCall": call}, finish)

    line = "x = 1  # a line of code\n"
    piece = {"jsonPath": "$.code", "stringValue": line, "willContinue": True}
    data = b"".join(
        [
            event({"name": "write", "willContinue": True}),
            event({"partialArgs": [piece], "willContinue": True}) * fragments,
            event({}, "STOP"),
        ]
    )

    def run() -> None:
        decoder = StreamDecoder("gemini_generate")
        _feed(decoder, data, _READ)
        decoder.close()
        if decoder.result().tool_calls[0].arguments != {"code": line * fragments}:
            raise AssertionError("args:gemini_partial: the arguments differ")

    return run


class _Wire(asyncio.Transport):
    """The transport of a connection driven by hand: it keeps what is written (the
    server asks nothing else of it here: it never pauses reading at these limits)."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


async def _answer_size(scope: Any, receive: Any, send: Any) -> None:
    """An app that answers with the size of the body or of the longest header value."""
    if scope["type"] != "http":
        return
    body = 0
    while True:
        message = await receive()
        body += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    size = b"%d" % max([body, *(len(value) for _, value in scope["headers"])])
    head = [(b"content-length", b"%d" % len(size))]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    await send({"type": "http.response.body", "body": size})


def _server_case(kind: str) -> Callable[[int], Callable[[], None]]:
    """polystream's HTTP server (the emulator's and the gateway's) reading what a
    client sends in 16-byte reads: a request head with a ``size``-byte header value
    (``head``), a chunked body's ``size``-byte trailer line (``trailer``), or a request
    with a ``size``-byte body sent while the response before it is under way
    (``ahead``). Each read is one ``data_received`` call, as the event loop makes it."""
    from polystream.server import _h1server

    def make(size: int) -> Callable[[], None]:
        if kind == "head":
            data = b"GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + b"a" * size + b"\r\n\r\n"
            want = size
        elif kind == "trailer":
            data = (
                b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"1\r\nx\r\n0\r\nX-T: " + b"a" * size + b"\r\n\r\n"
            )
            want = 7  # (trailer lines are dropped: the longest value is "chunked")
        else:
            data = (
                b"GET /first HTTP/1.1\r\nHost: h\r\n\r\n"
                b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n" % size
            ) + b"a" * size
            want = size
        reads = [data[i : i + 16] for i in range(0, len(data), 16)]
        limits = _h1server.ServerLimits(max_head_bytes=1 << 30, max_buffered_bytes=1 << 30)
        end = b"\r\n\r\n%d" % want

        async def serve() -> None:
            server = _h1server.H1Server(_answer_size, limits=limits)
            conn = _h1server._Connection(server)
            wire = _Wire()
            conn.connection_made(wire)
            receive = conn.data_received
            for read in reads:
                # (No await: every read is in before an app first runs, so for
                # "ahead" the second request is read while the first waits.)
                receive(read)
            for _ in range(1000):
                if wire.out.endswith(end):
                    break
                await asyncio.sleep(0.0005)
            if not wire.out.endswith(end):
                raise AssertionError(f"server:{kind}: no answer of {want}")

        def run() -> None:
            asyncio.run(serve())

        return run

    return make


CASES: dict[str, tuple[Callable[[int], Callable[[], None]], int, str]] = {
    **{f"event:{name}": (_event_case(name), 4 << 20, "bytes") for name in _STREAMS},
    "detect": (_detect_case, 200 << 10, "bytes"),
    "blank": (_blank_case, 4 << 20, "bytes"),
    **{f"rebuild:{name}": (_rebuild_case(name), 10_000, "deltas") for name in _REBUILT},
    "rebuild:openai_chat+logprobs": (_logprobs_case, 5_000, "chunks"),
    "rebuild:gemini_generate+audio": (_audio_case, 500, "parts"),
    "args:gemini_partial": (_partial_args_case, 20_000, "fragments"),
    "server:head": (_server_case("head"), 16 << 10, "bytes"),
    "server:trailer": (_server_case("trailer"), 16 << 10, "bytes"),
    "server:ahead": (_server_case("ahead"), 256 << 10, "bytes"),
}
"""Each case: what makes its run for a size, its smaller size, and what that size
counts."""


def _user_time() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def measure(repeat: int, scale: int = 1) -> dict[str, dict[str, Any]]:
    """Per case: the median user CPU seconds of one run at the small and the large
    size, their ratio, and the small size in the case's unit.

    Each timed sample is ``loops`` runs in a row, enough for the small size to take
    :data:`SAMPLE` seconds: the kernel splits a process's CPU time into user and
    system time by the clock ticks (4 ms apart at 250 Hz) that find it in each, so a
    run of a few milliseconds is timed to within a tick at best.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, (prepare, size, unit) in CASES.items():
        size //= scale
        runs = {"small": prepare(size), "large": prepare(4 * size)}
        times: dict[str, list[float]] = {"small": [], "large": []}
        for run in runs.values():
            run()  # warm-up (and the answer checked once more)
        loops = 1
        if scale == 1:
            start = time.process_time()  # (exact, with the system time)
            runs["small"]()
            once = time.process_time() - start
            loops = max(1, min(MAX_LOOPS, math.ceil(SAMPLE / max(once, 1e-6))))
        for _ in range(repeat):
            for which, run in runs.items():
                gc.collect()
                start = _user_time()
                for _ in range(loops):
                    run()
                times[which].append((_user_time() - start) / loops)
        small = statistics.median(times["small"])
        large = statistics.median(times["large"])
        out[name] = {
            "small_bytes": size,  # (in the case's unit)
            "unit": unit,
            "loops": loops,
            "small": small,
            "large": large,
            "ratio": large / small if small > 0 else float("inf"),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.linearity", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="sizes / 64, one repetition")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    figures = measure(repeat, 64 if args.quick else 1)
    print(
        "Cost against size (median user CPU time; the input grows 4x, the target is a ratio "
        f"of at most {LIMIT:g}):\n"
    )
    print("| case | small input | small, ms | 4x input, ms | ratio | verdict |")
    print("|---|---|---|---|---|---|")
    for name, cell in figures.items():
        verdict = "PASS" if cell["ratio"] <= LIMIT else "FAIL"
        small = (
            f"{cell['small_bytes'] / 1024:,.0f} KiB"
            if cell["unit"] == "bytes"
            else f"{cell['small_bytes']:,.0f} {cell['unit']}"
        )
        print(
            f"| {name} | {small} | {cell['small'] * 1e3:.1f} "
            f"| {cell['large'] * 1e3:.1f} | {cell['ratio']:.2f} | {verdict} |"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"quick": args.quick, "repeat": repeat, "cases": figures}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
