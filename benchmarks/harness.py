"""Measurements, each runnable in a fresh process or in-process.

``python -m benchmarks.harness '<json task>'`` runs one task and prints one JSON line;
:func:`run_task` does the same in-process (the quick mode). A task is a dict with a
``kind``:

* ``time`` — one (workload, peer, level) cell: one warm-up run (so lazy imports and
  first-call caches are not counted), then ``repeat`` timed runs with a full garbage
  collection before each. Every run's answer is checked against the workload's.
* ``memory`` — peak traced memory (``tracemalloc``) and ``ru_maxrss`` growth while a
  peer turns a 20,000-delta stream into its final result, keeping only the result.
* ``transcode`` — decode dialect A and encode dialect B, event by event, against the
  minimal loop on the same bytes.
"""

from __future__ import annotations

import gc
import json
import resource
import statistics
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["run_task", "transcode"]

CHUNK = 64 * 1024
"""Read size when a stream is fed from memory in network-sized chunks."""

SLOW = 15.0
"""Seconds per run above which a peer's cell may run fewer than 3 timed repetitions."""


def _load(task: dict[str, Any]) -> Any:
    from benchmarks.workloads import Workload

    return Workload.load(Path(task["dir"]), task["workload"])


def _time(task: dict[str, Any]) -> dict[str, Any]:
    from benchmarks import peers

    clock = peers.clock
    work = _load(task)
    try:
        run = peers.prepare(task["peer"], work, task["level"])
    except (ImportError, LookupError) as exc:
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # a dialect not available yet, an SDK refusing set-up
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    repeat = int(task.get("repeat", 5))
    budget = float(task.get("budget", 60.0))
    error: str | None = None
    times: list[float] = []
    firsts: list[float] = []
    try:
        if task.get("warmup", 1):
            start = clock()
            outcome = run()
            warm = clock() - start
            error = peers.check(work, outcome)
            # Keep a slow peer's cell within its time budget: never under 3 runs,
            # except a peer that needs more than SLOW seconds for one run (the table
            # then shows the median of fewer runs; "times" in the JSON says how many).
            if warm * repeat > budget:
                floor = 1 if warm > SLOW else 3
                repeat = max(floor, int(budget / max(warm, 1e-9)))
            if warm > 4 * SLOW:
                # A minute or more per run: the first run is the measurement (its lazy
                # imports are noise at that scale), so that one cell does not take 10.
                repeat = 0
                times.append(outcome.elapsed if outcome.elapsed is not None else warm)
                if outcome.first_event is not None:
                    firsts.append(outcome.first_event)
        collect = task.get("gc", True)
        for _ in range(repeat):
            if collect:
                gc.collect()
            start = clock()
            outcome = run()
            end = clock()
            times.append(outcome.elapsed if outcome.elapsed is not None else end - start)
            if outcome.first_event is not None:
                firsts.append(outcome.first_event)
            error = error or peers.check(work, outcome)
    except Exception as exc:
        return {"failed": f"{type(exc).__name__}: {exc}"}
    return {
        "times": times,
        "median": statistics.median(times),
        "first_event": statistics.median(firsts) if firsts else None,
        "check": error,
        "sha256": work.sha256,
    }


def _feed_polystream(work: Any) -> tuple[str, int]:
    import polystream

    options: dict[str, Any] = {}
    if work.dialect == "gemini_generate":
        options["framing"] = work.framing
    decoder = polystream.StreamDecoder(work.dialect, **options)
    body = memoryview(work.body)
    for offset in range(0, len(body), CHUNK):
        decoder.feed(bytes(body[offset : offset + CHUNK]))  # events dropped: result only
    decoder.close()
    result = decoder.result()
    return result.text, len(result.text.encode())


def _feed_minimal(work: Any) -> tuple[str, int]:
    from benchmarks import peers

    decoder, handle = peers._typed_handler(work.family)
    sep = peers._separator(work)
    acc = peers._Collect()
    buffer = b""
    body = memoryview(work.body)
    for offset in range(0, len(body), CHUNK):
        buffer += bytes(body[offset : offset + CHUNK])
        blocks = buffer.split(sep)
        buffer = blocks.pop()
        peers._minimal_blocks(blocks, decoder, handle, acc)
    peers._minimal_blocks([buffer], decoder, handle, acc)
    text = acc.outcome().text
    return text, len(text.encode())


def _memory(task: dict[str, Any]) -> dict[str, Any]:
    from benchmarks import peers

    work = _load(task)
    peer = task["peer"]
    try:
        if peer == "polystream":
            _feed_polystream(work)  # warm: imports and lazy tables are not counted

            def go() -> tuple[str, int]:
                return _feed_polystream(work)

        elif peer == "minimal":
            _feed_minimal(work)

            def go() -> tuple[str, int]:
                return _feed_minimal(work)

        else:
            run = peers.prepare(peer, work, "core")
            run()

            def go() -> tuple[str, int]:
                text = run().text
                return text, len(text.encode())

    except Exception as exc:
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    gc.collect()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    text, size = go()
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "peak": peak,
        "text_bytes": size,
        "text_object": sys.getsizeof(text),
        "limit": 3 * size + 1024 * 1024,
        "rss_growth": (rss_after - rss_before) * 1024,
        "check": None if text == work.text else "text differs",
    }


