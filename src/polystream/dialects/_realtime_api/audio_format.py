"""The session's audio formats, read from its configuration.

GA sessions state them as objects: ``audio.output.format`` = ``{"type": "audio/pcm",
"rate": 24000}`` (PCM is 24 kHz only), ``{"type": "audio/pcmu"}`` or ``{"type":
"audio/pcma"}`` (G.711, 8 kHz). The retired beta sessions used flat names:
``output_audio_format`` = ``pcm16``, ``g711_ulaw`` or ``g711_alaw``.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.audio.formats import PCM16_24K, PCMA_8K, PCMU_8K, AudioFormat
from polystream.events import MediaInfo

__all__ = ["DEFAULT_FORMAT", "media_info", "read_format"]

DEFAULT_FORMAT: Final = PCM16_24K
"""The format until the session states one (the service's default)."""

_BY_TYPE: Final[dict[str, AudioFormat]] = {
    "audio/pcm": PCM16_24K,
    "audio/pcmu": PCMU_8K,
    "audio/pcma": PCMA_8K,
}
_BY_BETA_NAME: Final[dict[str, AudioFormat]] = {
    "pcm16": PCM16_24K,
    "g711_ulaw": PCMU_8K,
    "g711_alaw": PCMA_8K,
}


def read_format(session: Any, direction: str) -> tuple[AudioFormat, Any] | None:
    """The format of the session's ``input`` or ``output`` audio and the value that
    states it, or None when the session does not state it."""
    if not isinstance(session, dict):
        return None
    audio = session.get("audio")
    side = audio.get(direction) if isinstance(audio, dict) else None
    value = side.get("format") if isinstance(side, dict) else None
    if isinstance(value, dict):
        known = _BY_TYPE.get(value.get("type"))  # type: ignore[arg-type]
        if known is None:
            return None
        rate = value.get("rate")
        if type(rate) is int and rate > 0 and rate != known.rate:
            known = AudioFormat(known.encoding, rate)
        return known, value
    beta = session.get(f"{direction}_audio_format")
    if isinstance(beta, str) and beta in _BY_BETA_NAME:
        return _BY_BETA_NAME[beta], beta
    return None


def media_info(fmt: AudioFormat, stated: Any = None) -> MediaInfo:
    """A :class:`~polystream.events.MediaInfo` of a format: its MIME type and rate, and
    the provider's own name when it used one (the beta's ``pcm16``)."""
    mime = fmt.mime_type.split(";", 1)[0]
    return MediaInfo(
        mime_type=mime,
        format=stated if isinstance(stated, str) else None,
        sample_rate=fmt.rate,
        channels=fmt.channels,
    )
