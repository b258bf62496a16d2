"""A transcoder's runs of usage updates given as one (``_coalesce_usage``).

When the target encoder only merges the source's usage updates into the usage it writes
at the end (``DialectEncoder.folds_usage``), a :class:`~polystream.transcode.Transcoder`
lets the source decoder give a run of chunks' usage updates as one. Gemini's decoder
does so for the usual text chunks it reads inline. Here: which pairs do, the exact
events of such a run, and, on generated streams and on every Gemini fixture, in every
chunking, lenient and strict, that the transcoder writes the same bytes feed by feed,
reports the same losses (event indices included) and the same result as a transcoder
that gives every update.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import settings

from polystream.dialects import DIALECTS, get_dialect
from polystream.dialects.gemini_generate import Decoder
from polystream.errors import PolystreamError
from polystream.events import TextDelta, UsageUpdate, dump_event
from polystream.transcode import Transcoder, convert
from tests.dialects.test_gemini_generate_fast import (
    array,
    feedings,
    last,
    long_stream_cases,
    pieces,
    sse,
    usual,
)
from tests.helpers import FAMILIES, stream_fixtures

FOLDING = [name for name in DIALECTS if name != "gemini_generate"]
"""The targets that only merge a Gemini stream's usage updates (every dialect but
Gemini's generateContent, which writes each chunk's usage)."""


def test_which_targets_fold_which_sources() -> None:
    assert set(FAMILIES) == set(DIALECTS)
    for target in DIALECTS:
        encoder = get_dialect(target).encoder()
        for source in DIALECTS:
            # Every target but its own family's, and never Gemini's generateContent
            # (it writes each chunk's usage).
            expected = FAMILIES[source] != FAMILIES[target] and target != "gemini_generate"
            assert encoder.folds_usage(source) is expected, (target, source)
    assert [t for t in DIALECTS if get_dialect(t).encoder().folds_usage("gemini_generate")] == [
        t for t in DIALECTS if t in FOLDING
    ]


def test_a_run_gives_its_texts_and_one_usage_update() -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 8)] + [last(8)]
    data = array(chunks)
    full = Decoder()
    every = full.feed(data)
    one = Decoder()
    one._coalesce_usage = True
    fewer = one.feed(data)
    usages = [e for e in every if type(e) is UsageUpdate]
    # The chunks in the feed's first 2 KiB are read by the framing's parser, each with
    # its own events; w5-w7 are read inline: their texts, then one usage update, of
    # their usages merged (each reports every count of the one before: the last one).
    begin = every.index(usages[3]) + 1
    end = every.index(usages[6]) + 1
    assert [dump_event(e) for e in every[begin:end]] == [
        dump_event(e)
        for e in [
            TextDelta(index=0, delta=" w5"),
            usages[4],
            TextDelta(index=0, delta=" w6"),
            usages[5],
            TextDelta(index=0, delta=" w7"),
            usages[6],
        ]
    ]
    run = [every[begin], every[begin + 2], every[begin + 4], usages[6]]
    assert [dump_event(e) for e in fewer] == [
        dump_event(e) for e in every[:begin] + run + every[end:]
    ]
    assert one._usage_runs == [(begin + 3, 3)]
    assert full._usage_runs == []
    assert [dump_event(e) for e in one.close()] == [dump_event(e) for e in full.close()]


def test_a_transcoder_coalesces_only_for_a_folding_target() -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 40)] + [last(40)]
    data = array(chunks)
    folding = Transcoder("openai_chat")
    out = folding.feed(data)
    assert folding._decoder.coalescing is not None
    assert folding._decoder.coalescing._usage_runs == []  # read after each feed
    own = Transcoder("gemini_generate", source="gemini_generate", target_options={"framing": "sse"})
    own.feed(data)
    assert own._decoder.coalescing is None
    # A source whose decoder has no runs to give: the switch is set, nothing changes.
    chat = Transcoder("openai_responses", source="openai_chat")
    assert chat._decoder.coalescing is not None
    assert chat.feed(out + folding.close()) and chat._decoder.coalescing._usage_runs == []


def _ids() -> Callable[[str], str]:
    counter = itertools.count()
    return lambda prefix: f"{prefix}_{next(counter)}"


def transcoded(target: str, feeds: list[bytes], strict: bool, *, fold: bool) -> Any:
    """The bytes each feed gave (then close), the losses and the result, or the error
    that stopped it; ``fold=False``: a transcoder whose decoder gives every update."""
    # (Ids the encoders would draw at random, for a source that names none.)
    options: dict[str, Any] = {}
    if "messages" in target:
        options["id_factory"] = _ids()
    elif "chat" in target:
        options["id_factory"] = lambda: "chatcmpl-1"
    transcoder = Transcoder(target, strict=strict, target_options=options)
    if not fold:
        transcoder._encoder.folds_usage = lambda source: False  # type: ignore[method-assign]
    out: list[bytes] = []
    try:
        for feed in feeds:
            out.append(transcoder.feed(feed))
        out.append(transcoder.close())
    except PolystreamError as exc:
        return out, (type(exc).__name__, str(exc), exc.event_index, exc.byte_offset)
    if fold and transcoder.source == "gemini_generate":
        assert transcoder._decoder.coalescing is not None
    else:
        assert transcoder._decoder.coalescing is None
    return (
        out,
        msgspec.json.encode(transcoder.losses),
        msgspec.json.encode(transcoder.result().to_dict()),
    )


def assert_same_transcoding(target: str, feeds: list[bytes], strict: bool = False) -> None:
    assert transcoded(target, feeds, strict, fold=True) == transcoded(
        target, feeds, strict, fold=False
    )


def test_losses_keep_their_event_indices() -> None:
    # A run of 200 chunks given as 200 texts and one usage update: the losses after
    # it (the last chunk's signature, the finish metadata) name the indices of the full
    # stream's events.
    chunks = [usual(f" w{i}", i) for i in range(1, 200)] + [last(200)]
    data = array(chunks)
    out, losses, _ = transcoded("openai_responses", [data], False, fold=True)
    full = Decoder()
    events = full.feed(data) + full.close()
    signature = next(i for i, e in enumerate(events) if type(e).__name__ == "SignatureDelta")
    assert [(loss["what"], loss["event_index"]) for loss in msgspec.json.decode(losses)] == [
        ("signature", signature),
        ("metadata:finish", signature + 2),
    ]
    assert (out, losses) == transcoded("openai_responses", [data], False, fold=False)[:2]
    assert msgspec.json.encode(convert(data, "openai_responses")[1]) == losses


@pytest.mark.parametrize("target", FOLDING)
@pytest.mark.parametrize("framing", ["array", "sse"])
def test_long_runs(target: str, framing: str) -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 300)] + [last(300)]
    data = array(chunks) if framing == "array" else sse(chunks)
    for feeds in ([data], pieces(data, 1000), pieces(data, 65536)):
        assert_same_transcoding(target, feeds)


@settings(max_examples=150, deadline=None)
@long_stream_cases
def test_long_generated_streams(data: bytes, cuts: list[int], strict: bool, size: int) -> None:
    target = FOLDING[size % len(FOLDING)]  # (the piece size picks the target)
    for feeds in feedings(data, cuts, size):
        assert_same_transcoding(target, feeds, strict)


@pytest.mark.parametrize("path", stream_fixtures("gemini_generate"), ids=lambda p: p.name)
def test_gemini_fixtures(path: Path) -> None:
    data = path.read_bytes()
    for target in FOLDING:
        for feeds in ([data], pieces(data, 7)):
            assert_same_transcoding(target, feeds)


def test_a_note_left_by_a_call_that_raised_is_not_read() -> None:
    # A feed that raised after its decoder noted a run (the accumulator, say) leaves
    # the note behind; the next feed's events are counted from their own notes only.
    chunks = [usual(f" w{i}", i) for i in range(1, 200)] + [last(200)]
    data = array(chunks)
    expected = transcoded("openai_responses", [data[:10], data[10:]], False, fold=False)
    transcoder = Transcoder("openai_responses")
    out = [transcoder.feed(data[:10])]
    assert transcoder._decoder.coalescing is not None
    transcoder._decoder.coalescing._usage_runs.append((0, 50))
    out += [transcoder.feed(data[10:]), transcoder.close()]
    assert out == expected[0]
    assert msgspec.json.encode(transcoder.losses) == expected[1]


def test_a_source_that_names_no_id() -> None:
    # The first chunk's responseId is no string: the stream has no id, and the Chat and
    # Messages encoders draw one (here from the factories ``transcoded`` gives them).
    chunks = [usual("", i) for i in range(8)]
    chunks[0]["responseId"] = 7
    data = sse(chunks)
    for target in FOLDING:
        for feeds in ([data], pieces(data, 1)):
            assert_same_transcoding(target, feeds)
