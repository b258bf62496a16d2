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

__all__ = ["LOCAL_KEY", "Media", "Printer", "api_key", "summary"]

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


class Printer:
    """Shows a reply's unified events as they arrive: text (and tool calls) on ``out``,
    reasoning dimmed on a terminal, warnings and errors on ``err`` (the error that ended
    the reply once, even when no error event came before its end); with ``as_json``,
    one JSON line per event instead. Media go to :class:`Media` either way."""

    def __init__(self, out: TextIO, err: TextIO, media: Media, *, as_json: bool) -> None:
        self.out = out
        self.err = err
        self.media = media
        self.as_json = as_json
        self._shown_errors: list[tuple[str, str]] = []

    def show(self, event: object, line: str | None = None) -> None:
        """Show ``event``, a unified event or a realtime session's (``line``: its JSON
        line, when not the event's own)."""
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
            out.write(event.delta)
        elif isinstance(event, ReasoningDelta):
            out.write(f"\x1b[2m{event.delta}\x1b[0m" if out.isatty() else event.delta)
        elif isinstance(event, BlockStart) and event.kind == "tool_call":
            out.write(f"\n[tool call {event.name} {event.call_id or event.id or ''}] ")
        elif isinstance(event, ToolInputDelta):
            out.write(event.delta)
        elif isinstance(event, Warning):
            print(f"\n[{event.code}] {event.message}", file=self.err)
        elif isinstance(event, ErrorEvent):
            self.error(event.error.kind, event.error.message)
        elif isinstance(event, Finish):
            out.write("\n")
            if event.error is not None:
                self.error(event.error.kind, event.error.message)
        out.flush()

    def error(self, kind: str, message: str) -> None:
        """Show an error, unless the same one was shown already."""
        if (kind, message) in self._shown_errors:
            return
        self._shown_errors.append((kind, message))
        print(f"\n[error {kind}] {message}", file=self.err)


def summary(result: Result, first: float | None, total: float) -> str:
    """The final line: status, finish reason, usage, time to first event and in all."""
    usage = result.usage
    reason = result.finish_reason.raw if result.finish_reason else None
    return (
        f"-- {result.status} ({reason}); tokens in {usage.input_tokens} out {usage.output_tokens}"
        f" reasoning {usage.reasoning_tokens}; first event {1000 * (first or 0):.0f} ms,"
        f" total {1000 * total:.0f} ms"
    )
