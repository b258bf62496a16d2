"""The URL query, the audio encodings and the ``error`` message of xAI's voice
WebSockets (text to speech, speech to text).

Both take their whole configuration in the query of the URL they connect to (changing
it means connecting again); their audio encodings are named ``pcm`` (16-bit signed
little-endian), ``mulaw`` and ``alaw``; an error comes as ``{"type": "error",
"message": ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlencode

from polystream.audio.formats import AudioFormat, Encoding
from polystream.dialects._responses.errors import error_info
from polystream.errors import LocalProtocolError
from polystream.events import ErrorInfo, Finish, FinishReason, MediaInfo

__all__ = [
    "CODECS",
    "ENCODINGS",
    "build_url",
    "media_of",
    "query_of",
    "raw_format",
    "truncated",
    "voice_error",
]

CODECS: Final[dict[Encoding, str]] = {"pcm16": "pcm", "pcmu": "mulaw", "pcma": "alaw"}
"""polystream's encoding -> xAI's name of it."""

ENCODINGS: Final[dict[str, Encoding]] = {name: enc for enc, name in CODECS.items()}
"""xAI's name of a raw encoding -> polystream's."""

_MIME: Final[dict[str, str]] = {
    "pcm": "audio/pcm",
    "mulaw": "audio/pcmu",
    "alaw": "audio/pcma",
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
}


def query_of(params: Mapping[str, Any], dialect: str) -> dict[str, str]:
    """The query parameters as text, in the order given: None left out, booleans
    ``true`` / ``false``, numbers as written.

    Raises:
        LocalProtocolError: A value that is not a string, a number or a boolean.
    """
    out: dict[str, str] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            out[name] = str(value)
        else:
            raise LocalProtocolError(
                f"query parameter {name!r} must be a string, a number or a boolean "
                f"(got {type(value).__name__})",
                dialect=dialect,
            )
    return out


def build_url(base: str, query: Mapping[str, str]) -> str:
    """``base`` with ``query`` (percent-encoded), or ``base`` alone when it is empty."""
    return f"{base}?{urlencode(query)}" if query else base


def media_of(codec: str, rate: int | None, channels: int | None = 1) -> MediaInfo:
    """What an audio block holds, from xAI's codec name and rate."""
    return MediaInfo(mime_type=_MIME.get(codec), format=codec, sample_rate=rate, channels=channels)


def raw_format(codec: str, rate: int | None, channels: int = 1) -> AudioFormat | None:
    """The :class:`~polystream.audio.AudioFormat` of a raw codec at a stated rate (None
    for a container codec or an unstated rate: the rate is never guessed)."""
    encoding = ENCODINGS.get(codec)
    if encoding is None or rate is None:
        return None
    return AudioFormat(encoding, rate, channels)


def voice_error(payload: dict[str, Any], *, output_started: bool) -> ErrorInfo:
    """An ``error`` message typed: its ``message`` (or an ``error`` text), and the kind
    its ``code`` or type says when it has one."""
    info = error_info(payload, output_started=output_started)
    text = payload.get("error")
    if "message" not in payload and isinstance(text, str):
        info = ErrorInfo(
            kind=info.kind,
            message=text,
            retryable=info.retryable,
            code=info.code,
            raw=info.raw,
        )
    return info


def truncated(dialect: str, message: str) -> Finish:
    """The finish of a turn the connection's end cut."""
    return Finish(
        status="truncated",
        reason=FinishReason(unified="error", raw=None),
        error=ErrorInfo(kind="truncated", message=message, retryable=True, dialect=dialect),
        extra={"implicit": True},
    )
