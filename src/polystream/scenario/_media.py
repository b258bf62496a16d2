"""Deterministic media for emulated replies: a tone for audio, a PNG for images.

Nothing here depends on a model: the same text always gives the same bytes.

* :func:`tone` writes 16-bit signed little-endian mono PCM at 24 kHz: a sine whose
  frequency (220 to 659 Hz) and default length (50 ms a character, 0.2 s to 20 s)
  follow from the text it stands for, with 5 ms fades at both ends so that it starts and
  stops without a click.
* :func:`audio_file` wraps it as the file of a ``response_format``: ``pcm`` as it is,
  ``wav`` with its RIFF header (written here), ``mp3``, ``opus`` (in Ogg), ``aac`` (ADTS)
  and ``flac`` encoded by FFmpeg through PyAV (the ``audio`` extra), bit-exact so that
  the bytes do not change between runs.
* :func:`png` writes an 8-bit RGB PNG (``zlib`` and ``struct``): horizontal bands in two
  colours taken from the text's SHA-256, a gradient from one to the other. A partial
  image shows the first rows of the final one and grey below them.
"""

from __future__ import annotations

import array
import hashlib
import io
import math
import struct
import sys
import zlib
from typing import Final

__all__ = [
    "AUDIO_MIME",
    "COMPRESSED_FORMATS",
    "PCM_MIME",
    "PCM_RATE",
    "PLAIN_FORMATS",
    "AudioUnavailable",
    "audio_file",
    "compressed_available",
    "png",
    "tone",
    "tone_frequency",
    "tone_seconds",
]

PCM_RATE: Final = 24000
"""Samples per second of every emulated tone (OpenAI's and Gemini's PCM rate)."""
PLAIN_FORMATS: Final = ("pcm", "wav")
"""Audio formats written without a codec library."""
COMPRESSED_FORMATS: Final[dict[str, tuple[str, str]]] = {
    "mp3": ("mp3", "libmp3lame"),
    "opus": ("ogg", "libopus"),
    "aac": ("adts", "aac"),
    "flac": ("flac", "flac"),
}
"""Each compressed ``response_format``: FFmpeg's container and its encoder."""
AUDIO_MIME: Final = {
    "mp3": "audio/mpeg",
    "opus": "audio/opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
"""The media type of each audio format, as OpenAI's speech endpoint labels it."""
PCM_MIME: Final = "audio/L16;codec=pcm;rate=24000"
"""The media type of 24 kHz PCM16 as Gemini labels its audio."""

_AMPLITUDE: Final = 0.3 * 32767
_FADE: Final = 0.005  # seconds of fade-in and fade-out
_SECONDS_PER_CHAR: Final = 0.05
_MIN_SECONDS: Final = 0.2
_MAX_SECONDS: Final = 20.0
_GREY: Final = b"\x80\x80\x80"
MAX_SIDE: Final = 2048
"""The largest width or height of an emulated image."""


class AudioUnavailable(Exception):
    """A compressed audio format was asked for without PyAV installed."""


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def tone_frequency(text: str) -> float:
    """The frequency (Hz) of the tone standing for ``text``: 220 to 659, from its hash."""
    return float(220 + int.from_bytes(_digest(text)[:2], "big") % 440)


def tone_seconds(text: str) -> float:
    """The default length (seconds) of the tone standing for ``text``."""
    return min(_MAX_SECONDS, max(_MIN_SECONDS, len(text) * _SECONDS_PER_CHAR))


def tone(
    text: str,
    *,
    frequency: float | None = None,
    seconds: float | None = None,
    rate: int = PCM_RATE,
) -> bytes:
    """PCM16 mono at ``rate`` (default :data:`PCM_RATE`) for ``text`` (see the module
    docstring).

    Args:
        text: What the tone stands for (it gives the default frequency and length).
        frequency: The frequency in Hz instead.
        seconds: The length instead (at most 20 s).
        rate: Samples per second (8 kHz for telephony formats).
    """
    hz = tone_frequency(text) if frequency is None else frequency
    length = tone_seconds(text) if seconds is None else min(seconds, _MAX_SECONDS)
    count = max(1, round(length * rate))
    fade = max(1, min(round(_FADE * rate), count // 2))
    step = 2 * math.pi * hz / rate
    samples = array.array("h", [0]) * count
    for n in range(count):
        gain = min(1.0, n / fade, (count - 1 - n) / fade)
        samples[n] = round(_AMPLITUDE * gain * math.sin(step * n))
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


def _wav(pcm: bytes) -> bytes:
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(pcm),
        b"WAVE",
        b"fmt ",
        16,  # the fmt chunk's size
        1,  # PCM
        1,  # mono
        PCM_RATE,
        PCM_RATE * 2,  # bytes per second
        2,  # bytes per frame
        16,  # bits per sample
        b"data",
        len(pcm),
    )
    return header + pcm


def compressed_available() -> bool:
    """Whether PyAV is installed (the compressed formats can be written)."""
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def _encode(pcm: bytes, container: str, codec: str) -> bytes:
    try:
        import av
    except ImportError:
        raise AudioUnavailable(
            "compressed audio needs PyAV (pip install 'polystream[audio]')"
        ) from None
    out = io.BytesIO()
    count = len(pcm) // 2
    with av.open(out, mode="w", format=container, options={"fflags": "+bitexact"}) as file:
        stream = file.add_stream(codec, rate=PCM_RATE, layout="mono")
        assert isinstance(stream, av.AudioStream)
        frame = av.AudioFrame(format="s16", layout="mono", samples=count)
        frame.planes[0].update(pcm)
        frame.sample_rate = PCM_RATE
        for packet in stream.encode(frame):
            file.mux(packet)
        for packet in stream.encode(None):
            file.mux(packet)
    return out.getvalue()


def audio_file(pcm: bytes, audio_format: str) -> bytes:
    """The file of ``audio_format`` holding ``pcm`` (see the module docstring).

    Raises:
        AudioUnavailable: A compressed format without PyAV.
        KeyError: An unknown format.
    """
    if audio_format == "pcm":
        return pcm
    if audio_format == "wav":
        return _wav(pcm)
    container, codec = COMPRESSED_FORMATS[audio_format]
    return _encode(pcm, container, codec)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data))
        + kind
        + data
        + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def png(text: str, width: int, height: int, *, shown: float = 1.0) -> bytes:
    """An RGB PNG of ``width`` x ``height`` pixels standing for ``text``.

    Args:
        text: What the picture stands for (its colours come from its hash).
        width, height: The size in pixels (1 to :data:`MAX_SIDE`).
        shown: The part of the rows drawn (0 to 1); the rest is grey (a partial image).

    Raises:
        ValueError: A size out of range.
    """
    if not (1 <= width <= MAX_SIDE and 1 <= height <= MAX_SIDE):
        raise ValueError(f"image size {width}x{height} is out of range (1 to {MAX_SIDE})")
    digest = _digest(text)
    top, bottom = digest[0:3], digest[3:6]
    bands = 2 + digest[6] % 7  # stripes across the gradient
    drawn = round(height * max(0.0, min(1.0, shown)))
    grey = b"\x00" + _GREY * width
    rows: list[bytes] = []
    for y in range(height):
        if y >= drawn:
            rows.append(grey)
            continue
        mix = y / (height - 1) if height > 1 else 0.0
        shade = 1.0 if (y * bands // height) % 2 == 0 else 0.8
        pixel = bytes(round((a + (b - a) * mix) * shade) for a, b in zip(top, bottom, strict=True))
        rows.append(b"\x00" + pixel * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(b"".join(rows), 6))
        + _chunk(b"IEND", b"")
    )
