"""The command line, called as ``polystream.cli.main([...])`` (plus one subprocess run
of ``python -m polystream``): ``frames`` output lines and errors, ``decode`` exit codes
and output shapes, ``--help`` everywhere."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from polystream.cli import main
from polystream.cli._main import CHUNK_SIZE, _parser
from polystream.events import Finish, StreamStart, load_event


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    """Run the CLI; return (exit status, stdout parsed as JSON lines, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, [json.loads(line) for line in out.splitlines()], err


@pytest.fixture
def write(tmp_path: Path):
    def write(data: bytes, name: str = "input") -> str:
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)

    return write


@pytest.fixture
def stdin(monkeypatch: pytest.MonkeyPatch):
    def feed(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))

    return feed


# -- frames: SSE ------------------------------------------------------------------------------

SSE = (
    b": OPENROUTER PROCESSING\n\n"
    b'event: message_start\nid: 1\nretry: 1000\ndata: {"a":1}\n\n'
    b"data: two\r\ndata: lines\r\n\r\n"
    b"id:\nretry: 1e3\ndata: x\n\n"
    b": ping\n"
)
SSE_LINES = [
    {"comment": "OPENROUTER PROCESSING"},
    {"event": "message_start", "data": '{"a":1}', "id": "1", "retry": 1000},
    {"event": None, "data": "two\nlines", "id": "1", "retry": None},  # the id persists
    {"event": None, "data": "x", "id": "", "retry": None},  # reset; invalid retry is null
    {"comment": "ping"},
]


def test_frames_sse(capsys: pytest.CaptureFixture[str], write: Any) -> None:
    assert run(capsys, "frames", write(SSE)) == (0, SSE_LINES, "")


def test_frames_sse_explicit_framing(capsys: pytest.CaptureFixture[str], write: Any) -> None:
    assert run(capsys, "frames", "--framing", "sse", write(SSE)) == (0, SSE_LINES, "")


def test_frames_reads_stdin(capsys: pytest.CaptureFixture[str], stdin: Any) -> None:
    stdin(SSE)
    assert run(capsys, "frames", "-") == (0, SSE_LINES, "")


def test_frames_sse_across_read_chunks(capsys: pytest.CaptureFixture[str], write: Any) -> None:
    big = "é" * CHUNK_SIZE  # 2 bytes each: the event and a character span read chunks
    data = f"data: {big}\n\ndata: end\n\n".encode()
    status, lines, _ = run(capsys, "frames", write(data))
    assert status == 0
    assert [line["data"] for line in lines] == [big, "end"]


def test_frames_sse_truncated(capsys: pytest.CaptureFixture[str], write: Any) -> None:
    status, lines, err = run(capsys, "frames", write(b"data: a\n\n: k\nevent: x\ndata: b"))
    assert status == 1
    # The frames decoded so far are printed, then the error names the byte offset.
    assert lines == [{"event": None, "data": "a", "id": None, "retry": None}, {"comment": "k"}]
    assert "byte 13" in err
    assert err.startswith("polystream: error:")


def test_frames_trailing_comment_is_printed(capsys: pytest.CaptureFixture[str], write: Any) -> None:
    assert run(capsys, "frames", write(b"data: a\n\n: tail")) == (
        0,
        [{"event": None, "data": "a", "id": None, "retry": None}, {"comment": "tail"}],
        "",
    )


@pytest.mark.parametrize("data", [b"", b"\n\n\r\n", b"\xef\xbb\xbf"])
def test_frames_blank_input(capsys: pytest.CaptureFixture[str], write: Any, data: bytes) -> None:
    assert run(capsys, "frames", write(data)) == (0, [], "")


# -- frames: JSON array -------------------------------------------------------------------------

ARRAY = b'\xef\xbb\xbf\r\n[{"a": [1, "]"]}\r\n,\r\n"s", 12, null, {"error": {"code": 429}}\r\n]\r\n'
ARRAY_LINES = [
    {"element": {"a": [1, "]"]}},
    {"element": "s"},
    {"element": 12},
    {"element": None},
    {"element": {"error": {"code": 429}}},
]


def test_frames_after_a_blank_prefix_of_several_reads(
    capsys: pytest.CaptureFixture[str], write: Any
) -> None:
    # The blank reads before the first other byte are kept, and read with it: the
    # framing is the same, and byte offsets count the blank bytes.
    blank = b"\r\n" * (CHUNK_SIZE + 7)  # three reads, the last one partly blank
    assert run(capsys, "frames", write(blank + ARRAY)) == (0, ARRAY_LINES, "")
    status, lines, err = run(capsys, "frames", write(blank + b"data: a\n\n: k\nevent: x\ndata: b"))
    assert status == 1
    assert lines == [{"event": None, "data": "a", "id": None, "retry": None}, {"comment": "k"}]
    assert f"byte {len(blank) + 13}" in err


