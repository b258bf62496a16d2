"""Argument parsing and the subcommands. Each subcommand moves bytes between files and
the sans-I/O core; none holds protocol logic."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import msgspec

from polystream.cli._io import (
    CHUNK_SIZE,
    EXIT_OK,
    EXIT_USAGE,
    fail,
    read_chunks,
    write_json_line,
)
from polystream.errors import ProtocolError, RemoteProtocolError

__all__ = ["CHUNK_SIZE", "HelpFormatter", "Parser", "main", "version"]


def version() -> str:
    """The installed package's version (its metadata), else ``polystream.__version__``
    (a source tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("polystream")
    except PackageNotFoundError:
        import polystream

        return str(getattr(polystream, "__version__", "unknown"))


class HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, ``(default: X)``, unless its text already
    names it or there is none to show (None, False, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
            or not (action.option_strings or action.nargs in ("?", "*"))
        ):
            return text
        return text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose help shows the defaults
    (:class:`HelpFormatter`); its subcommands' parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


# -- frames -----------------------------------------------------------------------------


def detect_framing(chunk: bytes) -> str | None:
    """The framing of a stream whose first bytes (after blank ones) are in ``chunk``:
    ``json_array`` when its first non-blank byte is ``[``, else ``sse``; None when
    ``chunk`` is blank (the next chunk decides)."""
    from polystream.wire.framing import sniff_framing

    return sniff_framing(chunk)


def _cmd_frames(args: argparse.Namespace) -> int:
    from polystream.wire.jsonarray import JSONArrayDecoder, JSONElement
    from polystream.wire.sse import SSEComment, SSEDecoder

    out = sys.stdout.buffer
    decoder: SSEDecoder | JSONArrayDecoder | None = None
    pending: list[bytes] = []  # the blank chunks before the framing is known

    def start(framing: str) -> SSEDecoder | JSONArrayDecoder:
        return JSONArrayDecoder() if framing == "json_array" else SSEDecoder()

    def emit(frames: list[Any]) -> None:
        # One line per frame as soon as it is decoded, so that the frames before an
        # error are printed before the error message.
        for frame in frames:
            if isinstance(frame, SSEComment):
                write_json_line(out, {"comment": frame.text})
            elif isinstance(frame, JSONElement):
                try:
                    value = msgspec.json.decode(frame.data)
                except msgspec.DecodeError as exc:
                    raise RemoteProtocolError(
                        f"array element is not valid JSON: {exc}",
                        dialect="json_array",
                        event_index=frame.index,
                        byte_offset=frame.offset,
                    ) from None
                write_json_line(out, {"element": value})
            else:
                write_json_line(
                    out,
                    {
                        "event": frame.event,
                        "data": frame.data,
                        "id": frame.id,
                        "retry": frame.retry,
                    },
                )

    if args.framing != "auto":
        decoder = start(args.framing)
    try:
        for chunk in read_chunks(args.file):
            if decoder is None:
                # auto: the blank chunks before the framing is known are joined once,
                # with the chunk that decides it.
                pending.append(chunk)
                framing = detect_framing(chunk)
                if framing is None:
                    continue
                decoder = start(framing)
                chunk = b"".join(pending)
                pending = []
            emit(decoder.feed(chunk))
        if decoder is None:
            # Blank (or empty) input: read as SSE, where blank lines are valid.
            decoder = SSEDecoder()
            emit(decoder.feed(b"".join(pending)))
        emit(decoder.close())
    except ProtocolError as exc:
        return fail(str(exc))
    return EXIT_OK


# -- parser -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    from polystream.cli import _decode

    parser = Parser(
        prog="polystream",
        description="Decode, rebuild, convert and serve the streaming dialects of the "
        "OpenAI, Anthropic, xAI and Gemini APIs.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"polystream {version()}",
        help="print the version and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    frames = sub.add_parser(
        "frames",
        help="print the framing events (SSE or JSON-array elements) as JSON lines",
        description="Print one JSON line per framing event: SSE {event, data, id, retry} "
        "or {comment}, JSON array {element}. Exits 1 on truncation or a framing error, "
        "after printing the frames decoded so far.",
    )
    frames.add_argument(
        "--framing",
        choices=["auto", "sse", "json_array"],
        default="auto",
        help="sse (Server-Sent Events) or json_array (Gemini's default framing); auto: "
        "json_array when the first non-blank byte is [, else sse",
    )
    frames.add_argument("file", metavar="FILE|-", help="input file, or - for stdin")
    frames.set_defaults(run=_cmd_frames)
    _decode.register(sub)

    for register in _EXTRA_COMMANDS:
        register(sub)
    return parser


def _register_convert(sub: Any) -> None:
    from polystream.cli._convert import register

    register(sub)


def _register_call(sub: Any) -> None:
    from polystream.cli._call import register

    register(sub)


def _register_gateway(sub: Any) -> None:
    from polystream.cli._gateway import register

    register(sub)


_EXTRA_COMMANDS: list[Callable[[Any], None]] = [_register_convert]


def _register_emulator(sub: Any) -> None:
    from polystream.cli import _demo, _serve

    _serve.register(sub)
    _demo.register(sub)


_EXTRA_COMMANDS.append(_register_emulator)
_EXTRA_COMMANDS.extend([_register_call, _register_gateway])


def _register_inspect(sub: Any) -> None:
    from polystream.cli._inspect import register

    register(sub)


_EXTRA_COMMANDS.append(_register_inspect)


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
    except BrokenPipeError:
        return EXIT_OK
    except FileNotFoundError as exc:
        print(f"polystream: error: no such file: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        # A directory, no permission...: the command line named something unreadable.
        print(f"polystream: error: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    return status
