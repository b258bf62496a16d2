"""The floor under Gemini decoding: the minimal loop, plus only what the unified model
requires of every chunk, on the same bytes: ``python -m benchmarks.floor [--quick]``.

The decode target is "no more than 2x the minimal loop". The minimal loop (see
:mod:`benchmarks.peers`) decodes each Gemini chunk into a Struct that holds only the
candidates' text and skips ``usageMetadata``. polystream's contract does not let it
skip it: Gemini restates cumulative usage on every chunk, and each chunk ends with a
:class:`~polystream.events.UsageUpdate` whose usage has the canonical counts and, as
``raw``, the provider's object. This benchmark adds those requirements to the minimal
loop one at a time, each step as tight as it can be written (so each is a lower bound
of what any implementation keeping the contract costs), and prints what each step
costs per chunk and its ratio to the minimal loop:

1. ``minimal``: the minimal loop itself, as in the main suite: the body split on the
   blank line (SSE) or on the comma line between two elements (the JSON array), each
   payload decoded on its own. For the JSON array, ``whole array`` is then the array
   decoded whole in one call (no loop over payloads, and nothing streamed): the least
   work there is for those bytes, and what steps 2-5 build on for the array (each a
   lower bound, then, of a reader that streams).
2. ``+ usage dict``: the chunk Struct also keeps ``usageMetadata`` as the dict that
   becomes ``Usage.raw``.
3. ``+ counts``: the canonical :class:`~polystream.events.Usage` built from it with
   the arithmetic only, no check of what the fields hold (a lower bound; unsafe on
   real input).
4. ``+ checked counts``: the same with polystream's converter
   (:func:`polystream.dialects.gemini_generate.usage.convert`), which checks the types
   of what it reads, as input from a network must be.
5. ``+ events``: the chunk's two unified events (:class:`~polystream.events.TextDelta`
   and :class:`~polystream.events.UsageUpdate`) built.
6. ``+ incremental framing``: step 5 with the body framed as a stream, 64 KiB at a
   time, instead of split or decoded whole. For SSE, by polystream's SSE parser. For
   the JSON array, by the least any streaming reader does in Google's layout: the
   elements each feed holds whole (up to its last comma line) are decoded in one
   call, and the rest waits for the next feed; no limit or layout is checked.
   (Decoding each element on its own costs more: its end must be found first. And
   polystream's general element framer is no floor: it is slower than the decoder's
   own template matching, which finds the usual elements.)
7. ``+ fields checked``: step 6 with each chunk decoded into a Struct that types every
   field the usual chunk has and forbids any other (in C, by msgspec), and the checks
   a reader makes before it gives a chunk the usual chunk's events (one candidate at
   index 0, a model turn of one plain text part, no finish, the stream's model and
   response id). Not their order, which msgspec does not report.
8. ``polystream decoder``: the dialect's decoder alone, fed the same 64 KiB slices; its
   events' text picked, nothing accumulated. It checks each chunk's fields, their
   order and the limits, and keeps block state.
9. ``polystream``: :func:`polystream.decode`, which also accumulates the result (its
   decoder gives a run of usual chunks' events coalesced, since only the accumulator
   reads them: one text delta and one usage update per run).

Everything runs in this process, CPU time, the steps interleaved in each repetition;
medians are printed. Steps 1-7 keep no block state and accumulate nothing beyond
joining the text: what they cost is a floor, not a design.

The transcoding target ("at most 3x the minimal loop per event") is decoding plus an
encoder. A second table gives, per target dialect: what polystream's encoder alone
costs on the decoded events (``encode only``), step 6 plus that encoder, step 7 plus
that encoder, and polystream's transcoding (its decoder's events, no accumulation,
encoded as they come, as ``benchmarks.run`` measures it). The floors keep every
chunk's usage update; polystream's transcoding into a target that only merges them
(every one but Gemini's generateContent) gives a run's usage updates as one, as a
transcoder does, and can come under them. Into Gemini's own dialect, whose encoder
writes each chunk's usage, the table also gives the least that writes the encoder's
bytes for a usual chunk (the pieces around its two encoded values joined, nothing
checked: the encoder's own floor, its output checked equal to the encoder's) and step
7 plus it.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

import polystream
from benchmarks import harness
from benchmarks.peers import (
    _Collect,
    _GCandidate,
    _minimal_blocks,
    _minimal_elements,
    _separator,
    _typed_handler,
)
from benchmarks.tables import markdown
from benchmarks.workloads import Workload, gemini_array, gemini_sse
from polystream.dialects import get_dialect
from polystream.dialects.gemini_generate.usage import convert
from polystream.events import Finish, TextDelta, Usage, UsageUpdate
from polystream.wire.sse import ServerSentEvent, SSEDecoder

__all__ = ["STEPS", "main", "measure", "steps_for"]

clock = time.process_time
_SLICE = harness.CHUNK  # what polystream.decode feeds at a time (64 KiB)


class _GUsagePayload(msgspec.Struct):
    """A chunk: the candidates' text, and ``usageMetadata`` as sent (a dict)."""

    candidates: list[_GCandidate] = []
    usageMetadata: dict[str, Any] | None = None


