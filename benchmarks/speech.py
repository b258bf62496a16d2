"""The speech stream: polystream against the ``openai`` SDK on the same bytes.

``python -m benchmarks.speech [DELTAS] [REPEAT]`` builds the ``speech_sse`` workload
(:func:`benchmarks.workloads.speech_sse`, 2,000 deltas by default) and times, per peer,
reading the whole stream to its audio bytes and usage:

* ``polystream``: ``StreamDecoder("openai_speech")`` fed the body in 64 KiB reads, each
  ``DataDelta``'s base64 decoded as it comes, the bytes joined; the usage from the
  ``Finish``;
* ``polystream_native``: the same decoder keeping its events, then ``native()``, the
  speech stream's final object (``{"audio": <base64 of the whole>, "usage"}``: each
  delta checked and decoded, the whole encoded again), its audio decoded;
* ``sdk``: ``client.audio.speech.with_streaming_response.create(...,
  stream_format="sse")`` over an ``httpx2`` mock transport, its bytes parsed by the SDK's
  own SSE reader (``openai._streaming.SSEDecoder``, what its ``Stream`` uses: the SDK has
  no model for these events), each event's JSON loaded and its audio decoded;
* ``minimal``: the body (whole, in memory) split on blank lines, each event's data
  decoded by ``msgspec``, its audio decoded: no SSE parser, no checks, the floor.

Every run's audio is checked against the workload's digest before its time counts. It
prints one JSON object: per peer, the median CPU seconds and the check.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

from benchmarks.peers import clock
from benchmarks.workloads import Workload, speech_sse

__all__ = ["measure", "peers"]

_READ = 64 * 1024


def _polystream(work: Workload) -> Callable[[], tuple[bytes, Any]]:
    from polystream import StreamDecoder
    from polystream.events import DataDelta, Event, Finish

    body = work.body

    def run() -> tuple[bytes, Any]:
        decoder = StreamDecoder("openai_speech")
        audio: list[bytes] = []
        usage: list[dict[str, Any]] = []

        def take(events: list[Event]) -> None:
            for event in events:
                if type(event) is DataDelta:
                    audio.append(base64.b64decode(event.delta))
                elif type(event) is Finish and event.usage is not None:
                    counts = event.usage
                    usage.append(
                        {
                            "input_tokens": counts.input_tokens,
                            "output_tokens": counts.output_tokens,
                            "total_tokens": counts.total_tokens,
                        }
                    )

        for start in range(0, len(body), _READ):
            take(decoder.feed(body[start : start + _READ]))
        take(decoder.close())
        return b"".join(audio), usage[-1] if usage else None

    return run


def _polystream_native(work: Workload) -> Callable[[], tuple[bytes, Any]]:
    from polystream import StreamDecoder

    body = work.body

    def run() -> tuple[bytes, Any]:
        decoder = StreamDecoder("openai_speech", keep_events=True)
        for start in range(0, len(body), _READ):
            decoder.feed(body[start : start + _READ])
        decoder.close()
        rebuilt = decoder.native()
        return base64.b64decode(rebuilt["audio"]), rebuilt["usage"]

    return run


def _sdk(work: Workload) -> Callable[[], tuple[bytes, Any]]:
    import httpx2
    import openai
    from openai._streaming import SSEDecoder

    body = work.body

    def handler(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = openai.OpenAI(
        api_key="x",
        base_url="http://test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        max_retries=0,
    )

    def run() -> tuple[bytes, Any]:
        audio: list[bytes] = []
        usage = None
        with client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", input="go", voice="coral", stream_format="sse"
        ) as response:
            for sse in SSEDecoder().iter_bytes(response.iter_bytes(chunk_size=_READ)):
                event = json.loads(sse.data)
                if event["type"] == "speech.audio.delta":
                    audio.append(base64.b64decode(event["audio"]))
                elif event["type"] == "speech.audio.done":
                    usage = event["usage"]
        return b"".join(audio), usage

    return run


def _minimal(work: Workload) -> Callable[[], tuple[bytes, Any]]:
    import msgspec

    body = work.body
    loads = msgspec.json.decode

    def run() -> tuple[bytes, Any]:
        audio: list[bytes] = []
        usage = None
        for block in body.split(b"\n\n"):
            if not block.startswith(b"data: "):
                continue
            event = loads(block[6:])
            if event["type"] == "speech.audio.delta":
                audio.append(base64.b64decode(event["audio"]))
            elif event["type"] == "speech.audio.done":
                usage = event["usage"]
        return b"".join(audio), usage

    return run


def peers() -> dict[str, Callable[[Workload], Callable[[], tuple[bytes, Any]]]]:
    """The contestants, by name."""
    return {
        "polystream": _polystream,
        "polystream_native": _polystream_native,
        "sdk": _sdk,
        "minimal": _minimal,
    }


def measure(work: Workload, repeat: int = 5) -> dict[str, Any]:
    """Per peer: ``{"median": <CPU seconds>, "times": [...], "check": None or what
    differs}`` (one warm-up run first, a full collection before each timed run)."""
    out: dict[str, Any] = {}
    want = work.meta["audio_sha256"]
    for name, prepare in peers().items():
        run = prepare(work)
        run()  # warm-up: lazy imports, first-call caches
        times: list[float] = []
        check: str | None = None
        for _ in range(repeat):
            gc.collect()
            start = clock()
            audio, usage = run()
            times.append(clock() - start)
            if hashlib.sha256(audio).hexdigest() != want:
                check = f"audio differs ({len(audio)} bytes)"
            elif usage != work.meta["usage"]:
                check = f"usage differs: {usage}"
        out[name] = {"median": statistics.median(times), "times": times, "check": check}
    return out


if __name__ == "__main__":
    deltas = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    work = speech_sse("speech_sse", deltas=deltas)
    print(
        json.dumps({"workload": work.description, "bytes": len(work.body), **measure(work, repeat)})
    )
