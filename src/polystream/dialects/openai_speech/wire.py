"""The speech stream's wire facts: event names, the audio formats and their media
types, and the key under which events keep what the unified model does not name."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.events import MediaInfo

__all__ = [
    "DEFAULT_RAW_CHUNK",
    "DELTA",
    "DONE",
    "ERROR",
    "EXTRA_KEY",
    "FORMATS",
    "JSON",
    "format_of_content_type",
    "media_for",
]

DELTA: Final = "speech.audio.delta"
DONE: Final = "speech.audio.done"
ERROR: Final = "error"
EXTRA_KEY: Final = "speech"
"""The key of an event's ``extra`` that holds what its native event had besides the
modelled fields (see :mod:`.decode`)."""

FORMATS: Final[dict[str, str]] = {
    "mp3": "audio/mpeg",
    "opus": "audio/opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
"""Each ``response_format`` and the media type of its audio."""

_BY_TYPE: Final[dict[str, str]] = {
    **{mime: name for name, mime in FORMATS.items()},
    "audio/mp3": "mp3",
    "audio/ogg": "opus",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/x-flac": "flac",
    "audio/l16": "pcm",
}

PCM_RATE: Final = 24000
"""OpenAI's PCM output: 24 kHz, 16-bit signed little-endian, mono."""

DEFAULT_RAW_CHUNK: Final = 3 * 1024
"""Bytes of raw audio per data delta (a multiple of 3, so that each delta's base64
has no padding and the deltas' texts join into the base64 of the whole)."""

JSON: Final = msgspec.json.Decoder()
"""Decodes a native event's data (any JSON value)."""


def format_of_content_type(content_type: str | None) -> str | None:
    """The ``response_format`` a ``Content-Type`` names (``audio/mpeg`` -> ``mp3``), or
    None when it names none of them."""
    if not content_type:
        return None
    return _BY_TYPE.get(content_type.split(";", 1)[0].strip().lower())


def media_for(audio_format: str | None) -> MediaInfo:
    """The media description of audio in ``audio_format`` (None: not stated; the
    audio is mono in every format)."""
    if audio_format is None:
        return MediaInfo(channels=1)
    return MediaInfo(
        format=audio_format,
        mime_type=FORMATS.get(audio_format),
        sample_rate=PCM_RATE if audio_format == "pcm" else None,
        channels=1,
    )


def compact(obj: Any) -> str:
    """A JSON value as compact text (the way the API writes its events)."""
    return msgspec.json.encode(obj).decode()
