"""What ``polystream call`` shares between its HTTP and its realtime turns: the key, how
a reply's events are shown, its media gathered for ``--out``, and the final line."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO, cast
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from polystream.accumulate import Result
    from polystream.dialects import ProviderSpec
    from polystream.events import Event

__all__ = ["LOCAL_KEY", "TRUNCATED", "Media", "Printer", "api_key", "colour", "summary"]

LOCAL_KEY: Final = "polystream-local"
"""The key sent to a ``--base-url`` on this machine when none is given (the emulator
takes any key)."""


def _local(base_url: str) -> bool:
    """Whether ``base_url`` names this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    host = urlsplit(base_url).hostname
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_key(given: str | None, base_url: str | None, provider: ProviderSpec) -> str:
    """The key to call ``provider`` with: ``--api-key``, else its variable
    (``OPENAI_API_KEY``), else, for a ``--base-url`` on this machine, a placeholder.

    Raises:
        ValueError: No key (the message names ``--api-key`` and the variable).
    """
    key = given or os.environ.get(provider.env_key)
    if key:
        return key
    if base_url is not None and _local(base_url):
        return LOCAL_KEY
    raise ValueError(f"no API key for {provider.name}: pass --api-key or set {provider.env_key}")


class Media:
    """The audio and images of a stream, gathered from its data deltas, and written to
    ``--out`` at its end (raw PCM of a stated sample rate, to a ``.wav`` path, as a WAV
    file)."""

    def __init__(self, out: Path | None) -> None:
        self.out = out
        self.kinds: dict[int, str] = {}  # block index -> kind
        self.data: dict[int, bytearray] = {}  # the audio and final images, by block
        self.formats: dict[int, str | None] = {}
        self.pcm: dict[int, tuple[int, int]] = {}  # a PCM block -> (sample rate, channels)

    def start(self, index: int, kind: str, media: Any) -> None:
        self.kinds[index] = kind
        if kind in ("audio", "image"):
            self.data[index] = bytearray()
            self.formats[index] = getattr(media, "format", None)
            rate = getattr(media, "sample_rate", None)
            if self.formats[index] == "pcm" and rate:
                self.pcm[index] = (rate, getattr(media, "channels", None) or 1)

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
            pcm = self.pcm.get(index)
            if pcm is not None and path.suffix.lower() == ".wav":
                from polystream.audio.media_types import pcm_to_wav

                data = pcm_to_wav(data, sample_rate=pcm[0], channels=pcm[1])
                detail = f" (pcm, {pcm[0]} Hz, {pcm[1]} channel(s), as WAV)"
            path.write_bytes(data)
            print(f"wrote {len(data)} bytes of {what}{detail} to {path}", file=err)


def colour(stream: TextIO) -> bool:
    """Whether to colour what goes to ``stream``: a terminal, and ``NO_COLOR`` unset
    or empty (https://no-color.org)."""
    return not os.environ.get("NO_COLOR") and stream.isatty()


