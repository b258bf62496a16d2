"""The final object of a speech stream.

The speech endpoint has no JSON final object: without ``stream_format: "sse"`` it
answers the audio file's bytes. :func:`rebuild` returns polystream's own shape instead:
``{"audio": <base64 of all the audio>, "format": <response_format or None>,
"usage": {"input_tokens", "output_tokens", "total_tokens"} or None}``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

from polystream.errors import LocalProtocolError
from polystream.events import BlockStart, DataDelta, Event, Finish, Usage, UsageUpdate

from .decode import DIALECT

__all__ = ["rebuild"]


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """``{"audio", "format", "usage"}`` of a speech stream's unified events: the audio
    of its first ``audio`` block (each delta's base64 decoded on its own, then the bytes
    joined and encoded once), its format, and the usage.

    Raises:
        LocalProtocolError: A data delta of the audio block is not base64.
    """
    audio: int | None = None
    audio_format: str | None = None
    parts: list[bytes] = []
    usage: Usage | None = None
    for event in events:
        kind = type(event)
        if kind is DataDelta:
            assert isinstance(event, DataDelta)
            if event.index == audio:
                try:
                    piece = base64.b64decode(event.delta, validate=True)
                except (binascii.Error, ValueError):
                    raise LocalProtocolError(
                        f"a data delta of audio block {audio} is not base64", dialect=DIALECT
                    ) from None
                if event.replace:
                    parts.clear()
                parts.append(piece)
        elif kind is BlockStart:
            assert isinstance(event, BlockStart)
            if event.kind == "audio" and audio is None:
                audio = event.index
                audio_format = event.media.format if event.media is not None else None
        elif kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            usage = event.usage if usage is None else usage.merged(event.usage)
        elif kind is Finish:
            assert isinstance(event, Finish)
            if event.usage is not None:
                usage = event.usage if usage is None else usage.merged(event.usage)
    return {
        "audio": base64.b64encode(b"".join(parts)).decode("ascii"),
        "format": audio_format,
        "usage": None
        if usage is None
        else {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        },
    }
