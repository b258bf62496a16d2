"""Realtime usage -> canonical :class:`~polystream.events.Usage`.

A response's ``usage`` (``RealtimeResponseUsage``): ``input_tokens`` (text, audio and
image, cached included), ``output_tokens`` (text and audio), ``total_tokens``;
``input_token_details.cached_tokens`` is the cache read and ``audio_tokens`` the audio
part of each side. An input transcription's usage is either tokens (the same three
counts, ``input_token_details.audio_tokens``) or a duration (``{"type": "duration",
"seconds"}``: no token count, kept whole as ``raw``).
"""

from __future__ import annotations

from typing import Any

from polystream.events import Usage

__all__ = ["to_usage"]


def _int(obj: Any, key: str) -> int | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if type(value) is int else None


def to_usage(raw: Any) -> Usage | None:
    """The canonical usage of a response's or a transcription's ``usage`` (None when
    absent)."""
    if not isinstance(raw, dict):
        return None
    details_in = raw.get("input_token_details")
    details_out = raw.get("output_token_details")
    return Usage(
        input_tokens=_int(raw, "input_tokens"),
        output_tokens=_int(raw, "output_tokens"),
        total_tokens=_int(raw, "total_tokens"),
        cache_read_tokens=_int(details_in, "cached_tokens"),
        audio_input_tokens=_int(details_in, "audio_tokens"),
        audio_output_tokens=_int(details_out, "audio_tokens"),
        raw=raw,
    )
