"""Audio formats, sans-I/O: what a media type says about its audio, raw PCM written as a
WAV file, and the audio format a file's first bytes show.

* :func:`media_of_type` reads a media type (``audio/L16;codec=pcm;rate=24000``,
  ``audio/mpeg``, ``image/png``) into a :class:`~polystream.events.MediaInfo`: the
  format's short name, and for PCM its sample rate and channels.
* :func:`pcm_to_wav` puts a WAV header (RIFF, ``WAVE_FORMAT_PCM``) before raw PCM
  samples; any WAV reader (the standard library's :mod:`wave`) reads the result.
* :func:`sniff_audio` names the format of an audio file from its first
  :data:`SNIFF_BYTES` bytes (an ID3 tag or an MPEG frame, ``RIFF....WAVE``, ``fLaC``,
  ``OggS``, an AAC ADTS frame); :func:`may_be_audio` says whether more bytes could still
  show one.

PCM here is what the providers send: signed 16-bit samples, little-endian, channels
interleaved (OpenAI's ``pcm``; Gemini's ``audio/L16;codec=pcm``, which, unlike RFC 2586's
network byte order, is little-endian). :func:`pcm_to_wav` writes the samples as they are.
"""

from __future__ import annotations

import struct
from typing import Final

from polystream.errors import LocalProtocolError
from polystream.events import MediaInfo

__all__ = [
    "PCM_SAMPLE_WIDTH",
    "SNIFF_BYTES",
    "format_of_type",
    "may_be_audio",
    "media_of_type",
    "pcm_duration",
    "pcm_to_wav",
    "sniff_audio",
]

PCM_SAMPLE_WIDTH: Final = 2
"""Bytes per PCM sample (16-bit)."""

SNIFF_BYTES: Final = 12
"""The most bytes :func:`sniff_audio` reads (``RIFF`` + size + ``WAVE``)."""

_FORMATS: Final[dict[str, str]] = {
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/wav": "wav",
    "audio/wave": "wav",
    "audio/x-wav": "wav",
    "audio/vnd.wave": "wav",
    "audio/flac": "flac",
    "audio/x-flac": "flac",
    "audio/opus": "opus",
    "audio/ogg": "ogg",
    "audio/aac": "aac",
    "audio/l16": "pcm",
    "audio/pcm": "pcm",
    "image/jpeg": "jpeg",
    "image/svg+xml": "svg",
}
"""Media types whose format name is not their subtype (or has another spelling)."""

_PCM_TYPES: Final = frozenset({"audio/l16", "audio/pcm"})
_WAV_HEADER: Final = struct.Struct("<4sI4s4sIHHIIHH4sI")
_RIFF_LIMIT: Final = 0xFFFFFFFF - (_WAV_HEADER.size - 8)

# Each file signature: (media type, ((offset, bytes), ...)); every mark must match.
_SIGNATURES: Final[tuple[tuple[str, tuple[tuple[int, bytes], ...]], ...]] = (
    ("audio/wav", ((0, b"RIFF"), (8, b"WAVE"))),
    ("audio/flac", ((0, b"fLaC"),)),
    ("audio/ogg", ((0, b"OggS"),)),
    ("audio/mpeg", ((0, b"ID3"),)),
)


def _split(mime_type: str) -> tuple[str, dict[str, str]]:
    """A media type's ``type/subtype`` (lower case) and its parameters (names lower case)."""
    head, *rest = mime_type.split(";")
    params: dict[str, str] = {}
    for item in rest:
        name, sep, value = item.partition("=")
        if sep:
            params[name.strip().lower()] = value.strip().strip('"')
    return head.strip().lower(), params


def _positive(value: str | None) -> int | None:
    if value is None or not value.isdigit():
        return None
    number = int(value)
    return number if number > 0 else None


def format_of_type(mime_type: str | None) -> str | None:
    """The short format name of a media type: ``audio/mpeg`` -> ``mp3``,
    ``audio/L16;rate=24000`` -> ``pcm``, ``image/png`` -> ``png`` (an ``audio/`` or
    ``image/`` subtype as it is); None for None or another kind of type."""
    if not mime_type:
        return None
    base, _ = _split(mime_type)
    known = _FORMATS.get(base)
    if known is not None:
        return known
    major, _, subtype = base.partition("/")
    if major in ("audio", "image") and subtype:
        return subtype
    return None