def test_frames_json_array_detected(capsys: pytest.CaptureFixture[str], write: Any) -> None:
    assert run(capsys, "frames", write(ARRAY)) == (0, ARRAY_LINES, "")


def test_frames_json_array_explicit(capsys: pytest.CaptureFixture[str], stdin: Any) -> None:
    stdin(ARRAY)
    assert run(capsys, "frames", "--framing", "json_array", "-") == (0, ARRAY_LINES, "")


@pytest.mark.parametrize(
    ("data", "printed", "offset"),
    [
        (b'[{"a":1}, x]', [{"element": {"a": 1}}], "byte 10"),  # garbage element
        (b'[{"a":1} {"b":2}]', [{"element": {"a": 1}}], "byte 9"),  # missing comma
        (b"[1, 2,]", [{"element": 1}, {"element": 2}], "byte 6"),  # trailing comma
        (b"[1] [", [{"element": 1}], "byte 4"),  # data after ]
        (b'[{"a":1},\n{"b":', [{"element": {"a": 1}}], "byte 10"),  # cut mid-element
        (b'[{"a":1}', [{"element": {"a": 1}}], "byte 8"),  # not closed
        (b'[1, {"a" 2}]', [{"element": 1}], "byte 4"),  # element is not valid JSON
    ],
)
def test_frames_json_array_errors(
    capsys: pytest.CaptureFixture[str], write: Any, data: bytes, printed: list[Any], offset: str
) -> None:
    status, lines, err = run(capsys, "frames", write(data))
    assert status == 1
    assert lines == printed
    assert offset in err


def test_frames_json_array_empty_input(capsys: pytest.CaptureFixture[str], write: Any) -> None:
    status, lines, err = run(capsys, "frames", "--framing", "json_array", write(b""))
    assert (status, lines) == (1, [])
    assert "byte 0" in err


def test_frames_sse_framing_on_an_array(capsys: pytest.CaptureFixture[str], write: Any) -> None:
    # Forced SSE: "[1]" is one unterminated field line, so the stream is truncated.
    status, lines, err = run(capsys, "frames", "--framing", "sse", write(b"[1]"))
    assert (status, lines) == (1, [])
    assert "byte 0" in err


# -- frames: usage errors -------------------------------------------------------------------------


def test_frames_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, lines, err = run(capsys, "frames", str(tmp_path / "nope.sse"))
    assert (status, lines) == (2, [])
    assert "no such file" in err


def test_frames_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run(capsys, "frames", str(tmp_path))
    assert status == 2
    assert "cannot read" in err


def test_frames_bad_framing_choice(capsys: pytest.CaptureFixture[str], write: Any) -> None:
    status, _, err = run(capsys, "frames", "--framing", "ndjson", write(SSE))
    assert status == 2
    assert "invalid choice" in err


# -- decode ---------------------------------------------------------------------------------------

# The Anthropic Messages skeleton (docs: streaming "Basic streaming request"), "OK.".
ANTHROPIC = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
    b'"model":"claude-haiku-4-5","content":[],"stop_reason":null,"stop_sequence":null,'
    b'"usage":{"input_tokens":12,"output_tokens":1}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b"event: ping\n"
    b'data: {"type": "ping"}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"OK"}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"."}}\n\n'
    b"event: content_block_stop\n"
    b'data: {"type":"content_block_stop","index":0}\n\n'
    b"event: message_delta\n"
    b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
    b'"usage":{"output_tokens":5}}\n\n'
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n\n'
)
RESULT_KEYS = {
    "dialect",
    "id",
    "model",
    "status",
    "finish_reason",
    "text",
    "reasoning",
    "refusal",
    "tool_calls",
    "usage",
    "error",
    "blocks",
    "citations",
    "metadata",
    "warnings",
    "unknown",
}


@pytest.mark.parametrize(
    "dialect", [[], ["--dialect", "auto"], ["--dialect", "anthropic_messages"]]
)
def test_decode_events(capsys: pytest.CaptureFixture[str], write: Any, dialect: list[str]) -> None:
    status, lines, err = run(capsys, "decode", *dialect, write(ANTHROPIC))
    assert (status, err) == (0, "")
    events = [load_event(json.dumps(line)) for line in lines]
    assert isinstance(events[0], StreamStart)
    assert events[0].dialect == "anthropic_messages"
    assert isinstance(events[-1], Finish)
    assert events[-1].status == "completed"
    assert "".join(line["delta"] for line in lines if line["type"] == "text-delta") == "OK."


