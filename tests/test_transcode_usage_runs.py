"""A transcoder's runs of usage updates given as one (``coalesce="usage"``).

When the target encoder only merges the source's usage updates into the usage it writes
at the end (``DialectEncoder.folds_usage``), a :class:`~polystream.transcode.Transcoder`
makes the source decoder with ``coalesce="usage"``: it may give a run of chunks' usage
updates as one. Gemini's decoder does so for the usual text chunks it reads inline.
Into Gemini's own dialect, whose encoder writes each chunk's usage, the decoder is made
with ``coalesce="usage_texts"``: it keeps each chunk's usage text besides, and the
encoder writes the run from the texts (``DialectEncoder.writes_usage_texts``). Here:
which pairs do, the exact events and texts of such a run, and, on generated streams and
on every Gemini fixture, in every chunking, lenient and strict, into every target (both
of Gemini's framings), that the transcoder writes the same bytes feed by feed, reports
the same losses (event indices included) and the same result as a transcoder that gives
every update.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import settings

from polystream.decoding import StreamDecoder
from polystream.dialects import DIALECTS, get_dialect
from polystream.dialects._base import UsageRun, UsageTexts
from polystream.dialects.gemini_generate import Decoder
from polystream.errors import LocalProtocolError, PolystreamError
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
OWN = ["gemini_generate", "gemini_generate:json_array"]
"""Gemini's own dialect, in both framings: its encoder writes each chunk's usage text."""
TARGETS = FOLDING + OWN


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


def test_which_targets_write_usage_texts() -> None:
    # Only Gemini's generateContent encoder, in either framing, and only for its own
    # dialect's streams.
    for target in DIALECTS:
        for options in ({}, {"framing": "json_array"}) if target == "gemini_generate" else ({},):
            encoder = get_dialect(target).encoder(**options)
            for source in DIALECTS:
                expected = target == source == "gemini_generate"
                assert encoder.writes_usage_texts(source) is expected, (target, source)
    # Only Gemini's decoder has the modes' fast paths (and can make the update a
    # usage text stands for).
    for name in DIALECTS:
        modes = get_dialect(name).decoder().coalesce_modes
        if name == "gemini_generate":
            assert modes == {"off", "result", "usage", "usage_texts"}
        else:
            assert modes == {"off"}, name


def test_which_modes_the_encoders_name() -> None:
    for target in DIALECTS:
        encoder = get_dialect(target).encoder()
        for source in DIALECTS:
            expected = (
                "usage"
                if encoder.folds_usage(source)
                else "usage_texts"
                if target == source == "gemini_generate"
                else "off"
            )
            assert encoder.coalesce_for(source) == expected, (target, source)


def test_a_decoder_without_usage_updates_of_texts_keeps_none() -> None:
    # A decoder asked to keep usage texts, of a dialect without that fast path: it
    # decodes as "off" (every update given, no run noted).
    chat = sse([usual(f" w{i}", i) for i in range(1, 30)] + [last(30)])
    chat = convert(chat, "openai_chat")[0]
    decoder = get_dialect("openai_chat").decoder(coalesce="usage_texts")
    assert decoder.coalesce == "off"
    events = decoder.feed(chat)
    assert sum(type(e) is UsageUpdate for e in events) >= 1
    assert decoder.take_runs() == []
    plain = get_dialect("openai_chat").decoder()
    assert [dump_event(e) for e in plain.feed(chat)] == [dump_event(e) for e in events]


def _update() -> Callable[[bytes, dict[str, Any] | None], UsageUpdate]:
    """The usage update Gemini's decoder gives for a usage text (from a run it noted)."""
    decoder = Decoder(coalesce="usage_texts")
    decoder.feed(sse([usual(f" w{i}", i) for i in range(1, 80)]))
    [run] = decoder.take_runs()
    assert run.texts is not None
    return run.texts.update


