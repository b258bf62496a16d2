"""``polystream decode``: ``--result --pretty``, and what ``--events`` leaves out of the
events it prints (the decoder's private ``extra`` entries, the usage updates that bring
nothing new) unless ``--raw``."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from polystream.cli import main
from polystream.cli._decode import EventView
from polystream.decoding import StreamDecoder
from polystream.dialects import SSE_DIALECTS
from polystream.events import (
    Event,
    StreamStart,
    TextDelta,
    Usage,
    UsageUpdate,
    dump_event,
    event_to_builtins,
)
from tests.helpers import FIXTURES


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _all_events(path: Path) -> tuple[list[Event], frozenset[str]]:
    """Every event of a fixture, and its decoder's private extra keys."""
    decoder = StreamDecoder("auto")
    events = decoder.feed(path.read_bytes()) + decoder.close()
    assert decoder.dialect_decoder is not None
    return events, decoder.dialect_decoder.private_extra


# -- --pretty -------------------------------------------------------------------------------


def test_result_pretty_is_the_result_indented(capsys: pytest.CaptureFixture[str]) -> None:
    source = str(FIXTURES / "anthropic_messages" / "skeleton.sse")
    status, plain, err = run(capsys, "decode", "--result", source)
    assert (status, err) == (0, "")
    status, pretty, err = run(capsys, "decode", "--result", "--pretty", source)
    assert (status, err) == (0, "")
    assert pretty == msgspec.json.format(plain.strip().encode(), indent=2).decode() + "\n"
    assert pretty.startswith('{\n  "dialect": "anthropic_messages",\n  "id": ')
    assert json.loads(pretty) == json.loads(plain)


def test_pretty_goes_with_result(capsys: pytest.CaptureFixture[str]) -> None:
    source = str(FIXTURES / "anthropic_messages" / "skeleton.sse")
    assert run(capsys, "decode", "--pretty", source) == (
        2,
        "",
        "polystream: error: --pretty goes with --result\n",
    )


# -- --events: private extra entries ---------------------------------------------------------


def test_chat_residuals_are_hidden_and_shown_with_raw(capsys: pytest.CaptureFixture[str]) -> None:
    source = FIXTURES / "openai_chat" / "annotations.sse"
    status, out, err = run(capsys, "decode", str(source))
    assert (status, err) == (0, "")
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0] == {
        "type": "stream-start",
        "dialect": "openai_chat",
        "id": "chatcmpl-CRann2Ws5Ed8Rf1Tg4Yh7Uj0",
        "model": "gpt-4o-search-preview-2025-03-11",
        "created": 1764460800,
    }
    assert [line["type"] for line in lines] == [
        "stream-start",
        "status",
        "block-start",
        "text-delta",
        "citation",
        "metadata",
        "block-end",
        "finish",
    ]
    assert not any("extra" in line for line in lines)
    status, raw, _ = run(capsys, "decode", "--raw", str(source))
    assert status == 0
    decoder = StreamDecoder("openai_chat", keep_raw=True)
    every = decoder.feed(source.read_bytes()) + decoder.close()
    assert raw.encode() == b"".join(dump_event(event) + b"\n" for event in every)
    assert '"extra":{"chat":' in raw


def test_responses_markers_are_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    source = FIXTURES / "openai_responses" / "reasoning_encrypted.sse"
    events, private = _all_events(source)
    assert private == {"implicit", "resumed"}
    marked = [i for i, e in enumerate(events) if e.extra == {"implicit": True}]
    assert marked  # (the encrypted content restated by output_item.done)
    status, out, _ = run(capsys, "decode", str(source))
    assert status == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == len(events)  # (no usage update to drop)
    for i in marked:
        assert "extra" not in lines[i]
        assert lines[i] == {k: v for k, v in event_to_builtins(events[i]).items() if k != "extra"}
    # Native fields the events do not model stay.
    assert lines[0]["extra"]["type"] == "response.created"


@pytest.mark.parametrize("dialect", SSE_DIALECTS)
def test_every_fixture_prints_its_events_without_private_entries(
    dialect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each printed event is the decoder's own with its private entries left out; only
    # usage updates are left out, and only those that bring nothing new.
    for source in sorted((FIXTURES / dialect).glob("*.sse")):
        events, private = _all_events(source)
        status, out, err = run(capsys, "decode", str(source))
        assert status == 0, (source, err)
        printed = [json.loads(line) for line in out.splitlines()]
        at = 0
        usage = Usage()
        for event in events:
            whole = event_to_builtins(event)
            extra = {
                k: v for k, v in (event.extra or {}).items() if k not in private and k[:1] != "_"
            }
            whole.pop("extra", None)
            if extra:
                whole["extra"] = json.loads(json.dumps(extra))
            if at < len(printed) and printed[at] == whole:
                at += 1
                if isinstance(event, UsageUpdate):
                    usage = usage.merged(event.usage)
                continue
            assert isinstance(event, UsageUpdate), (source, whole)
            assert usage.merged(event.usage) == usage or event.usage.is_empty(), source
        assert at == len(printed), source


# -- --events: usage updates that bring nothing new ------------------------------------------


def test_gemini_chunks_usage_with_nothing_new_is_not_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = FIXTURES / "gemini_generate" / "vertex_order.sse"
    _, out, _ = run(capsys, "decode", str(source))
    usage = [json.loads(line) for line in out.splitlines() if '"type":"usage"' in line]
    # Three chunks, three updates: the second repeats the first (no count, the same
    # chunk fields) and is left out.
    assert [u["usage"].get("total_tokens") for u in usage] == [None, 9]
    assert usage[0]["usage"] == {"raw": {"trafficType": "ON_DEMAND"}}
    _, raw, _ = run(capsys, "decode", "--raw", str(source))
    assert raw.count('"type":"usage"') == 3


def test_the_view_of_usage_updates() -> None:
    view = EventView(frozenset({"mark"}))
    chunk = {"chunk": {"modelVersion": "m"}}
    ten = Usage(input_tokens=3, output_tokens=7, total_tokens=10)
    shown = [
        view.show(event)
        for event in [
            StreamStart(dialect="x", extra={"mark": True}),
            UsageUpdate(usage=Usage(), extra=chunk),  # the first: shown
            TextDelta(index=0, delta="a", extra={"mark": 1, "_own": 2, "native": 3}),
            UsageUpdate(usage=Usage(), extra=chunk),  # nothing new
            UsageUpdate(usage=ten, extra=chunk),  # new counts
            UsageUpdate(usage=ten, extra=chunk),  # the same counts again
            UsageUpdate(usage=Usage(output_tokens=7), extra=chunk),  # no change
            UsageUpdate(usage=Usage(output_tokens=7), extra={"chunk": {"x": 1}}),  # new extra
            UsageUpdate(usage=Usage(output_tokens=8), extra={"chunk": {"x": 1}}),
        ]
    ]
    assert shown == [
        StreamStart(dialect="x"),
        UsageUpdate(usage=Usage(), extra=chunk),
        TextDelta(index=0, delta="a", extra={"native": 3}),
        None,
        UsageUpdate(usage=ten, extra=chunk),
        None,
        None,
        UsageUpdate(usage=Usage(output_tokens=7), extra={"chunk": {"x": 1}}),
        UsageUpdate(usage=Usage(output_tokens=8), extra={"chunk": {"x": 1}}),
    ]