def media_of_type(mime_type: str | None) -> MediaInfo:
    """What a media type states: its format (:func:`format_of_type`), and for PCM
    (``audio/L16``, ``audio/pcm``) the sample rate of its ``rate`` parameter and the
    channels of its ``channels`` parameter (1 when absent, RFC 2586's default).

    ``audio/L16;codec=pcm;rate=24000`` -> ``MediaInfo(mime_type=that, format="pcm",
    sample_rate=24000, channels=1)``. An empty ``MediaInfo`` for None."""
    if not mime_type:
        return MediaInfo()
    base, params = _split(mime_type)
    if base in _PCM_TYPES:
        return MediaInfo(
            mime_type=mime_type,
            format="pcm",
            sample_rate=_positive(params.get("rate")),
            channels=_positive(params.get("channels")) or 1,
        )
    return MediaInfo(mime_type=mime_type, format=format_of_type(mime_type))


def pcm_duration(size: int, sample_rate: int, channels: int = 1) -> float:
    """Seconds of ``size`` bytes of 16-bit PCM (rounded to the microsecond)."""
    return round(size / (sample_rate * channels * PCM_SAMPLE_WIDTH), 6)


def pcm_to_wav(
    data: bytes, *, sample_rate: int, channels: int = 1, sample_width: int = PCM_SAMPLE_WIDTH
) -> bytes:
    """A WAV file of raw PCM samples: the 44-byte RIFF header (``fmt`` chunk of
    ``WAVE_FORMAT_PCM``, then the ``data`` chunk), then ``data`` unchanged (a partial last
    frame is kept: a reader ignores it).

    Raises:
        LocalProtocolError: A parameter is not positive, or ``data`` is too long for a
            RIFF file (4 GiB).
    """
    if sample_rate <= 0 or channels <= 0 or sample_width <= 0:
        raise LocalProtocolError(
            f"a WAV file needs a positive sample rate, channel count and sample width "
            f"(got {sample_rate}, {channels}, {sample_width})"
        )
    if len(data) > _RIFF_LIMIT:
        raise LocalProtocolError(f"{len(data)} bytes of PCM do not fit in a WAV file (4 GiB)")
    align = channels * sample_width
    header = _WAV_HEADER.pack(
        b"RIFF",
        _WAV_HEADER.size - 8 + len(data),
        b"WAVE",
        b"fmt ",
        16,  # the fmt chunk's size
        1,  # WAVE_FORMAT_PCM
        channels,
        sample_rate,
        sample_rate * align,  # bytes per second
        align,  # bytes per frame
        sample_width * 8,  # bits per sample
        b"data",
        len(data),
    )
    return header + data


def _mark(head: bytes, offset: int, mark: bytes) -> bool | None:
    """Whether ``head`` has ``mark`` at ``offset``: True, False, or None (too short to
    tell, and what it has agrees so far)."""
    seen = head[offset : offset + len(mark)]
    if len(seen) == len(mark):
        return seen == mark
    return None if mark.startswith(seen) else False


def _frame_sync(head: bytes) -> str | bool | None:
    """An MPEG audio or AAC ADTS frame header at the start: its media type, False, or
    None (one byte, 0xFF: the next decides)."""
    if not head or head[0] != 0xFF:
        return False
    if len(head) < 2:
        return None
    second = head[1]
    if second & 0xF6 == 0xF0:  # 12 sync bits, layer 00: ADTS
        return "audio/aac"
    # 11 sync bits, a valid version (01 is reserved) and layer (00 is reserved).
    if second & 0xE0 == 0xE0 and second & 0x18 != 0x08 and second & 0x06:
        return "audio/mpeg"
    return False


def _sniff(head: bytes) -> str | bool | None:
    undecided = False
    for mime_type, marks in _SIGNATURES:
        answers = [_mark(head, offset, mark) for offset, mark in marks]
        if all(answers):
            return mime_type
        if False not in answers:
            undecided = True
    sync = _frame_sync(head)
    if isinstance(sync, str):
        return sync
    return None if undecided or sync is None else False


def sniff_audio(head: bytes) -> str | None:
    """The media type of the audio file that starts with ``head`` (``audio/mpeg`` for an
    ID3 tag or an MPEG audio frame, ``audio/wav``, ``audio/flac``, ``audio/ogg``,
    ``audio/aac`` for an ADTS frame), or None. Raw PCM has no signature: it is never
    recognised."""
    found = _sniff(head[:SNIFF_BYTES])
    return found if isinstance(found, str) else None


def may_be_audio(head: bytes) -> bool:
    """True while ``head`` is too short to tell and could still begin an audio file
    :func:`sniff_audio` recognises."""
    return _sniff(head[:SNIFF_BYTES]) is None