class _SPart(msgspec.Struct, forbid_unknown_fields=True):
    text: str | None = None
    thought: bool = False
    thoughtSignature: str | None = None


class _SContent(msgspec.Struct, forbid_unknown_fields=True):
    parts: list[_SPart] = []
    role: str | None = None


class _SCandidate(msgspec.Struct, forbid_unknown_fields=True):
    content: _SContent | None = None
    index: int = 0
    finishReason: str | None = None


class _SPayload(msgspec.Struct, forbid_unknown_fields=True):
    """A chunk with every field the usual one has, typed and checked by msgspec, and
    no other (an unknown field fails the decode): what ``+ fields checked`` reads."""

    candidates: list[_SCandidate] = []
    usageMetadata: dict[str, Any] | None = None
    modelVersion: str | None = None
    responseId: str | None = None


def _bare_usage(meta: dict[str, Any]) -> Usage:
    """The canonical usage by arithmetic alone (the shape of the benchmark's chunks)."""
    thoughts = meta.get("thoughtsTokenCount")
    candidates = meta["candidatesTokenCount"]
    return Usage(
        input_tokens=meta["promptTokenCount"],
        output_tokens=candidates if thoughts is None else candidates + thoughts,
        reasoning_tokens=thoughts,
        total_tokens=meta["totalTokenCount"],
        raw=meta,
    )


Step = Callable[[], tuple[str, Any]]
Handler = Callable[[Any, _Collect], None]


def _handlers() -> dict[str, Handler]:
    """The per-chunk work of steps 2-5: the minimal loop's, plus the usage."""

    def with_usage(mode: int) -> Handler:
        def handle(chunk: Any, acc: _Collect) -> None:
            # The minimal loop's handler, then what the step adds.
            pieces = []
            for candidate in chunk.candidates:
                if candidate.content is not None:
                    for part in candidate.content.parts:
                        if part.text and not part.thought:
                            acc.text.append(part.text)
                            pieces.append(part.text)
            meta = chunk.usageMetadata
            if meta is None or mode == 0:
                acc.names[0] = meta  # the last usage is what the result keeps
                return
            usage = _bare_usage(meta) if mode == 1 else convert(meta)[0]
            if mode == 3:
                for piece in pieces:
                    TextDelta(index=0, delta=piece)
                UsageUpdate(usage=usage)
            acc.names[0] = usage

        return handle

    return {
        "+ usage dict": with_usage(0),
        "+ counts": with_usage(1),
        "+ checked counts": with_usage(2),
        "+ events": with_usage(3),
    }


def _checked(events: Handler, usual: list[int]) -> Handler:
    """``+ events``, after the checks a reader makes before it gives a chunk the usual
    chunk's events: one candidate, at index 0, a model turn of one plain text part, no
    finish, the first chunk's model and response id, and a usage. A chunk that passes
    gets its two events here at once (``usual[0]`` counts them); any other takes
    ``events`` (the same events, for this benchmark's chunks)."""
    first: list[tuple[Any, Any]] = []

    def handle(chunk: Any, acc: _Collect) -> None:
        ids = (chunk.modelVersion, chunk.responseId)
        if not first:
            first.append(ids)
        candidates = chunk.candidates
        meta = chunk.usageMetadata
        if len(candidates) == 1 and ids == first[0] and meta is not None:
            candidate = candidates[0]
            content = candidate.content
            if (
                content is not None
                and candidate.index == 0
                and candidate.finishReason is None
                and content.role == "model"
                and len(content.parts) == 1
            ):
                part = content.parts[0]
                text = part.text
                if text is not None and not part.thought and part.thoughtSignature is None:
                    usual[0] += 1
                    if text:
                        acc.text.append(text)
                        TextDelta(index=0, delta=text)
                    usage = convert(meta)[0]
                    UsageUpdate(usage=usage)
                    acc.names[0] = usage
                    return
        events(chunk, acc)

    return handle