def test_the_usual_encoder_writes_usage_texts_as_their_updates() -> None:
    # DialectEncoder's own encode_batch of a run with its texts: each delta, then the
    # update its text stands for, encoded as events (here into Chat, from a Gemini
    # stream's events).
    data = sse([usual(f" w{i}", i) for i in range(1, 6)])
    decoder = Decoder()
    events = decoder.feed(data)
    first = next(i for i, e in enumerate(events) if type(e) is UsageUpdate)
    head, update_event = events[: first - 1], events[first]
    extra = update_event.extra
    texts = [b'{"promptTokenCount": 7,"candidatesTokenCount": %d}' % n for n in (1, 2, 30)]
    deltas = [TextDelta(index=0, delta=f" t{n}") for n in range(3)]
    update = _update()
    one, other = (get_dialect("openai_chat").encoder(id_factory=lambda: "c") for _ in "ab")
    for event in head:
        assert one.encode(event) == other.encode(event)
    run = UsageRun(3, 3, UsageTexts(texts, [_ones(t) for t in texts], update))
    written = one.encode_batch([*deltas, update_event], [run])
    expected = b"".join(
        other.encode(delta) + other.encode(update(text, extra))
        for delta, text in zip(deltas, texts, strict=True)
    )
    assert written == expected
    assert b" t0" in written and b" t2" in written
    assert one.event_index == other.event_index == len(head) + 6
    assert one.close() == other.close()


def test_a_run_gives_its_texts_and_one_usage_update() -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 8)] + [last(8)]
    data = array(chunks)
    full = Decoder()
    every = full.feed(data)
    one = Decoder(coalesce="usage")
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
    assert one.take_runs() == [UsageRun(begin + 3, 3, None)]
    assert one.take_runs() == []  # (taken once)
    assert full.take_runs() == []
    assert [dump_event(e) for e in one.close()] == [dump_event(e) for e in full.close()]
    assert one.take_runs() == []


@pytest.mark.parametrize("framing", ["array", "sse"])
def test_a_run_keeps_each_usage_text(framing: str) -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 21)] + [last(21)]
    data = array(chunks) if framing == "array" else sse(chunks)
    one = Decoder(coalesce="usage")
    fewer = one.feed(data)
    texts = Decoder(coalesce="usage_texts")
    assert [dump_event(e) for e in texts.feed(data)] == [dump_event(e) for e in fewer]
    runs = texts.take_runs()
    [(index, size, kept)] = runs
    assert [(run.event, run.updates) for run in one.take_runs()] == [(index, size)]
    # The run's chunks' usageMetadata texts as they came (the array's indented, with
    # CRLF line ends), and each one's digits made 1s: one object while they are the
    # same (the texts differ in the value of one count, its digits fewer than 3).
    assert kept is not None
    usages, shapes, update = kept
    written = [
        piece[: piece.index(b'"modelVersion"')].rstrip(b" \r\n,")
        for piece in data.split(b'"usageMetadata": ')[1:]
    ]
    assert size >= 3
    assert usages == written[20 - size : 20]
    assert [event.delta for event in fewer[index - size : index]] == [
        f" w{i}" for i in range(21 - size, 21)
    ]
    ones = [text.translate(bytes.maketrans(b"0123456789", b"1" * 10)) for text in usages]
    assert shapes == ones
    assert len({id(shape) for shape in shapes}) == len(set(ones))
    # Each text stands for the update the decoder that gives every update gives.
    every = Decoder().feed(data)
    updates = [e for e in every if type(e) is UsageUpdate][20 - size : 20]
    assert [dump_event(update(text, fewer[index].extra)) for text in usages] == [
        dump_event(e) for e in updates
    ]


def test_a_transcoder_coalesces_only_for_a_folding_target() -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 40)] + [last(40)]
    data = array(chunks)
    folding = Transcoder("openai_chat")
    assert folding.coalesce is None  # (not detected yet)
    out = folding.feed(data)
    assert folding.coalesce == "usage"
    own = Transcoder("gemini_generate", source="gemini_generate", target_options={"framing": "sse"})
    # Into Gemini's own dialect: the usage updates of a run come as one, with each
    # chunk's usage text.
    assert own.coalesce == "usage_texts"
    own.feed(data)
    # A source whose decoder has no runs to give: its decoder takes "off".
    chat = Transcoder("openai_responses", source="openai_chat")
    assert chat.coalesce == "off"
    assert chat.feed(out + folding.close())
    # Into another dialect of its family: every update is written.
    assert Transcoder("xai_chat", source="openai_chat").coalesce == "off"


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
    target, _, framing = target.partition(":")
    if framing:
        options["framing"] = framing
    if not fold:
        return _every_update(target, options, feeds, strict)
    transcoder = Transcoder(target, strict=strict, target_options=options)
    out: list[bytes] = []
    try:
        for feed in feeds:
            out.append(transcoder.feed(feed))
        out.append(transcoder.close())
    except PolystreamError as exc:
        return out, (type(exc).__name__, str(exc), exc.event_index, exc.byte_offset)
    assert transcoder.coalesce == ("usage_texts" if target == "gemini_generate" else "usage")
    return (
        out,
        msgspec.json.encode(transcoder.losses),
        msgspec.json.encode(transcoder.result().to_dict()),
    )


