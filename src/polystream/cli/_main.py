"""Argument parsing and the subcommands. Each subcommand moves bytes between files and
the sans-I/O core; none holds protocol logic."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from polystream.cli._io import (
    CHUNK_SIZE,
    EXIT_OK,
    EXIT_USAGE,
    fail,
    read_chunks,
    write_json_line,
)
from polystream.errors import (
    LocalProtocolError,
    PolystreamError,
    ProtocolError,
    RemoteProtocolError,
)

if TYPE_CHECKING:
    from polystream.media import Audio

__all__ = ["CHUNK_SIZE", "main"]


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


# -- decode -----------------------------------------------------------------------------


def _cmd_decode(args: argparse.Namespace) -> int:
    from polystream.decoding import StreamDecoder
    from polystream.events import dump_event

    out = sys.stdout.buffer
    options: dict[str, Any] = {"strict": args.strict, "keep_raw": args.raw}
    if args.framing != "auto":
        options["framing"] = args.framing
    if args.content_type:
        options["content_type"] = args.content_type
    # With --result no event is printed: the decoder may coalesce them, as
    # polystream.decode() does.
    if args.result:
        options["coalesce"] = "result"
    try:
        decoder = StreamDecoder(args.dialect, **options)
    except LocalProtocolError as exc:
        # A dialect not available in this build, or a framing it does not have.
        print(f"polystream: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    show_events = not args.result
    try:
        for chunk in read_chunks(args.file):
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
            write_json_line(out, result.to_dict())
    except PolystreamError as exc:
        return fail(str(exc))
    if decoder.looks_like is not None:
        sys.stdout.flush()
        print(
            f"polystream: warning: nothing in the input was recognised as {decoder.dialect}: "
            f"it looks like {decoder.looks_like} (try --dialect {decoder.looks_like} or auto)",
            file=sys.stderr,
        )
    if args.audio_out is not None:
        return _write_audio(args.audio_out, decoder.result().audio)
    return EXIT_OK


def _write_audio(path: str, audio: Audio | None) -> int:
    """``decode --audio-out``: the joined audio, as WAV when it is PCM of a known rate."""
    if audio is None:
        return fail(f"the stream has no audio: nothing written to {path}")
    if audio.format == "pcm" and audio.sample_rate:
        data = audio.wav()
    else:
        data = audio.data
        if audio.format == "pcm":
            sys.stdout.flush()
            print(
                "polystream: warning: the PCM audio's sample rate is not stated: "
                f"raw samples written to {path}, without a WAV header",
                file=sys.stderr,
            )
    with open(path, "wb") as handle:
        handle.write(data)
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
        choices=["auto", "sse", "json_array", "raw"],
        default="auto",
        help="framing: sse or json_array for gemini_generate, sse or raw (the audio file "
        "itself) for openai_speech (default: detect)",
    )
    decode.add_argument(
        "--content-type",
        metavar="TYPE",
        help="the response's Content-Type: an audio type (audio/mpeg, audio/pcm, ...) is "
        "a raw audio body (openai_speech, raw framing, in that format)",
    )
    decode.add_argument(
        "--audio-out",
        metavar="FILE",
        help="also write the stream's audio, joined, to FILE: a WAV file when it is PCM "
        "of a known sample rate, else the audio bytes as they are (mp3, opus, ...)",
    )
    decode.add_argument("file", metavar="FILE|-", help="input file, or - for stdin")
    decode.set_defaults(run=_cmd_decode)

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