def _transcode(task: dict[str, Any]) -> dict[str, Any]:
    """The minimal loop on a workload and its transcoding into each target, timed in
    rounds: each repetition times the minimal loop, then every target once, so that a
    stretch of the run in which the machine is slower or faster falls on the baseline
    and the transcodings alike, not on one of them (a ratio of medians measured one
    after the other moved by up to 0.6x when it did). Each timed run comes right after
    an untimed run of the same code, as when the repetitions of one came in a row: run
    after another one, the minimal loop took 5-10% longer."""
    import polystream
    from benchmarks import peers
    from polystream.dialects import get_dialect

    clock = peers.clock
    work = _load(task)
    options: dict[str, Any] = {}
    if work.dialect == "gemini_generate":
        options["framing"] = work.framing
    source = get_dialect(work.dialect)
    try:
        source.module()
    except Exception as exc:
        return {"skipped": f"decoder {work.dialect}: {exc}"}
    minimal = peers.prepare("minimal", work, "core")
    repeat = int(task.get("repeat", 3))
    collect = task.get("gc", True)
    out: dict[str, Any] = {"events": len(work.events), "targets": {}}
    body = work.body
    # Each target's run and its output, once (warm-up and check); a target that cannot
    # encode, or whose output does not carry the workload's answer, is not timed.
    runs: dict[str, Callable[[], bytes]] = {}
    produced: dict[str, int] = {}
    checks: dict[str, str | None] = {}
    for target in task["targets"]:
        info, framing = target_dialect(target)
        try:
            info.encoder(**framing)
        except Exception as exc:
            out["targets"][target] = {"skipped": f"encoder {target}: {type(exc).__name__}: {exc}"}
            continue

        def once(info: Any = info, framing: dict[str, str] = framing) -> bytes:
            return transcode(source, info, options, body, framing)

        try:
            data = once()
            # The output must carry the same answer: decode it back and compare.
            back = polystream.decode(data, info.name, **framing)
            back_tools = [(c.name, c.arguments_json) for c in back.tool_calls]
            checks[target] = peers.check(work, peers.Outcome(back.text, back_tools))
        except Exception as exc:
            out["targets"][target] = {"failed": f"{type(exc).__name__}: {exc}"}
            continue
        runs[target] = once
        produced[target] = len(data)
    base: list[float] = []
    times: dict[str, list[float]] = {target: [] for target in runs}
    for _ in range(repeat):
        for name, run in (("", minimal), *runs.items()):
            run()  # warm again: what ran before it leaves the caches to itself
            if collect:
                gc.collect()
            start = clock()
            run()
            (times[name] if name else base).append(clock() - start)
    out["minimal"] = statistics.median(base)
    for target in runs:
        median = statistics.median(times[target])
        out["targets"][target] = {
            "median": median,
            "per_event_us": median / len(work.events) * 1e6,
            "ratio": median / out["minimal"],
            "bytes": produced[target],
            "check": checks[target],
        }
    # In the targets' order, whatever became of each.
    out["targets"] = {t: out["targets"][t] for t in task["targets"] if t in out["targets"]}
    return out


def target_dialect(target: str) -> tuple[Any, dict[str, str]]:
    """A transcoding target's dialect (:class:`~polystream.dialects.DialectInfo`) and
    framing option: ``"gemini_generate:json_array"`` is Gemini's streamed JSON array,
    plain ``"gemini_generate"`` its SSE."""
    from polystream.dialects import get_dialect

    name, _, framing = target.partition(":")
    if name == "gemini_generate":
        return get_dialect(name), {"framing": framing or "sse"}
    return get_dialect(name), {}


def transcode(
    source: Any,
    target: Any,
    options: dict[str, Any],
    body: bytes,
    target_options: dict[str, Any] | None = None,
) -> bytes:
    """``body`` in dialect ``source`` re-encoded in dialect ``target`` (both
    :class:`~polystream.dialects.DialectInfo`; ``target_options`` for its encoder), fed
    in 64 KiB slices, as a transcoder meets a stream (and as ``decode()`` feeds a body):
    the events of one slice are encoded before the next. The decoder and the encoder are
    paired as :class:`polystream.transcode.Transcoder` pairs them (runs of usage updates given as
    one when the target only merges them); what a transcoder adds to them, detecting
    the source and accumulating its result, is left out."""
    encoder = target.encoder(**(target_options or {}))
    decoder = source.decoder(coalesce=encoder.coalesce_for(source.name), **options)
    feed = decoder.feed
    take_runs = decoder.take_runs
    encode = encoder.encode_batch
    parts: list[bytes] = []
    for at in range(0, len(body), CHUNK):
        parts.append(encode(feed(body[at : at + CHUNK]), take_runs()))
    parts.append(encode(decoder.close(), take_runs()))
    parts.append(encoder.close())
    return b"".join(parts)


_KINDS = {"time": _time, "memory": _memory, "transcode": _transcode}


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """Run one task in this process and return its JSON-able result."""
    return _KINDS[task["kind"]](task)


if __name__ == "__main__":
    result = run_task(json.loads(sys.argv[1]))
    sys.stdout.write("\n" + json.dumps(result) + "\n")