def _every_update(target: str, options: dict[str, Any], feeds: list[bytes], strict: bool) -> Any:
    """As ``transcoded``, by a decoder that gives every update, its events encoded one
    by one (what a transcoder does without the fast path)."""
    decoder = StreamDecoder(strict=strict)
    encoder = get_dialect(target).encoder(**options)
    out: list[bytes] = []
    try:
        for feed in feeds:
            out.append(b"".join([encoder.encode(event) for event in decoder.feed(feed)]))
        out.append(b"".join([encoder.encode(event) for event in decoder.close()]) + encoder.close())
    except PolystreamError as exc:
        return out, (type(exc).__name__, str(exc), exc.event_index, exc.byte_offset)
    assert decoder.dialect_decoder is not None and decoder.dialect_decoder.coalesce == "off"
    return (
        out,
        msgspec.json.encode(encoder.losses),
        msgspec.json.encode(decoder.result().to_dict()),
    )


def assert_same_transcoding(target: str, feeds: list[bytes], strict: bool = False) -> None:
    assert transcoded(target, feeds, strict, fold=True) == transcoded(
        target, feeds, strict, fold=False
    )


def test_losses_keep_their_event_indices() -> None:
    # A run of 200 chunks given as 200 texts and one usage update: the losses after
    # it (the last chunk's signature, the finish metadata) name the indices of the full
    # stream's events. (Gemini states no creation time: the Response's is a default,
    # reported at the stream's start.)
    chunks = [usual(f" w{i}", i) for i in range(1, 200)] + [last(200)]
    data = array(chunks)
    out, losses, _ = transcoded("openai_responses", [data], False, fold=True)
    full = Decoder()
    events = full.feed(data) + full.close()
    signature = next(i for i, e in enumerate(events) if type(e).__name__ == "SignatureDelta")
    assert [
        (loss["what"], loss["event_index"], loss.get("kind"), loss.get("carried"))
        for loss in msgspec.json.decode(losses)
    ] == [
        ("created_at", 0, "defaulted", None),
        ("signature", signature, None, None),
        ("metadata:finish", signature + 2, None, True),  # (the Finish's reason)
    ]
    assert (out, losses) == transcoded("openai_responses", [data], False, fold=False)[:2]
    assert msgspec.json.encode(convert(data, "openai_responses")[1]) == losses


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("framing", ["array", "sse"])
def test_long_runs(target: str, framing: str) -> None:
    chunks = [usual(f" w{i}", i) for i in range(1, 300)] + [last(300)]
    data = array(chunks) if framing == "array" else sse(chunks)
    for feeds in ([data], pieces(data, 1000), pieces(data, 65536)):
        assert_same_transcoding(target, feeds)


@settings(max_examples=150, deadline=None)
@long_stream_cases
def test_long_generated_streams(data: bytes, cuts: list[int], strict: bool, size: int) -> None:
    target = TARGETS[size % len(TARGETS)]  # (the piece size picks the target)
    for feeds in feedings(data, cuts, size):
        assert_same_transcoding(target, feeds, strict)


@pytest.mark.parametrize("path", stream_fixtures("gemini_generate"), ids=lambda p: p.name)
def test_gemini_fixtures(path: Path) -> None:
    data = path.read_bytes()
    for target in TARGETS:
        for feeds in ([data], pieces(data, 7)):
            assert_same_transcoding(target, feeds)


def test_runs_not_taken_are_dropped_at_the_next_call() -> None:
    # A feed whose runs were not taken (its caller raised first, say) leaves them
    # behind; the decoder drops them at its next feed: what that one gives names its
    # own events only.
    chunks = [usual(f" w{i}", i) for i in range(1, 200)] + [last(200)]
    data = array(chunks)
    decoder = Decoder(coalesce="usage")
    decoder.feed(data[:20000])
    assert decoder.feed(data[20000:20001]) == []  # (a byte: nothing read inline)
    assert decoder.take_runs() == []
    events = decoder.feed(data[20001:40000])
    runs = decoder.take_runs()
    assert runs and all(type(events[run.event]) is UsageUpdate for run in runs)
    assert decoder.take_runs() == []  # (taken once)
    decoder.feed(data[40000:])
    assert decoder.close() and decoder.take_runs() == []


