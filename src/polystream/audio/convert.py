"""Conversion between :class:`~polystream.audio.formats.AudioFormat` values: G.711 to
and from PCM, and the sample rate, one-shot or chunk by chunk.

A telephony bridge is the usual case: μ-law at 8 kHz from a phone line to OpenAI's
24 kHz PCM and back. The channel count must be the same on both sides.
"""

from __future__ import annotations

from polystream.audio.formats import AudioError, AudioFormat, FrameCarry
from polystream.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from polystream.audio.resample import Quality, Resampler

__all__ = ["AudioConverter", "convert", "decode_pcm16", "encode_pcm16"]


def decode_pcm16(data: bytes, encoding: str) -> bytes:
    """Audio of ``encoding`` as 16-bit little-endian PCM (``pcm16`` unchanged)."""
    if encoding == "pcmu":
        return ulaw_decode(data)
    if encoding == "pcma":
        return alaw_decode(data)
    return bytes(data)


def encode_pcm16(pcm: bytes, encoding: str) -> bytes:
    """16-bit little-endian PCM as audio of ``encoding`` (``pcm16`` unchanged)."""
    if encoding == "pcmu":
        return ulaw_encode(pcm)
    if encoding == "pcma":
        return alaw_encode(pcm)
    return bytes(pcm)


class AudioConverter:
    """Audio of one format to another, fed in chunks cut anywhere.

    Args:
        src: The input's format.
        dst: The output's format.
        quality: The resampler's quality, when the rates differ.

    Raises:
        AudioError: The channel counts differ, or the rates differ and numpy or soxr is
            missing.
    """

    def __init__(self, src: AudioFormat, dst: AudioFormat, *, quality: Quality = "HQ") -> None:
        if src.channels != dst.channels:
            raise AudioError(
                f"cannot convert {src.channels} channels to {dst.channels} (same count only)"
            )
        self.src = src
        self.dst = dst
        self._carry = FrameCarry(src.frame_size)
        self._resampler = Resampler(src.rate, dst.rate, channels=src.channels, quality=quality)

    def feed(self, data: bytes) -> bytes:
        """Convert a chunk; returns the output ready so far."""
        pcm = decode_pcm16(self._carry.take(data), self.src.encoding)
        return encode_pcm16(self._resampler.feed(pcm), self.dst.encoding)

    def flush(self) -> bytes:
        """End of input: the rest of the output.

        Raises:
            AudioError: The input ended inside a frame.
        """
        if self._carry.pending:
            raise AudioError(f"the input ended inside a frame ({self._carry.pending} bytes left)")
        return encode_pcm16(self._resampler.flush(), self.dst.encoding)


def convert(data: bytes, src: AudioFormat, dst: AudioFormat, *, quality: Quality = "HQ") -> bytes:
    """Convert a whole buffer from ``src`` to ``dst``.

    Raises:
        AudioError: ``data`` is not whole frames of ``src``, or as :class:`AudioConverter`.
    """
    src.check(data)
    converter = AudioConverter(src, dst, quality=quality)
    return converter.feed(data) + converter.flush()