class Printer:
    """Shows a reply's unified events as they arrive: text (and tool calls) on ``out``;
    reasoning on ``err``, each reasoning block a section of its own that starts with
    ``[reasoning]`` (dimmed on a terminal, unless ``NO_COLOR`` is set), so that ``out``
    holds the answer alone; warnings and errors on ``err`` (the error that ended the
    reply once, even when no error event came before its end). With ``as_json``, one
    JSON line per event instead. Media go to :class:`Media` either way."""

    def __init__(self, out: TextIO, err: TextIO, media: Media, *, as_json: bool) -> None:
        self.out = out
        self.err = err
        self.media = media
        self.as_json = as_json
        self._shown_errors: list[tuple[str, str]] = []
        self._reasoning: int | None = None  # the reasoning block being shown
        self._dim = ("\x1b[2m", "\x1b[0m") if colour(err) else ("", "")
        self._line_open = False  # the answer's last line has no newline yet
        self._line_ended = False  # a reasoning section ended the answer's line

    def _reason(self, index: int, delta: str) -> None:
        """Show a reasoning delta on ``err``, in the section of its block."""
        on, off = self._dim
        if self._reasoning != index:
            self._end_reasoning()
            if self._line_open:
                self.out.write("\n")
                self._line_open = False
                self._line_ended = True
            self.out.flush()
            self.err.write(f"{on}[reasoning] {off}")
            self._reasoning = index
        self.err.write(f"{on}{delta}{off}")
        self.err.flush()

    def _end_reasoning(self) -> None:
        if self._reasoning is not None:
            self.err.write("\n")
            self.err.flush()
            self._reasoning = None

    def _answer(self, text: str) -> None:
        """Write answer text on ``out`` (after the reasoning section, if one is open)."""
        self._end_reasoning()
        if text:
            self.out.write(text)
            self._line_open = not text.endswith("\n")
            self._line_ended = False

    def show(self, event: object, line: str | None = None) -> None:
        """Show ``event``, a unified event or a realtime session's (``line``: its JSON
        line, when not the event's own)."""
        from polystream.events import (
            BlockEnd,
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

        out = self.out
        if isinstance(event, BlockStart):
            self.media.start(event.index, event.kind, event.media)
        elif isinstance(event, DataDelta):
            shown = self.media.delta(event.index, event.delta, event.partial, event.replace)
            if shown is not None and not self.as_json:
                print(shown, file=self.err)
        if self.as_json:
            if line is None:
                line = dump_event(cast("Event", event)).decode()
            out.write(line + "\n")
            out.flush()
            return
        if isinstance(event, TextDelta):
            self._answer(event.delta)
        elif isinstance(event, ReasoningDelta):
            self._reason(event.index, event.delta)
        elif isinstance(event, BlockStart) and event.kind == "tool_call":
            self._answer(f"\n[tool call {event.name} {event.call_id or event.id or ''}] ")
        elif isinstance(event, ToolInputDelta):
            self._answer(event.delta)
        elif isinstance(event, BlockEnd) and event.index == self._reasoning:
            self._end_reasoning()
        elif isinstance(event, Warning):
            self._end_reasoning()
            print(f"\n[{event.code}] {event.message}", file=self.err)
        elif isinstance(event, ErrorEvent):
            self.error(event.error.kind, event.error.message)
        elif isinstance(event, Finish):
            self._end_reasoning()
            if not self._line_ended:
                out.write("\n")
            self._line_open = False
            if event.error is not None:
                self.error(event.error.kind, event.error.message)
        out.flush()

    def error(self, kind: str, message: str) -> None:
        """Show an error, unless the same one was shown already."""
        if (kind, message) in self._shown_errors:
            return
        self._end_reasoning()
        self.out.flush()
        self._shown_errors.append((kind, message))
        print(f"\n[error {kind}] {message}", file=self.err)


TRUNCATED: Final = "the connection closed before the end"
"""The final line's reason for a reply cut short without an error that says why."""


def summary(result: Result, first: float | None, total: float) -> str:
    """The final line: status and why (the finish reason, or the error that ended the
    reply), the token counts the reply reported (those it did not are left out), the
    time to the first event and in all."""
    reason: str | None = None
    if result.status in ("failed", "truncated") and result.error is not None:
        reason = result.error.message or None
    if reason is None and result.finish_reason is not None:
        raw, unified = result.finish_reason.raw, result.finish_reason.unified
        reason = raw or (None if result.status == "truncated" else unified)
    if reason is None and result.status == "truncated":
        reason = TRUNCATED
    line = f"-- {result.status}" + (f" ({reason})" if reason else "")
    usage = result.usage
    counts = [
        f"{name} {count}"
        for name, count in (
            ("in", usage.input_tokens),
            ("out", usage.output_tokens),
            ("reasoning", usage.reasoning_tokens),
        )
        if count is not None
    ]
    if counts:
        line += f"; tokens {' '.join(counts)}"
    times = [f"total {1000 * total:.0f} ms"]
    if first is not None:
        times.insert(0, f"first event {1000 * first:.0f} ms")
    return f"{line}; {', '.join(times)}"