def steps_for(work: Workload) -> dict[str, Step]:
    """One runner per step for ``work``; each returns the joined text and the usage
    it kept last (the ``usageMetadata`` dict for ``+ usage dict``, None for
    ``minimal``)."""
    body = work.body
    array = work.framing == "json_array"
    sep = _separator(work)

    def loop(decoder: msgspec.json.Decoder[Any], handle: Handler) -> Step:
        """The minimal loop's own shape, with another chunk type and handler."""
        whole = msgspec.json.Decoder(list[decoder.type])  # type: ignore[name-defined]

        def run() -> tuple[str, Any]:
            acc = _Collect()
            if array:
                for element in whole.decode(body):
                    handle(element, acc)
            else:
                _minimal_blocks(body.split(sep), decoder, handle, acc)
            return "".join(acc.text), acc.names.get(0)

        return run

    plain_decoder, plain_handle = _typed_handler(work.family)
    usage_decoder = msgspec.json.Decoder(_GUsagePayload)
    steps = {"minimal": loop(plain_decoder, plain_handle)}
    if array:
        # The minimal loop proper splits the array on its comma lines and decodes each
        # element, as it splits SSE on blank lines; the whole array in one call is the
        # reference the steps after it build on.
        steps["whole array"] = steps["minimal"]

        def per_element() -> tuple[str, Any]:
            acc = _Collect()
            _minimal_elements(body.split(sep), plain_decoder, plain_handle, acc)
            return "".join(acc.text), None

        steps["minimal"] = per_element
    handlers = _handlers()
    for name, handle in handlers.items():
        steps[name] = loop(usage_decoder, handle)

    events = handlers["+ events"]

    def framed(decoder: msgspec.json.Decoder[Any], handle: Handler, acc: _Collect) -> None:
        """``handle`` each chunk of the SSE body framed incrementally, 64 KiB at a
        time, by polystream's SSE parser (as ``polystream.decode`` feeds it)."""
        sse = SSEDecoder()
        decode = decoder.decode
        for pos in range(0, len(body), _SLICE):
            for frame in sse.feed(body[pos : pos + _SLICE]):
                if type(frame) is ServerSentEvent:
                    handle(decode(frame.data), acc)
        sse.close()

    def framed_array(decoder: msgspec.json.Decoder[Any], handle: Handler, acc: _Collect) -> None:
        """``handle`` each chunk of the JSON array framed as a stream, 64 KiB at a
        time, by the least a reader can do in Google's layout: the elements a feed
        holds whole (up to its last comma line, ``\\n,``) are decoded in one call, as
        one array, and the rest waits for the next feed. msgspec finds where each
        element ends as it parses it; a search in Python costs more per element than
        the whole step adds (0.4-0.7 us for the next comma line of a 577-byte
        element). Nothing is checked (no size or depth limit, no layout check): a
        lower bound, not a reader."""
        batch = msgspec.json.Decoder(list[decoder.type])  # type: ignore[name-defined]
        held = b""
        for pos in range(0, len(body), _SLICE):
            data = held + body[pos : pos + _SLICE] if held else body[pos : pos + _SLICE]
            start = data.index(b"[") + 1 if pos == 0 else 0
            cut = data.rfind(b"\n,", start)
            if cut >= 0:
                for chunk in batch.decode(b"[" + data[start:cut] + b"]"):
                    handle(chunk, acc)
                start = cut + 2
            held = data[start:]
        last = held.rstrip()
        if not last.endswith(b"]"):
            raise AssertionError("the array does not end with its bracket")
        handle(decoder.decode(last[:-1]), acc)

    frame = framed_array if array else framed

    def incremental() -> tuple[str, Any]:
        acc = _Collect()
        frame(usage_decoder, events, acc)
        return "".join(acc.text), acc.names.get(0)

    strict_decoder = msgspec.json.Decoder(_SPayload)

    def fields_checked() -> tuple[str, Any]:
        acc = _Collect()
        usual = [0]
        frame(strict_decoder, _checked(events, usual), acc)
        if usual[0] != work.deltas - 1:  # all but the last (signature, finish)
            raise AssertionError(f"{usual[0]} usual chunks of {work.deltas}")
        return "".join(acc.text), acc.names.get(0)

    steps["+ incremental framing"] = incremental
    steps["+ fields checked"] = fields_checked

    def decoder_only() -> tuple[str, Any]:
        """The dialect's decoder alone, fed as ``polystream.decode`` feeds it: its
        events are not accumulated, only their text picked (and the usage is the
        Finish's)."""
        decoder = get_dialect(work.dialect).decoder(framing=work.framing)
        feed = decoder.feed
        texts: list[str] = []
        for pos in range(0, len(body), _SLICE):
            texts += [e.delta for e in feed(body[pos : pos + _SLICE]) if type(e) is TextDelta]
        finish = decoder.close()[-1]
        if type(finish) is not Finish:
            raise AssertionError("the decoder did not end with its Finish")
        return "".join(texts), finish.usage

    steps["polystream decoder"] = decoder_only

    def decode() -> tuple[str, Any]:
        result = polystream.decode(body, work.dialect, framing=work.framing)
        return result.text, result.usage

    steps["polystream"] = decode
    return steps


