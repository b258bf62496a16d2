"""What the same work costs after the process has slept: the gateway's own work, warm
and after the sleeps it takes between a paced stream's events and between requests.

``python -m benchmarks._wakeup [SAMPLES]`` prints JSON. Two units of the gateway's
work, run in this process without I/O, on the objects the gateway uses:

* ``request``: a Chat request's way to its upstream request: the server's parse of the
  request head, the body's JSON, the unified request, the upstream call and its HTTP
  request (``StreamCall.next_request``);
* ``event``: one Chat chunk passed through: the upstream call decodes it, the client's
  encoder writes its events, the resume splitter cuts them into entries and the
  in-memory journal keeps them;
* ``least``: a few lines of Python (twenty additions, each with a dict lookup), no
  polystream code: what a wake-up costs the interpreter alone, the floor under the
  other two.

Each unit is timed back to back (warm), then each time after a sleep of 0.5, 2 and
10 ms, and after the same 2 ms spent spinning instead (the process kept on its core).
On a virtual machine whose idle cores are given to other work, a sleeping process
wakes to cold caches and predictors: the ratio of the slept to the warm time is what
every step of a gateway (and of the emulator) pays per wake-up on that machine.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import httptools
import msgspec

from polystream.call import StreamCall
from polystream.dialects import get_dialect
from polystream.gateway_core import SSECursorSplitter
from polystream.journal import MemoryJournal
from polystream.request import Request, parse_request

GAPS: tuple[tuple[str, float, bool], ...] = (
    ("warm", 0.0, False),
    ("after 0.5 ms asleep", 0.0005, False),
    ("after 2 ms asleep", 0.002, False),
    ("after 10 ms asleep", 0.010, False),
    ("after 2 ms spinning", 0.002, True),
)
"""(label, seconds between runs, spent spinning rather than asleep)."""

_BODY = msgspec.json.encode(
    {
        "model": "bench-chat",
        "stream": True,
        "messages": [{"role": "user", "content": "kw=paced; please answer"}],
    }
)
_HEAD = (
    b"POST /openai/v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
    b"content-type: application/json\r\naccept: text/event-stream\r\n"
    b"authorization: Bearer x\r\nx-api-key: x\r\ncontent-length: %d" % len(_BODY)
)
_ROLE = (
    b'data: {"id":"chatcmpl-wakeup0123456789","object":"chat.completion.chunk",'
    b'"created":1767225600,"model":"gpt-4o-mini","system_fingerprint":"fp_0123456789",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},'
    b'"logprobs":null,"finish_reason":null}],"obfuscation":"Qx7"}\n\n'
)
_CHUNK = (
    b'data: {"id":"chatcmpl-wakeup0123456789","object":"chat.completion.chunk",'
    b'"created":1767225600,"model":"gpt-4o-mini","system_fingerprint":"fp_0123456789",'
    b'"choices":[{"index":0,"delta":{"content":" stream"},"logprobs":null,'
    b'"finish_reason":null}],"obfuscation":"a1B2c3D4e5"}\n\n'
)


def _upstream_call(request: Request) -> StreamCall:
    """The gateway's upstream call for ``request`` (a Chat upstream, nothing kept)."""
    return StreamCall(
        "openai_chat",
        request,
        api_key="x",
        base_url="http://127.0.0.1:1/openai/v1",
        keep_events=False,
        keep_result=False,
    )


class _HeadSink:
    """What the server's connection keeps of a request head that llhttp parses."""

    __slots__ = ("headers", "url")

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value.rstrip(b" \t")))


def _request_unit() -> Callable[[], object]:
    head = _HEAD + b"\r\n\r\n"

    def run() -> object:
        httptools.HttpRequestParser(_HeadSink()).feed_data(head)
        request = parse_request("openai_chat", msgspec.json.decode(_BODY))
        upstream = msgspec.structs.replace(request, model="gpt-4o-mini", stream=True)
        return _upstream_call(upstream).next_request()

    return run


def _event_unit() -> Callable[[], object]:
    call = _upstream_call(parse_request("openai_chat", msgspec.json.decode(_BODY)))
    call.next_request()
    call.on_open(200, {"content-type": "text/event-stream"})
    encoder = get_dialect("openai_chat").encoder()
    splitter = SSECursorSplitter("openai_chat", "0123456789abcdef0123456789abcdef")
    journal = MemoryJournal()
    # The stream's opening (the role chunk, held by the encoder until the first text,
    # and that text): every timed run is then one chunk in, one entry out.
    opening = [encoder.encode(event) for event in call.feed(_ROLE + _CHUNK)]
    journal_id = "chatcmpl-wakeup0123456789"
    journal.create(journal_id, {"dialect": "openai_chat"}, now=time.time())
    journal.append(journal_id, splitter.split(b"".join(opening)), now=time.time())

    def run() -> object:
        parts = [encoder.encode(event) for event in call.feed(_CHUNK)]
        entries = splitter.split(b"".join(parts))
        journal.append(journal_id, entries, now=0.0)
        return entries

    return run


def _least_unit() -> Callable[[], object]:
    table = {"step": 1}

    def run() -> object:
        total = 0
        for i in range(20):
            total += table["step"] + i
        return total

    return run


def _time(unit: Callable[[], object], gap: float, spin: bool, samples: int) -> list[float]:
    clock = time.perf_counter
    times: list[float] = []
    for _ in range(samples):
        if gap and spin:
            end = clock() + gap
            while clock() < end:
                pass
        elif gap:
            time.sleep(gap)
        start = clock()
        unit()
        times.append(clock() - start)
    return times


def measure(samples: int = 300) -> dict[str, Any]:
    """Medians and p90s per unit and gap (seconds), and each gap's ratio to warm."""
    out: dict[str, Any] = {"samples": samples, "units": {}}
    for name, make in (("request", _request_unit), ("event", _event_unit), ("least", _least_unit)):
        unit = make()
        _time(unit, 0.0, False, 2000)  # compiled, allocated, warm
        cells: dict[str, Any] = {}
        for label, gap, spin in GAPS:
            times = _time(unit, gap, spin, samples)
            ordered = sorted(times)
            cells[label] = {
                "median": statistics.median(times),
                "p90": ordered[int(0.9 * (len(ordered) - 1))],
            }
        warm = cells["warm"]["median"]
        for cell in cells.values():
            cell["ratio"] = cell["median"] / warm
        out["units"][name] = cells
    return out


def main(argv: list[str]) -> int:
    samples = int(argv[0]) if argv else 300
    print(json.dumps(measure(samples)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
