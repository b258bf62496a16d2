"""``polystream call``: stream a live reply from a provider to the terminal."""

from __future__ import annotations

import argparse
import base64
import binascii
import sys
import time
from pathlib import Path
from typing import Any, TextIO

__all__ = ["register"]


class _Media:
    """The audio and images of a stream, gathered from its data deltas, and written to
    ``--out`` at its end."""

    def __init__(self, out: Path | None) -> None:
        self.out = out
        self.kinds: dict[int, str] = {}  # block index -> kind
        self.data: dict[int, bytearray] = {}  # the audio and final images, by block
        self.formats: dict[int, str | None] = {}

    def start(self, index: int, kind: str, media: Any) -> None:
        self.kinds[index] = kind
        if kind in ("audio", "image"):
            self.data[index] = bytearray()
            self.formats[index] = getattr(media, "format", None)

    def delta(self, index: int, delta: str, partial: int | None, replace: bool) -> str | None:
        """Take a data delta; a line to show for a partial image."""
        buffer = self.data.get(index)
        if buffer is None:
            return None
        try:
            data = base64.b64decode(delta)
        except (binascii.Error, ValueError):
            return f"[a data delta of block {index} is not base64: skipped]"
        if partial is not None:
            return f"[partial image {partial}: {len(data)} bytes]"
        if replace:
            buffer.clear()
        buffer += data
        return None

    def write(self, err: TextIO) -> None:
        """Write the gathered media to ``--out`` (several images as ``NAME-1.EXT``...)."""
        blocks = [(i, self.kinds[i], bytes(b)) for i, b in sorted(self.data.items()) if b]
        for n, (index, kind, data) in enumerate(blocks):
            what = "audio" if kind == "audio" else "image"
            fmt = self.formats.get(index)
            detail = f" ({fmt})" if fmt else ""
            if self.out is None:
                print(f"{what}: {len(data)} bytes{detail} (not written: no --out)", file=err)
                continue
            path = self.out
            if len(blocks) > 1:
                path = path.with_name(f"{path.stem}-{n + 1}{path.suffix}")
            path.write_bytes(data)
            print(f"wrote {len(data)} bytes of {what}{detail} to {path}", file=err)


def _fields(given: list[str]) -> dict[str, Any]:
    import msgspec

    fields: dict[str, Any] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--field expects NAME=VALUE, got {item!r}")
        try:
            fields[name] = msgspec.json.decode(value)
        except msgspec.DecodeError:
            fields[name] = value
    return fields


def _options(args: argparse.Namespace, dialect: str) -> dict[str, Any]:
    """The media options of the call (``extra``, ``files``, ``session``, ``framing``)."""
    from polystream.dialects import get_dialect

    spec = get_dialect(dialect)
    extra = _fields(args.field)
    if args.voice:
        extra["voice"] = args.voice
    for field in spec.raw_options.values():  # the field that names the reply's format
        if args.response_format:
            extra[field] = args.response_format
        elif args.out is not None and args.out.suffix[1:].isalnum():
            extra.setdefault(field, args.out.suffix[1:].lower())
    options: dict[str, Any] = {}
    if extra:
        options["extra"] = extra
    if args.file is not None:
        upload = next((r.form_file for r in spec.routes if r.form_file), None)
        if upload is None:
            raise ValueError(f"{dialect} takes no file (--file)")
        options["files"] = {upload: args.file}
    if args.session:
        options["session"] = args.session
    if args.raw:
        if "raw" not in spec.framings:
            raise ValueError(f"{dialect} has no raw framing (--raw)")
        options["framing"] = "raw"
    return options