def test_a_source_that_names_no_id() -> None:
    # The first chunk's responseId is no string: the stream has no id, and the Chat and
    # Messages encoders draw one (here from the factories ``transcoded`` gives them).
    chunks = [usual("", i) for i in range(8)]
    chunks[0]["responseId"] = 7
    data = sse(chunks)
    for target in TARGETS:
        for feeds in ([data], pieces(data, 1)):
            assert_same_transcoding(target, feeds)


def _ones(text: bytes) -> bytes:
    return text.translate(bytes.maketrans(b"0123456789", b"1" * 10))


_FORMS = [
    # (usageMetadata text, its form into SSE, into the array)
    # Google's SSE spacing: as it came into SSE, reformatted into the array.
    (b'{"promptTokenCount": 7,"candidatesTokenCount": 12}', 1, 2),
    # The array's, one level in (LF): as it came into the array.
    (b'{\n    "promptTokenCount": 7,\n    "candidatesTokenCount": 12\n  }', 2, 1),
    (b'{\r\n    "promptTokenCount": 7,\r\n    "candidatesTokenCount": 12\r\n  }', 2, 2),
    (b'{"promptTokenCount":7,"candidatesTokenCount":12}', 2, 2),
    # Strings: reformatting keeps them; one whose colon the SSE spacing would change
    # is written as it came when it came so, else decoded.
    (b'{"a": "x, y","b": [{"c": "TEXT"}]}', 1, 2),
    (b'{"a":"x, y"}', 2, 2),
    (b'{"a": "x:y"}', 1, 2),
    (b'{"a":"x:y"}', 0, 2),
    # 18 digits are an integer whatever they are; 19 may not be.
    (b'{"a": 123456789012345678}', 1, 2),
    (b'{"a": 1234567890123456789}', 0, 0),
    # What a text of the same form may write otherwise: a negative count ("-0" is
    # written 0), a digit in a key or a string, an escape, a float, a key twice.
    (b'{"a": -1}', 0, 0),
    (b'{"a1": 1}', 0, 0),
    (b'{"a": "TEXT1"}', 0, 0),
    (b'{"a": "\\u0041"}', 0, 0),
    (b'{"a": 1.5}', 0, 0),
    (b'{"a": 1,"a": 2}', 0, 0),
]


@pytest.mark.parametrize(("text", "sse_form", "array_form"), _FORMS)
def test_usage_forms(text: bytes, sse_form: int, array_form: int) -> None:
    for framing, form in (("sse", sse_form), ("json_array", array_form)):
        encoder = get_dialect("gemini_generate").encoder(framing=framing)
        assert encoder._learn_usage_form(text, _ones(text)) == form, framing


def _gemini_chunks(data: bytes) -> tuple[list[Any], dict[str, Any] | None]:
    """The events of ``data`` up to its first usage update, and that update's extra."""
    decoder = Decoder()
    events = decoder.feed(data)
    first = next(i for i, e in enumerate(events) if type(e) is UsageUpdate)
    return events[: first - 1], events[first].extra


@pytest.mark.parametrize("framing", ["sse", "json_array"])
def test_usage_texts_encode_as_their_usage_updates(framing: str) -> None:
    # Whatever the deltas and the texts, the encoder writes what the deltas and the
    # usage updates the texts stand for write (events counted, losses kept).
    from polystream.events import ReasoningDelta

    head, extra = _gemini_chunks(sse([usual(" a", 1), usual(" b", 2)]))
    texts = [text for text, _, _ in _FORMS] + [_FORMS[0][0]] * 3
    undecided = sum(1 for _, *forms in _FORMS if not forms[framing == "json_array"])
    plain = [TextDelta(index=0, delta=f" w{i}") for i in range(len(texts))]
    # Another block's delta, a reasoning delta, a delta with an extra: each takes the
    # general path, and the ones after them the template again; last, a text msgspec
    # cannot write (the general path raises LocalProtocolError).
    odd = [
        TextDelta(index=5, delta="other"),
        ReasoningDelta(index=0, delta="thinking"),
        TextDelta(index=0, delta="x", extra={"part": {"k": 1}}),
    ]
    mixed = plain[:6] + odd + plain[9:-1] + [TextDelta(index=0, delta="\ud800")]
    for deltas, extra_of_run, general in [
        (plain, extra, undecided),
        (mixed, extra, None),
        # No template for an extra that is not a usual chunk's: all general.
        (plain, None, len(texts)),
        (plain, {"chunk": {}}, len(texts)),
    ]:
        got = _both_ways(framing, head, deltas, texts, extra_of_run)
        if general is not None:
            assert type(got[0]) is bytes
            assert len(got[1]) == 2 * general
        else:
            assert got[0] is LocalProtocolError


