"""The inspector's page data (polystream.inspector.build_capture): what the decoder says
about a capture, with the byte range of every native event, exactly."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import msgspec
import pytest

from polystream import decode
from polystream.decoding import StreamDecoder, decode_events
from polystream.dialects import DIALECTS, get_dialect
from polystream.events import Raw, dump_event
from polystream.inspector import build_capture, page_data, render_page
from polystream.transcode import convert
from tests.helpers import FIXTURES, fixture_dialect, stream_fixtures

ALL = stream_fixtures()
BAD = sorted(
    p for p in FIXTURES.rglob("*") if "bad" in p.parts and p.suffix in (".sse", ".jsonarray")
)


@pytest.mark.parametrize("path", ALL + BAD, ids=[f"{p.parent.name}/{p.name}" for p in ALL + BAD])
def test_every_fixture_builds_and_says_what_the_decoder_says(path: Path) -> None:
    data = path.read_bytes()
    capture = build_capture(data, name=path.name)
    assert capture["fatal"] is None and capture["complete"] is True
    assert capture["dialect"] == fixture_dialect(path)
    # The unified events are the decoder's, whole; the result is decode()'s.
    expected = decode_events(data)
    assert [msgspec.json.encode(e) for e in capture["events"]] == [dump_event(e) for e in expected]
    assert capture["result"] == decode(data).to_dict()
    # The native events are the decoder's Raw events, in order, each with the unified
    # events that followed it.
    with_raw = decode_events(data, keep_raw=True)
    raws = [e for e in with_raw if type(e) is Raw]
    assert [(n["name"], n["data"]) for n in capture["native"]] == [(r.name, r.data) for r in raws]
    owned = [i for n in capture["native"] for i in n["events"]]
    assert owned == sorted(owned)
    assert [r["native"] for r in capture["timeline"] if r["native"] is not None] == [
        capture["native"].index(n) for n in capture["native"] for _ in n["events"]
    ]
    # Byte ranges: in order, inside the capture, each holding its native event.
    offsets = [n["offset"] for n in capture["native"]]
    assert offsets == sorted(offsets)
    for native in capture["native"]:
        assert 0 <= native["offset"] < native["end"] <= len(data)
    assert [r["event"] for r in capture["timeline"]] == list(range(len(expected)))
    assert capture["stats"]["events"] == len(expected)
    assert capture["stats"]["native_events"] == len(raws)
    # The provider's own final object, and a preview in every dialect.
    decoder = StreamDecoder(keep_events=True)
    decoder.feed(data)
    decoder.close()
    assert capture["native_final"] == {"object": decoder.native(), "error": None}
    assert [t["target"] for t in capture["transcodes"]] == list(DIALECTS)
    assert all(t["error"] is None for t in capture["transcodes"])


def test_anthropic_thinking_exactly() -> None:
    path = FIXTURES / "anthropic_messages" / "thinking.sse"
    data = path.read_bytes()
    capture = build_capture(data, name="thinking.sse", targets=[])
    assert (capture["name"], capture["bytes"], capture["dialect"], capture["framing"]) == (
        "thinking.sse",
        2205,
        "anthropic_messages",
        "sse",
    )
    assert [(n["name"], n["offset"], n["end"], n["events"]) for n in capture["native"]] == [
        ("message_start", 0, 430, [0, 1]),
        ("content_block_start", 430, 570, [2]),
        ("ping", 570, 606, [3]),
        ("content_block_delta", 606, 823, [4]),
        ("content_block_delta", 823, 1012, [5]),
        ("content_block_delta", 1012, 1457, [6]),
        ("content_block_stop", 1457, 1530, [7]),
        ("content_block_start", 1530, 1647, [8]),
        ("content_block_delta", 1647, 1816, [9]),
        ("content_block_stop", 1816, 1889, [10]),
        ("message_delta", 1889, 2154, [11]),
        ("message_stop", 2154, 2205, [12]),
    ]
    # Each native event's bytes are the SSE block it came from.
    assert data[570:606] == b'event: ping\ndata: {"type": "ping"}\n\n'
    assert [(r["type"], r["block"], r["token"]) for r in capture["timeline"]] == [
        ("stream-start", None, False),
        ("usage", None, False),
        ("block-start", 0, False),
        ("keep-alive", None, False),
        ("reasoning-delta", 0, True),
        ("reasoning-delta", 0, True),
        ("signature-delta", 0, False),
        ("block-end", 0, False),
        ("block-start", 1, False),
        ("text-delta", 1, True),
        ("block-end", 1, False),
        ("usage", None, False),
        ("finish", None, False),
    ]
    assert capture["timeline"][9]["summary"] == (
        "#1 The greatest common divisor of 1071 and 462 is **21**."
    )
    assert capture["timeline"][12]["summary"] == "completed stop (end_turn)"
    assert capture["timeline"][11]["summary"] == (
        "in=44 out=172 reasoning=141 cache read=0 total=216"
    )
    assert capture["stats"] == {
        "bytes": 2205,
        "events": 13,
        "native_events": 12,
        "first_token": {"event": 4, "offset": 606, "time": None},
        "duration": None,
        "token_span": None,
        "output_tokens": 172,
        "tokens_per_second": None,
        "longest_gap": None,
    }
    assert capture["timed"] is False and capture["time_origin"] is None
    assert capture["problems"] == []
    result = capture["result"]
    assert result["text"] == "The greatest common divisor of 1071 and 462 is **21**."
    assert result["finish_reason"] == {"unified": "stop", "raw": "end_turn"}
    assert result["usage"]["raw"]["output_tokens_details"] == {"thinking_tokens": 141}
    final = capture["native_final"]["object"]
    assert final["stop_reason"] == "end_turn"
    assert [block["type"] for block in final["content"]] == ["thinking", "text"]
    assert capture["transcodes"] == []
    assert capture["media"] == {"audio": None, "images": []}


def test_gemini_json_array_elements_exactly() -> None:
    data = (FIXTURES / "gemini_generate" / "thoughts.jsonarray").read_bytes()
    capture = build_capture(data, targets=[])
    assert capture["framing"] == "json_array"
    assert [(n["offset"], n["end"], n["events"]) for n in capture["native"]] == [
        (1, 559, [0, 1, 2, 3]),
        (559, 1088, [4, 5]),
        (1088, 1618, [6, 7, 8, 9]),
        (1618, 2153, [10, 11]),
        (2153, 2817, [12, 13, 14, 15]),
    ]
    # The Finish comes at the closing bracket: from no element, at the end.
    assert capture["timeline"][-1] | {"summary": None} == {
        "event": 16,
        "type": "finish",
        "block": None,
        "summary": None,
        "token": False,
        "native": None,
        "offset": 2817,
        "end": 2817,
        "time": None,
        "gap": None,
    }
    assert capture["stats"]["first_token"] == {"event": 2, "offset": 1, "time": None}


def test_problems_have_byte_offsets_and_the_bytes_there() -> None:
    data = (FIXTURES / "openai_responses" / "bad" / "malformed_json.sse").read_bytes()
    capture = build_capture(data, targets=[])
    assert capture["problems"] == [
        {
            "severity": "error",
            "code": "protocol",
            "message": "malformed JSON payload: Input data was truncated",
            "byte_offset": 2079,
            "event_index": 4,
            "event": 4,
            "excerpt": data[2079:2188].decode(),
        },
        {
            "severity": "warning",
            "code": "sequence_gap",
            "message": "sequence_number jumped from 3 to 5 (1 missing)",
            "byte_offset": 2188,
            "event_index": 5,
            "event": 5,
            "excerpt": data[2188:2411].decode(),
        },
    ]
    assert data[2079:2188].startswith(b"event: response.output_text.delta\n")
    # The event that could not be parsed became no native event: its error row has none.
    assert capture["timeline"][4]["native"] is None and capture["timeline"][4]["type"] == "error"


def test_a_truncated_stream_and_an_in_band_error() -> None:
    truncated = build_capture((FIXTURES / "anthropic_messages" / "truncated.sse").read_bytes())
    assert truncated["problems"] == [
        {
            "severity": "error",
            "code": "truncated",
            "message": "stream ended without the anthropic_messages terminal event",
            "byte_offset": 855,
            "event_index": 4,
            "event": 6,
            "excerpt": None,
        }
    ]
    assert truncated["result"]["status"] == "truncated"
    failed = build_capture((FIXTURES / "openai_chat" / "error_mid_stream.sse").read_bytes())
    problems = failed["problems"]
    assert [(p["severity"], p["code"], p["byte_offset"], p["event"]) for p in problems] == [
        ("error", "server", 966, 5)
    ]


def test_strict_mode_and_undetectable_input_stop_with_a_fatal_error() -> None:
    data = (FIXTURES / "openai_responses" / "bad" / "malformed_json.sse").read_bytes()
    strict = build_capture(data, strict=True, targets=["openai_chat"])
    assert strict["complete"] is False
    assert strict["fatal"] == {
        "error": "RemoteProtocolError",
        "message": "malformed JSON payload: Input data was truncated",
        "byte_offset": 2079,
        "event_index": 4,
    }
    assert len(strict["events"]) == 4  # the events before it
    assert strict["problems"][-1]["severity"] == "fatal"
    garbage = build_capture(b"\x00\x01 not a stream")
    assert garbage["dialect"] is None and garbage["events"] == [] and garbage["transcodes"] == []
    assert garbage["fatal"] == {
        "error": "RemoteProtocolError",
        "message": "could not detect the dialect of this input (not a stream of any known dialect)",
        "byte_offset": 0,
        "event_index": None,
    }
    assert garbage["native_final"] == {"object": None, "error": "no dialect was detected"}


def test_timed_chunks_date_each_event_and_give_the_rates() -> None:
    data = (FIXTURES / "anthropic_messages" / "thinking.sse").read_bytes()
    # Arrivals: the head at 0.25 s, the reasoning at 0.5 and 1.0 s, the rest at 2.0 s.
    chunks = [(0.25, data[:606]), (0.5, data[606:823]), (1.0, data[823:1700]), (2.0, data[1700:])]
    capture = build_capture(chunks, targets=[])
    assert capture["timed"] is True and capture["time_origin"] == "request"
    assert [n["time"] for n in capture["native"]] == [
        0.25, 0.25, 0.25, 0.5, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0
    ]  # fmt: skip
    # (The text delta's block ends at byte 1816: it arrived with the last chunk.)
    assert [r["gap"] for r in capture["timeline"]] == [
        None, 0.0, 0.0, 0.0, 0.25, 0.5, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0
    ]  # fmt: skip
    stats = capture["stats"]
    assert stats["first_token"] == {"event": 4, "offset": 606, "time": 0.5}
    assert stats["duration"] == 2.0
    assert stats["token_span"] == 1.5  # first token 0.5 s, last (the text) 2.0 s
    assert stats["tokens_per_second"] == round(172 / 1.5, 3)
    assert stats["longest_gap"] == {"after_event": 8, "event": 9, "seconds": 1.0}
    # Timing changes nothing else.
    untimed = build_capture(data, targets=[])
    assert capture["events"] == untimed["events"] and capture["result"] == untimed["result"]


@pytest.mark.parametrize(
    ("path", "target", "expected_losses"),
    [
        ("anthropic_messages/thinking.sse", "openai_chat", 4),
        ("openai_responses/reasoning_encrypted.sse", "anthropic_messages", 1),
        ("gemini_generate/parallel_function_calls.jsonarray", "openai_responses", 3),
        ("openai_chat/error_mid_stream.sse", "gemini_interactions", 0),
    ],
)
def test_the_transcoding_preview_is_what_convert_writes(
    path: str, target: str, expected_losses: int
) -> None:
    data = (FIXTURES / path).read_bytes()
    wire, losses = convert(data, target)
    (entry,) = build_capture(data, targets=[target])["transcodes"]
    # (An id the target needs and the source has none of is minted at random.)
    assert _minted(entry["text"]) == _minted(wire.decode())
    assert entry | {"text": None} == {
        "target": target,
        "same": False,
        "error": None,
        "content_type": get_dialect(target).encoder().content_type,
        "bytes": len(wire),
        "binary": False,
        "text": None,
        "truncated": False,
        "losses": msgspec.to_builtins(losses),
    }
    assert len(entry["losses"]) == expected_losses


def _minted(text: str) -> str:
    return re.sub(r"\b(msg|toolu|srvtoolu)_01[A-Za-z0-9]{24}\b", r"\1_01<minted>", text)


def test_the_preview_is_cut_and_same_dialect_is_marked() -> None:
    data = (FIXTURES / "anthropic_messages" / "thinking.sse").read_bytes()
    (entry,) = build_capture(data, targets=["anthropic_messages"], preview_chars=100)["transcodes"]
    wire, losses = convert(data, "anthropic_messages")
    assert entry["same"] is True and entry["losses"] == [] and losses == []
    assert entry["text"] == wire.decode()[:100] and entry["truncated"] is True
    assert entry["bytes"] == len(wire)


def test_audio_becomes_a_playable_wav_and_images_data_urls() -> None:
    audio = build_capture((FIXTURES / "gemini_generate" / "audio.sse").read_bytes(), targets=[])
    result = decode((FIXTURES / "gemini_generate" / "audio.sse").read_bytes())
    assert result.audio is not None
    clip = audio["media"]["audio"]
    assert clip["src"] == "data:audio/wav;base64," + base64.b64encode(result.audio.wav()).decode()
    assert (clip["format"], clip["sample_rate"], clip["bytes"], clip["note"]) == (
        "pcm",
        24000,
        len(result.audio.data),
        None,
    )
    image_path = FIXTURES / "gemini_generate" / "image.sse"
    image = build_capture(image_path.read_bytes(), targets=[])
    (decoded,) = decode(image_path.read_bytes()).images
    assert image["media"]["images"] == [
        {
            "index": decoded.index,
            "src": "data:image/png;base64," + base64.b64encode(decoded.data).decode(),
            "mime_type": "image/png",
            "size": None,
            "final": True,
            "partial_images": 0,
            "bytes": len(decoded.data),
            "error": None,
        }
    ]


def test_the_page_holds_its_data_and_scripts_and_nothing_breaks_out() -> None:
    hostile = (
        b'data: {"id":"c","object":"chat.completion.chunk","model":"gpt-5","choices":[{"index":0,'
        b'"delta":{"content":"</script><script>alert(1)</script><!--"},"finish_reason":null}]}\n\n'
        b"data: [DONE]\n\n"
    )
    capture = build_capture(hostile, name="<b>x</b>.sse", targets=[])
    assert capture["result"]["text"] == "</script><script>alert(1)</script><!--"
    page = render_page(page_data([capture], title="<i>t</i>"))
    assert "<script>alert(1)" not in page and "<b>x</b>" not in page and '<!--"' not in page
    assert "<title>&lt;i&gt;t&lt;/i&gt;</title>" in page
    start = page.index('<script type="application/json" id="ps-data">') + len(
        '<script type="application/json" id="ps-data">'
    )
    data = json.loads(page[start : page.index("</script>", start)])
    assert data == {
        "format": "polystream-inspect",
        "version": 1,
        "polystream": data["polystream"],
        "title": "<i>t</i>",
        "targets": list(DIALECTS),
        "captures": [json.loads(msgspec.json.encode(capture))],
        "server": None,
    }
    imports = json.loads(page.split('<script type="importmap">')[1].split("</script>")[0])
    assert sorted(imports["imports"]) == [
        "ps/app.js",
        "ps/capture.js",
        "ps/diff.js",
        "ps/server.js",
        "ps/view.js",
    ]
    app = imports["imports"]["ps/app.js"].removeprefix("data:text/javascript;base64,")
    assert "export function start" in base64.b64decode(app).decode()
    assert "http://" not in page and "https://" not in page  # nothing fetched
