"""``polystream decode``: a stream of any dialect as unified events or its result."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import msgspec

from polystream.cli._io import EXIT_OK, EXIT_USAGE, fail, write_json_line
from polystream.cli._progress import progress_chunks
from polystream.errors import LocalProtocolError, PolystreamError

if TYPE_CHECKING:
    from polystream.events import Event, Usage
    from polystream.media import Audio

__all__ = ["EventView", "register"]


def _counts(usage: Usage) -> tuple[int | None, ...]:
    """The counts of ``usage`` (its ``raw`` left out)."""
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.tool_prompt_tokens,
        usage.audio_input_tokens,
        usage.audio_output_tokens,
        usage.total_tokens,
    )


class EventView:
    """The events ``decode --events`` prints: each event's ``extra`` without the keys
    its decoder keeps for the encoder (:attr:`DialectDecoder.private_extra
    <polystream.dialects.DialectDecoder.private_extra>`, and any key starting with
    ``_``), and no :class:`~polystream.events.UsageUpdate` that brings nothing new: no
    count that changes the usage so far, and the same ``extra`` as the usage update
    before it (Gemini's chunks each end with one).

    Args:
        private: The decoder's private ``extra`` keys.
    """

    def __init__(self, private: frozenset[str]) -> None:
        self.private = private
        self._usage: Usage | None = None  # the usage so far
        self._usage_extra: dict[str, Any] | None = None  # the last update's, as shown

    def show(self, event: Event) -> Event | None:
        """``event`` as printed, or None when it is not printed."""
        from polystream.events import UsageUpdate

        extra = event.extra
        if extra:
            private = self.private
            kept = {k: v for k, v in extra.items() if k not in private and k[:1] != "_"}
            if len(kept) != len(extra):
                extra = kept or None
                event = msgspec.structs.replace(event, extra=extra)
        if type(event) is UsageUpdate:
            before = self._usage
            after = event.usage if before is None else before.merged(event.usage)
            self._usage = after
            news = (
                not event.usage.is_empty() if before is None else _counts(after) != _counts(before)
            )
            same_extra = extra == self._usage_extra
            self._usage_extra = extra
            if not news and same_extra:
                return None
        return event


def _run(args: argparse.Namespace) -> int:
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
    if args.pretty and not args.result:
        print("polystream: error: --pretty goes with --result", file=sys.stderr)
        return EXIT_USAGE
    try:
        decoder = StreamDecoder(args.dialect, **options)
    except LocalProtocolError as exc:
        # A dialect not available in this build, or a framing it does not have.
        print(f"polystream: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    show_events = not args.result
    view: EventView | None = None

    def write(events: list[Event]) -> None:
        nonlocal view
        if args.raw:
            for event in events:
                out.write(dump_event(event) + b"\n")
            return
        if view is None:
            if not events:
                return
            own = decoder.dialect_decoder
            view = EventView(own.private_extra if own is not None else frozenset())
        for event in events:
            shown = view.show(event)
            if shown is not None:
                out.write(dump_event(shown) + b"\n")

    try:
        for chunk in progress_chunks(args.file, "decode", stdout_busy=show_events):
            events = decoder.feed(chunk)
            if show_events:
                write(events)
        events = decoder.close()
        if show_events:
            write(events)
        if args.result:
            result = decoder.result().to_dict()
            if args.pretty:
                encoded = msgspec.json.format(msgspec.json.encode(result), indent=2)
                out.write(encoded + b"\n")
            else:
                write_json_line(out, result)
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


def register(sub: Any) -> None:
    """Add the ``decode`` subcommand to the parser."""
    from polystream.dialects import DIALECTS

    decode = sub.add_parser(
        "decode",
        help="decode a stream into unified events or its final result",
        description="Decode a stream of any dialect. Default: unified events as JSON "
        "lines. --result: one JSON object (the stable contract documented in "
        "docs/cli.md). Exit 0 when the input decoded (whatever the stream's own status), "
        "1 when it is not a valid stream, 2 for usage errors.",
    )
    decode.add_argument(
        "--dialect",
        choices=["auto", *DIALECTS],
        default="auto",
        metavar="NAME|auto",
        help=f"the stream's dialect, one of: {', '.join(DIALECTS)}; auto: detect it",
    )
    mode = decode.add_mutually_exclusive_group()
    mode.add_argument(
        "--events",
        action="store_true",
        help="unified events as JSON lines (the default), without the decoder's private "
        "extra entries and the usage updates that bring nothing new (see --raw)",
    )
    mode.add_argument("--result", action="store_true", help="the final result as JSON")
    decode.add_argument(
        "--pretty", action="store_true", help="with --result: indented JSON (2 spaces)"
    )
    decode.add_argument(
        "--strict",
        action="store_true",
        help="protocol anomalies (unknown events, malformed data) are errors (exit 1)",
    )
    decode.add_argument(
        "--raw",
        action="store_true",
        help="include the native events (raw events), and print every event whole",
    )
    decode.add_argument(
        "--framing",
        choices=["auto", "sse", "json_array", "raw"],
        default="auto",
        help="framing: sse or json_array for gemini_generate, sse or raw (the audio file "
        "itself) for openai_speech; auto: detect it",
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
    decode.set_defaults(run=_run)