def _both_ways(
    framing: str,
    head: list[Any],
    deltas: list[Any],
    texts: list[bytes],
    extra: dict[str, Any] | None,
) -> tuple[Any, list[Any]]:
    """After ``head``, what ``_encode_usage_texts`` writes, checked equal to what the
    deltas and the usage updates of the texts write (events counted, losses, close);
    and the events it encoded by the general path."""
    from polystream.dialects.gemini_generate.usage import convert

    fast = get_dialect("gemini_generate").encoder(framing=framing)
    slow = get_dialect("gemini_generate").encoder(framing=framing)
    for event in head:
        assert fast.encode(event) == slow.encode(event)

    def each() -> bytes:
        parts = []
        for delta, text in zip(deltas, texts, strict=True):
            usage = convert(msgspec.json.decode(text))[0]
            parts += [slow.encode(delta), slow.encode(UsageUpdate(usage=usage, extra=extra))]
        return b"".join(parts)

    calls: list[Any] = []
    encode = fast.encode

    def counted(event: Any) -> bytes:
        calls.append(event)
        return encode(event)

    fast.encode = counted  # type: ignore[method-assign]
    run = UsageTexts(texts, [_ones(t) for t in texts], _update())
    update_event = UsageUpdate(usage=convert(msgspec.json.decode(texts[-1]))[0], extra=extra)
    batch = [*deltas, update_event]
    got = _outcome(lambda: fast.encode_batch(batch, [UsageRun(len(deltas), len(deltas), run)]))
    assert got == _outcome(each)
    assert fast.event_index == slow.event_index
    assert msgspec.json.encode(fast.losses) == msgspec.json.encode(slow.losses)
    assert _outcome(fast.close) == _outcome(slow.close)
    return got, calls


def _outcome(run: Callable[[], bytes]) -> Any:
    """What ``run`` returns, or the type of what it raised."""
    try:
        return run()
    except Exception as exc:
        return type(exc)


@pytest.mark.parametrize("framing", ["array", "sse"])
def test_runs_of_every_usage_form(framing: str) -> None:
    # Runs whose usage texts change form from chunk to chunk: each is written as the
    # transcoder that gives every update writes it, in every chunking.
    usages: list[Any] = [
        {"promptTokenCount": 7, "candidatesTokenCount": 1},
        {"promptTokenCount": 7, "candidatesTokenCount": 1234567890123456789},
        {"promptTokenCount": -7, "candidatesTokenCount": 3},
        {"promptTokenCount": 7, "candidatesTokenCount": 4, "d": "x:y"},
        {"promptTokenCount": 7, "candidatesTokenCount": 5, "d": "x, y"},
        {"promptTokenCount": 7, "candidatesTokenCount": 6, "d7": 1},
        {"promptTokenCount": 7, "candidatesTokenCount": 7.5},
    ]
    chunks = [
        usual(f" w{i}", i, usageMetadata=usages[(i // 3) % len(usages)]) for i in range(1, 120)
    ] + [last(120)]
    data = array(chunks) if framing == "array" else sse(chunks)
    # A key twice, in some chunks' usage (no dict writes that).
    data = data.replace(b'"d": "x, y"', b'"d": "x, y",  "d": "z"')
    for target in OWN:
        for feeds in ([data], pieces(data, 700), pieces(data, 65536)):
            assert_same_transcoding(target, feeds)


@pytest.mark.parametrize("framing", ["array", "sse"])
def test_no_run_after_an_error(framing: str) -> None:
    # A chunk that holds an error object in the middle of usual chunks: a Messages
    # encoder reports every event after the error as lost, each usage update included,
    # so that after it the decoder gives every update.
    chunks = [usual(f" w{i}", i) for i in range(1, 60)] + [last(60)]
    chunks[30]["error"] = {"code": 500, "message": "boom", "status": "INTERNAL"}
    data = array(chunks) if framing == "array" else sse(chunks)
    for target in TARGETS:
        for feeds in ([data], pieces(data, 900)):
            assert_same_transcoding(target, feeds)
    _, losses, _ = transcoded("anthropic_messages", [data], False, fold=True)
    after = [loss for loss in msgspec.json.decode(losses) if loss["what"] == "after_error"]
    assert sum(loss["event_type"] == "usage" for loss in after) == 30
    decoder = Decoder(coalesce="usage")
    events = decoder.feed(data)
    error = next(i for i, e in enumerate(events) if type(e).__name__ == "ErrorEvent")
    runs = decoder.take_runs()
    assert runs and all(run.event < error for run in runs)
