"""``polystream call``: stream a live reply from a provider to the terminal."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from polystream.cli._call_realtime import family_of
from polystream.cli._call_realtime import run as run_realtime
from polystream.cli._call_show import Media, Printer, api_key, summary
from polystream.cli._serve import DEFAULT_PORT

__all__ = ["register"]


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
    from polystream.dialects import DIALECTS, provider_of
    from polystream.errors import PolystreamError
    from polystream.gateway_core import DEFAULT_DIALECT
    from polystream.request import ReasoningConfig

    prompt = args.prompt if args.prompt is not None else args.input
    try:
        family = family_of(args)
    except ValueError as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 2
    if family is not None:
        return run_realtime(args, family, prompt)
    if args.seconds is not None:
        print("polystream: error: --seconds is for a realtime turn", file=sys.stderr)
        return 2
    dialect = args.dialect or (
        args.target if args.target in DIALECTS else DEFAULT_DIALECT[args.target]
    )
    try:
        options = _options(args, dialect)
        if prompt is not None:  # (none: a transcription's file, or a session's stream)
            options["prompt"] = prompt
        key = api_key(args.api_key, args.base_url, provider_of(dialect))
    except ValueError as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 2
    reasoning = ReasoningConfig(effort=args.reasoning, summary=True) if args.reasoning else None
    client = Client(base_url=args.base_url, api_key=key, idle_timeout=args.idle_timeout)
    started = time.perf_counter()
    first: float | None = None
    printer = Printer(sys.stdout, sys.stderr, Media(args.out), as_json=args.json)
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
                printer.show(event)
        result = stream.result()
        printer.media.write(sys.stderr)
    except (PolystreamError, OSError) as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    print(summary(result, first, time.perf_counter() - started), file=sys.stderr)
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
    from polystream.realtime import SOCKETS

    parser = sub.add_parser(
        "call",
        help="stream a live reply from a provider",
        description="Stream a reply: text (or a transcript) as it arrives on stdout, each "
        "reasoning block on stderr after [reasoning] (dimmed on a terminal; NO_COLOR: "
        "plain), tool calls shown, audio and images written to --out, then a line with usage and "
        "timings. TARGET is a provider (its default dialect) or a dialect; with --realtime, "
        "or a WebSocket family as TARGET, one text turn over a WebSocket. Keys from "
        f"{', '.join(p.env_key for p in PROVIDERS.values())} or --api-key (none needed for "
        "a --base-url on this machine).",
    )
    parser.add_argument(
        "target",
        choices=[*PROVIDERS, *DIALECTS, *SOCKETS],
        metavar="TARGET",
        help=f"a provider ({', '.join(PROVIDERS)}), a dialect ({', '.join(DIALECTS)}) or a "
        f"WebSocket family ({', '.join(SOCKETS)})",
    )
    parser.add_argument("prompt", nargs="?", help="the message (a speech's input text)")
    parser.add_argument("--input", help="the text to speak (the same as PROMPT)")
    parser.add_argument("--model", required=True, help="the model to call (its provider's name)")
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="one text turn over the provider's realtime WebSocket ("
        + ", ".join(f"{p.name}: {p.default_socket}" for p in PROVIDERS.values() if p.default_socket)
        + ")",
    )
    parser.add_argument(
        "--dialect", help="override the provider's default dialect (or WebSocket family)"
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="the provider's API root (default: the provider's own), e.g. the emulator's: "
        f"http://127.0.0.1:{DEFAULT_PORT}/openai/v1; on this machine, no key is needed",
    )
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help="the provider's API key (default: its variable, "
        + ", ".join(f"${p.env_key}" for p in PROVIDERS.values())
        + ")",
    )
    parser.add_argument("--system", "--instructions", help="the system instructions")
    parser.add_argument(
        "--max-tokens", type=int, metavar="N", help="the most tokens the reply may have"
    )
    parser.add_argument(
        "--reasoning", metavar="EFFORT", help="the reasoning effort: minimal, low, medium, high"
    )
    parser.add_argument(
        "--file", type=Path, help="a file to upload (a transcription's audio, an image to edit)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="where to write the audio or the image (several: NAME-N.EXT)",
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
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="seconds without a byte (a WebSocket message) before giving up",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        metavar="N",
        help="a realtime turn whose audio has no end (music): stop after N seconds of it",
    )
    parser.add_argument("--json", action="store_true", help="unified events as JSON lines")
    parser.set_defaults(run=_run)
    _intermixed(parser)