def _run(args: argparse.Namespace) -> int:
    from polystream.client import Client
    from polystream.dialects import DIALECTS
    from polystream.errors import PolystreamError
    from polystream.events import (
        BlockStart,
        DataDelta,
        ErrorEvent,
        Finish,
        ReasoningDelta,
        TextDelta,
        ToolInputDelta,
        Warning,
        dump_event,
    )
    from polystream.gateway_core import DEFAULT_DIALECT
    from polystream.request import ReasoningConfig

    dialect = args.dialect or (
        args.target if args.target in DIALECTS else DEFAULT_DIALECT[args.target]
    )
    prompt = args.prompt if args.prompt is not None else args.input
    try:
        options = _options(args, dialect)
        if prompt is not None:  # (none: a transcription's file, or a session's stream)
            options["prompt"] = prompt
    except ValueError as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 2
    reasoning = ReasoningConfig(effort=args.reasoning, summary=True) if args.reasoning else None
    client = Client(base_url=args.base_url, api_key=args.api_key, idle_timeout=args.idle_timeout)
    started = time.perf_counter()
    first: float | None = None
    out = sys.stdout
    media = _Media(args.out)
    try:
        stream = client.stream(
            dialect,
            model=args.model,
            system=args.system,
            max_tokens=args.max_tokens,
            reasoning=reasoning,
            **options,
        )
        with stream:
            for event in stream:
                if first is None:
                    first = time.perf_counter() - started
                if isinstance(event, BlockStart):
                    media.start(event.index, event.kind, event.media)
                elif isinstance(event, DataDelta):
                    shown = media.delta(event.index, event.delta, event.partial, event.replace)
                    if shown is not None and not args.json:
                        print(shown, file=sys.stderr)
                if args.json:
                    out.write(dump_event(event).decode() + "\n")
                    continue
                if isinstance(event, TextDelta):
                    out.write(event.delta)
                elif isinstance(event, ReasoningDelta):
                    out.write(f"\x1b[2m{event.delta}\x1b[0m" if out.isatty() else event.delta)
                elif isinstance(event, BlockStart) and event.kind == "tool_call":
                    out.write(f"\n[tool call {event.name} {event.call_id or event.id or ''}] ")
                elif isinstance(event, ToolInputDelta):
                    out.write(event.delta)
                elif isinstance(event, Warning):
                    print(f"\n[{event.code}] {event.message}", file=sys.stderr)
                elif isinstance(event, ErrorEvent):
                    print(f"\n[error {event.error.kind}] {event.error.message}", file=sys.stderr)
                elif isinstance(event, Finish):
                    out.write("\n")
                out.flush()
        result = stream.result()
        media.write(sys.stderr)
    except (PolystreamError, OSError) as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    total = time.perf_counter() - started
    usage = result.usage
    reason = result.finish_reason.raw if result.finish_reason else None
    print(
        f"-- {result.status} ({reason}); tokens in {usage.input_tokens} out {usage.output_tokens}"
        f" reasoning {usage.reasoning_tokens}; first event {1000 * (first or 0):.0f} ms,"
        f" total {1000 * total:.0f} ms",
        file=sys.stderr,
    )
    return 0 if result.status in ("completed", "incomplete") else 1


def _intermixed(parser: argparse.ArgumentParser) -> None:
    """Let ``parser`` take its optional positional (the prompt) after the options, as in
    ``call anthropic --model M "say hi"`` (argparse otherwise gives the optional
    positional nothing at the first positional, and refuses the prompt later)."""

    def parse_known_args(args: Any = None, namespace: Any = None) -> Any:
        # (The intermixed parse runs the class's own parse twice: this is set aside.)
        del parser.parse_known_args
        try:
            return parser.parse_known_intermixed_args(args, namespace)
        finally:
            parser.parse_known_args = parse_known_args  # type: ignore[method-assign]

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def register(sub: Any) -> None:
    """Add the ``call`` subcommand."""
    from polystream.dialects import DIALECTS, PROVIDERS

    parser = sub.add_parser(
        "call",
        help="stream a live reply from a provider",
        description="Stream a reply: text (or a transcript) as it arrives, reasoning dimmed, "
        "tool calls shown, audio and images written to --out, then a line with usage and "
        "timings. TARGET is a provider (its default dialect) or a dialect. Keys from "
        "OPENAI_API_KEY, ANTHROPIC_API_KEY, XAI_API_KEY, GEMINI_API_KEY or --api-key.",
    )
    parser.add_argument(
        "target",
        choices=[*PROVIDERS, *DIALECTS],
        metavar="TARGET",
        help=f"a provider ({', '.join(PROVIDERS)}) or a dialect ({', '.join(DIALECTS)})",
    )
    parser.add_argument("prompt", nargs="?", help="the message (a speech's input text)")
    parser.add_argument("--input", help="the text to speak (the same as PROMPT)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--dialect", help="override the provider's default dialect")
    parser.add_argument("--base-url", help="e.g. the emulator: http://127.0.0.1:8000/openai/v1")
    parser.add_argument("--api-key")
    parser.add_argument("--system")
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--reasoning", metavar="EFFORT", help="minimal, low, medium, high")
    parser.add_argument(
        "--file", type=Path, help="a file to upload (a transcription's audio, an image to edit)"
    )
    parser.add_argument(
        "--out", type=Path, help="where to write the audio or the image (several: NAME-N.EXT)"
    )
    parser.add_argument("--voice", help="the speech's voice (alloy, ash, ...)")
    parser.add_argument(
        "--response-format",
        help="the speech's audio format (mp3, wav, pcm, ...; default: --out's extension)",
    )
    parser.add_argument(
        "--raw", action="store_true", help="ask for the audio itself, not an event stream"
    )
    parser.add_argument("--session", help="an existing agent session to stream (its id)")
    parser.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another body field (VALUE as JSON, else as text); repeatable",
    )
    parser.add_argument("--idle-timeout", type=float, default=120.0)
    parser.add_argument("--json", action="store_true", help="unified events as JSON lines")
    parser.set_defaults(run=_run)
    _intermixed(parser)