STEPS = (
    "minimal",
    "whole array",
    "+ usage dict",
    "+ counts",
    "+ checked counts",
    "+ events",
    "+ incremental framing",
    "+ fields checked",
    "polystream decoder",
    "polystream",
)


def measure(work: Workload, repeat: int) -> dict[str, float]:
    """Median CPU seconds of each step on ``work`` (steps interleaved per repetition).

    Raises:
        AssertionError: A step's text differs from the workload's.
    """
    steps = steps_for(work)
    for name, step in steps.items():  # warm-up, and every step gives the same text
        if step()[0] != work.text:
            raise AssertionError(f"{work.name}: step {name!r} gave another text")
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeat):
        for name, step in steps.items():
            # Each step starts from a collected heap: a step's garbage is not another's.
            gc.collect()
            start = clock()
            step()
            times[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in times.items()}


TARGETS = (
    "openai_responses",
    "openai_chat",
    "anthropic_messages",
    "gemini_interactions",
    "gemini_generate",
    "gemini_generate:json_array",
)


def _write_floor(events: list[Any], info: Any, framing: dict[str, str]) -> Callable[[], Any]:
    """The least that writes what polystream's Gemini encoder writes for the usual
    chunks of ``events`` (a text delta, then its usage update): each chunk's bytes
    joined from the pieces around its two encoded values (the text, and the usage as
    Google spaces it), without any check. The pieces are cut from the encoder's own
    output, and the floor's bytes are checked equal to it, chunk for chunk.

    Raises:
        AssertionError: The floor does not write the encoder's bytes.
    """
    encode = msgspec.json.Encoder().encode
    array = framing.get("framing") == "json_array"

    def usage_of(raw: Any) -> bytes:
        if array:
            return msgspec.json.format(encode(raw), indent=2).replace(b"\n", b"\n  ")
        return encode(raw).replace(b":", b": ")

    encoder = info.encoder(**framing)
    pairs: list[tuple[str, Any]] = []
    written: list[bytes] = []
    before: Any = None
    for event in events:
        data = encoder.encode(event)
        if type(event) is UsageUpdate and type(before) is TextDelta:
            pairs.append((before.delta, event.usage.raw))
            written.append(data)
        before = event
    pairs, written = pairs[1:-1], written[1:-1]  # (the first and last chunks differ)
    text, raw = pairs[0]
    value, usage = encode(text), usage_of(raw)
    at = written[0].index(value)
    pre, rest = written[0][:at], written[0][at + len(value) :]
    at = rest.index(usage)
    mid, suf = rest[:at], rest[at + len(usage) :]

    def run() -> list[bytes]:
        return [b"".join((pre, encode(t), mid, usage_of(r), suf)) for t, r in pairs]

    if run() != written:
        raise AssertionError(f"the write floor does not write what {info.name} writes")
    return run