def test_decode_result(capsys: pytest.CaptureFixture[str], stdin: Any) -> None:
    stdin(ANTHROPIC)
    status, lines, err = run(capsys, "decode", "--result", "-")
    assert (status, err) == (0, "")
    (result,) = lines
    assert set(result) == RESULT_KEYS
    assert result["dialect"] == "anthropic_messages"
    assert (result["status"], result["text"]) == ("completed", "OK.")
    assert result["finish_reason"] == {"unified": "stop", "raw": "end_turn"}


def test_decode_result_of_a_long_gemini_array(
    capsys: pytest.CaptureFixture[str], write: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --result prints no event: the decoder coalesces them (as polystream.decode()
    # does), and the result is the one every event gives.
    from polystream import decoding
    from tests.dialects.test_gemini_generate_fast import array, last, usual

    made: list[str] = []
    original = decoding.StreamDecoder

    class Recorded(decoding.StreamDecoder):
        def __init__(self, dialect: str, **options: Any) -> None:
            made.append(options.get("coalesce", "off"))
            super().__init__(dialect, **options)

    monkeypatch.setattr(decoding, "StreamDecoder", Recorded)
    data = array([usual(f" w{i}", i) for i in range(1, 300)] + [last(300)])
    status, lines, err = run(capsys, "decode", "--result", write(data))
    assert (status, err, made) == (0, "", ["result"])
    plain = original()  # (no coalescing: every event)
    plain.feed(data)
    plain.close()
    assert lines == [json.loads(json.dumps(plain.result().to_dict()))]
    assert lines[0]["text"] == "".join(f" w{i}" for i in range(1, 300))
    status, events, _ = run(capsys, "decode", write(data))
    assert made == ["result", "off"]  # (events printed: every chunk's)
    assert sum(event["type"] == "text-delta" for event in events) == 299


def test_decode_truncated_stream_still_exits_0(
    capsys: pytest.CaptureFixture[str], write: Any
) -> None:
    cut = ANTHROPIC[: ANTHROPIC.index(b"event: message_delta")]
    status, lines, _ = run(capsys, "decode", "--result", write(cut))
    assert status == 0  # the input decoded; the stream's own status says truncated
    assert lines[0]["status"] == "truncated"
    assert lines[0]["text"] == "OK."


def test_decode_strict_malformed_payload_exits_1(
    capsys: pytest.CaptureFixture[str], write: Any
) -> None:
    bad = ANTHROPIC.replace(b'"text":"OK"}}', b'"text":"OK"}', 1)
    offset = bad.index(b"event: content_block_delta")
    status, _, err = run(
        capsys, "decode", "--strict", "--dialect", "anthropic_messages", write(bad)
    )
    assert status == 1
    assert f"byte {offset}" in err
    assert "anthropic_messages" in err


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"error": {"message": "bad key"}}', "single JSON document"),
        (b"hello\n\nworld\n\n", "could not detect"),
        (b"", "empty input"),
        (b"   \n", "empty input"),
    ],
)
def test_decode_invalid_input_exits_1(
    capsys: pytest.CaptureFixture[str], write: Any, data: bytes, message: str
) -> None:
    status, lines, err = run(capsys, "decode", write(data))
    assert (status, lines) == (1, [])
    assert err.startswith("polystream: error:")
    assert message in err


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "--dialect", "no_such_dialect", "x.sse"],
        ["decode"],
        ["decode", "--events", "--result", "x.sse"],
        ["decode", "--framing", "xml", "x.sse"],
        ["decode", "--nonsense", "x.sse"],
        ["no-such-command"],
        [],
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 2
    assert "usage:" in err or "usage:" in out


def test_decode_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run(capsys, "decode", str(tmp_path / "missing.sse"))
    assert status == 2
    assert "no such file" in err


def test_decode_framing_the_dialect_lacks_exits_2(
    capsys: pytest.CaptureFixture[str], write: Any
) -> None:
    status, lines, err = run(
        capsys,
        "decode",
        "--dialect",
        "anthropic_messages",
        "--framing",
        "json_array",
        write(ANTHROPIC),
    )
    assert (status, lines) == (2, [])
    assert "json_array" in err


# -- help -----------------------------------------------------------------------------------------


def _commands() -> list[str]:
    parser = _parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    return sorted(subparsers.choices)


def test_frames_and_decode_are_commands() -> None:
    assert {"frames", "decode"} <= set(_commands())


@pytest.mark.parametrize("argv", [["--help"], ["-h"], *[[c, "--help"] for c in _commands()]])
def test_help_exits_0(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert "usage: polystream" in out


def test_python_dash_m_polystream_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "polystream", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "usage: polystream" in done.stdout
    assert "frames" in done.stdout
    assert "decode" in done.stdout
