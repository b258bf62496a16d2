"""Argument parsing and the subcommands. Each subcommand moves bytes between files and
the sans-I/O core; none holds protocol logic."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

import msgspec

from polystream.errors import PolystreamError, ProtocolError

__all__ = ["main"]

CHUNK_SIZE = 64 * 1024
EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2

_json = msgspec.json.Encoder()


def _read_chunks(path: str) -> Iterator[bytes]:
    """Yield the input in chunks, so that huge inputs fail fast and stay bounded."""
    if path == "-":
        stream: IO[bytes] = sys.stdin.buffer
        while (
            chunk := stream.read1(CHUNK_SIZE)
            if hasattr(stream, "read1")
            else stream.read(CHUNK_SIZE)
        ):
            yield chunk
        return
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            yield chunk


def _write(out: IO[bytes], value: Any) -> None:
    out.write(_json.encode(value) + b"\n")


def _fail(message: str) -> int:
    sys.stdout.flush()
    print(f"polystream: error: {message}", file=sys.stderr)
    return EXIT_INVALID


# -- frames -----------------------------------------------------------------------------


def _cmd_frames(args: argparse.Namespace) -> int:
    from polystream.wire.jsonarray import JSONArrayDecoder
    from polystream.wire.sse import SSEComment, SSEDecoder

    out = sys.stdout.buffer
    framing: str | None = None if args.framing == "auto" else args.framing
    sse: SSEDecoder | None = None
    array: JSONArrayDecoder | None = None
    pending = b""

    def emit(frames: list[Any]) -> None:
        for frame in frames:
            if isinstance(frame, SSEComment):
                _write(out, {"comment": frame.text})
            elif array is not None:
                _write(out, {"element": msgspec.json.decode(frame.data)})
            else:
                _write(
                    out,
                    {
                        "event": frame.event,
                        "data": frame.data,
                        "id": frame.id,
                        "retry": frame.retry,
                    },
                )

    try:
        for chunk in _read_chunks(args.file):
            if framing is None:
                pending += chunk
                stripped = pending.lstrip(b" \t\r\n\xef\xbb\xbf")
                if not stripped:
                    continue
                framing = "json_array" if stripped[:1] == b"[" else "sse"
                chunk, pending = pending, b""
            if sse is None and array is None:
                if framing == "sse":
                    sse = SSEDecoder()
                else:
                    array = JSONArrayDecoder()
            emit(sse.feed(chunk) if sse is not None else array.feed(chunk))  # type: ignore[union-attr]
        if sse is not None:
            emit(sse.close())
        elif array is not None:
            array.close()
        elif framing == "json_array" or pending.strip():
            return _fail("input ended before any frame")
    except ProtocolError as exc:
        return _fail(str(exc))
    except msgspec.DecodeError as exc:
        return _fail(f"array element is not valid JSON: {exc}")
    return EXIT_OK


# -- decode -----------------------------------------------------------------------------


def _cmd_decode(args: argparse.Namespace) -> int:
    from polystream.api import StreamDecoder
    from polystream.events import dump_event

    out = sys.stdout.buffer
    options: dict[str, Any] = {"strict": args.strict, "keep_raw": args.raw}
    if args.framing != "auto":
        options["framing"] = args.framing
    decoder = StreamDecoder(args.dialect, **options)
    show_events = not args.result
    try:
        for chunk in _read_chunks(args.file):
            events = decoder.feed(chunk)
            if show_events:
                for event in events:
                    out.write(dump_event(event) + b"\n")
        events = decoder.close()
        if show_events:
            for event in events:
                out.write(dump_event(event) + b"\n")
        if args.result:
            result = decoder.result()
            out.write(_json.encode(result.to_dict()) + b"\n")
    except PolystreamError as exc:
        return _fail(str(exc))
    return EXIT_OK


# -- parser -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    from polystream.dialects import DIALECTS

    parser = argparse.ArgumentParser(
        prog="polystream",
        description="Decode, rebuild, convert and serve the streaming dialects of the "
        "OpenAI, Anthropic, xAI and Gemini APIs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    frames = sub.add_parser(
        "frames",
        help="print the framing events (SSE or JSON-array elements) as JSON lines",
        description="Print one JSON line per framing event: SSE {event, data, id, retry} "
        "or {comment}, JSON array {element}. Exits 1 on truncation or a framing error, "
        "after printing the frames decoded so far.",
    )
    frames.add_argument("--framing", choices=["auto", "sse", "json_array"], default="auto")
    frames.add_argument("file", metavar="FILE|-", help="input file, or - for stdin")
    frames.set_defaults(run=_cmd_frames)

    dialects = ["auto", *DIALECTS]
    decode = sub.add_parser(
        "decode",
        help="decode a stream into unified events or its final result",
        description="Decode a stream of any dialect. Default: unified events as JSON "
        "lines. --result: one JSON object (the stable contract documented in the "
        "README). Exit 0 when the input decoded (whatever the stream's own status), "
        "1 when it is not a valid stream, 2 for usage errors.",
    )
    decode.add_argument("--dialect", choices=dialects, default="auto", metavar="NAME|auto")
    mode = decode.add_mutually_exclusive_group()
    mode.add_argument("--events", action="store_true", help="unified events (default)")
    mode.add_argument("--result", action="store_true", help="the final result as JSON")
    decode.add_argument("--strict", action="store_true", help="protocol anomalies are errors")
    decode.add_argument("--raw", action="store_true", help="include raw native events")
    decode.add_argument(
        "--framing",
        choices=["auto", "sse", "json_array"],
        default="auto",
        help="framing for gemini_generate (default: detect)",
    )
    decode.add_argument("file", metavar="FILE|-", help="input file, or - for stdin")
    decode.set_defaults(run=_cmd_decode)

    for register in _EXTRA_COMMANDS:
        register(sub)
    return parser


def _register_convert(sub: Any) -> None:
    from polystream.cli._convert import register

    register(sub)


_EXTRA_COMMANDS: list[Callable[[Any], None]] = [_register_convert]


def main(argv: list[str] | None = None) -> int:
    """Run the command line. Returns the exit status (0 ok, 1 invalid input, 2 usage)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        status: int = args.run(args)
    except FileNotFoundError as exc:
        print(f"polystream: error: no such file: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    return status