def transcoding(work: Workload, repeat: int) -> dict[str, dict[str, float]]:
    """Per target dialect: median CPU seconds of polystream's encoder alone on the
    decoded events (``encode``) and of the whole transcoding (``transcode``); for
    Gemini's own dialect, also of :func:`_write_floor` (``write``, per usual chunk).

    Raises:
        AssertionError: A transcoded output does not decode back to the text.
    """
    source = get_dialect(work.dialect)
    options = {"framing": work.framing}
    decoder = source.decoder(**options)
    events = decoder.feed(work.body) + decoder.close()
    body = work.body
    out: dict[str, dict[str, float]] = {}
    for target in TARGETS:
        info, framing = harness.target_dialect(target)

        def encode_only(info: Any = info, framing: dict[str, str] = framing) -> bytes:
            encoder = info.encoder(**framing)
            return encoder.encode_all(events)

        def transcode(info: Any = info, framing: dict[str, str] = framing) -> bytes:
            return harness.transcode(source, info, options, body, framing)

        for run in (transcode, encode_only):
            if polystream.decode(run(), info.name, **framing).text != work.text:
                raise AssertionError(f"{work.name} -> {target}: the text did not survive")
        runs: list[tuple[str, Callable[[], Any]]] = [
            ("encode", encode_only),
            ("transcode", transcode),
        ]
        counted = 0
        if info.name == work.dialect:
            write = _write_floor(events, info, framing)
            counted = len(write())
            runs.append(("write", write))
        times: dict[str, list[float]] = {name: [] for name, _ in runs}
        for _ in range(repeat):
            for name, run in runs:
                gc.collect()
                start = clock()
                run()
                times[name].append(clock() - start)
        out[target] = {name: statistics.median(values) for name, values in times.items()}
        if counted:
            # (as if the stream's every chunk were a usual one, as the others count)
            out[target]["write"] *= len(work.events) / counted
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floor", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="200 chunks, one repetition")
    parser.add_argument("--repeat", type=int, default=15, help="repetitions (default 15)")
    parser.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    args = parser.parse_args(argv)
    chunks = 200 if args.quick else 5_000
    repeat = 1 if args.quick else args.repeat
    rows = []
    coding_rows = []
    report: dict[str, Any] = {
        "chunks": chunks,
        "repeat": repeat,
        "workloads": {},
        "transcoding": {},
    }
    for work in (
        gemini_sse("gemini_sse", chunks=chunks),
        gemini_array("gemini_array", chunks=chunks),
    ):
        medians = measure(work, repeat)
        base = medians["minimal"]
        report["workloads"][work.name] = {
            name: {
                "seconds": seconds,
                "per_chunk_us": seconds / chunks * 1e6,
                "ratio": seconds / base,
            }
            for name, seconds in medians.items()
        }
        for name in STEPS:
            if name not in medians:
                rows.append([work.name, name, "-", "-", "-"])
                continue
            seconds = medians[name]
            rows.append(
                [
                    work.name,
                    name,
                    f"{seconds * 1e3:.2f}",
                    f"{seconds / chunks * 1e6:.2f}",
                    f"{seconds / base:.2f}x",
                ]
            )
        floor = medians["+ incremental framing"]
        checked = medians["+ fields checked"]
        coding = transcoding(work, repeat)
        report["transcoding"][work.name] = coding
        for target, cell in coding.items():
            write = cell.get("write")
            coding_rows.append(
                [
                    work.name,
                    target,
                    f"{cell['encode'] / chunks * 1e6:.2f}",
                    f"{(floor + cell['encode']) / base:.2f}x",
                    f"{(checked + cell['encode']) / base:.2f}x",
                    "-" if write is None else f"{write / chunks * 1e6:.2f}",
                    "-" if write is None else f"{(checked + write) / base:.2f}x",
                    f"{cell['transcode'] / base:.2f}x",
                ]
            )
    print(
        f"Gemini decoding floor: {chunks:,} chunks, median CPU time of {repeat} "
        "interleaved repetitions; ratio to the minimal loop (the target is 2x).\n"
    )
    print(markdown([["workload", "step", "ms", "us/chunk", "/ minimal"], *rows]))
    print(
        "\nTranscoding from Gemini (the target is 3x the minimal loop): polystream's "
        "encoder alone per chunk, the floor (step 6) plus that encoder, the floor with "
        "the fields checked (step 7) plus that encoder; into Gemini's own dialect, the "
        "least that writes the encoder's bytes per chunk (no check) and step 7 plus it; "
        "and polystream's transcoding.\n"
    )
    header = [
        "source",
        "target",
        "encode only, us/chunk",
        "floor + encoder",
        "checked + encoder",
        "write floor, us/chunk",
        "checked + write floor",
        "polystream",
    ]
    print(markdown([header, *coding_rows]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
