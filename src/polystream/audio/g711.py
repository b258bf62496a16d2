"""ITU-T G.711 μ-law and A-law, to and from 16-bit PCM, exactly.

The companding follows Recommendation G.711 (11/88) as its reference C implementation
does (the ``g711.c`` of Sun Microsystems, which the removed ``audioop`` module used): a
16-bit sample is reduced to 14 bits (μ-law) or 13 bits (A-law), its segment found, and
the code word's bits inverted as the recommendation prescribes (all bits for μ-law, the
even bits for A-law). Decoding gives the segment's mid value, scaled back to 16 bits.

Each direction is a table built once, on first use (65,536 codes for encoding, 256
samples for decoding): a conversion is then one table look-up per sample, in pure
Python, with no dependency.
"""

from __future__ import annotations

import sys
from array import array
from functools import cache
from typing import Final

from polystream.audio.formats import AudioError

__all__ = [
    "alaw_decode",
    "alaw_decode_sample",
    "alaw_encode",
    "alaw_encode_sample",
    "ulaw_decode",
    "ulaw_decode_sample",
    "ulaw_encode",
    "ulaw_encode_sample",
]

_ULAW_SEG_END: Final = (0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF)
_ALAW_SEG_END: Final = (0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF)
_ULAW_BIAS: Final = 0x84  # 132, added to the magnitude before the segment search
_ULAW_CLIP: Final = 8159  # largest 14-bit magnitude that can be biased without overflow


def _segment(value: int, ends: tuple[int, ...]) -> int:
    for seg, end in enumerate(ends):
        if value <= end:
            return seg
    return len(ends)


def ulaw_encode_sample(sample: int) -> int:
    """The μ-law code word of a 16-bit sample (-32768..32767)."""
    pcm = sample >> 2  # 14-bit
    if pcm < 0:
        pcm = -pcm
        mask = 0x7F
    else:
        mask = 0xFF
    pcm = min(pcm, _ULAW_CLIP) + (_ULAW_BIAS >> 2)
    seg = _segment(pcm, _ULAW_SEG_END)
    if seg >= 8:
        return 0x7F ^ mask
    return ((seg << 4) | ((pcm >> (seg + 1)) & 0x0F)) ^ mask


def ulaw_decode_sample(code: int) -> int:
    """The 16-bit sample of a μ-law code word (0..255)."""
    code = ~code & 0xFF
    value = (((code & 0x0F) << 3) + _ULAW_BIAS) << ((code & 0x70) >> 4)
    return _ULAW_BIAS - value if code & 0x80 else value - _ULAW_BIAS


def alaw_encode_sample(sample: int) -> int:
    """The A-law code word of a 16-bit sample (-32768..32767)."""
    pcm = sample >> 3  # 13-bit
    if pcm >= 0:
        mask = 0xD5  # sign bit set, even bits inverted
    else:
        mask = 0x55
        pcm = -pcm - 1
    seg = _segment(pcm, _ALAW_SEG_END)
    if seg >= 8:
        return 0x7F ^ mask
    value = seg << 4
    value |= (pcm >> 1) & 0x0F if seg < 2 else (pcm >> seg) & 0x0F
    return value ^ mask


def alaw_decode_sample(code: int) -> int:
    """The 16-bit sample of an A-law code word (0..255)."""
    code ^= 0x55
    value = (code & 0x0F) << 4
    seg = (code & 0x70) >> 4
    if seg == 0:
        value += 8
    elif seg == 1:
        value += 0x108
    else:
        value = (value + 0x108) << (seg - 1)
    return value if code & 0x80 else -value


@cache
def _encode_table(law: str) -> bytes:
    """Code word of every 16-bit sample, indexed by the sample as an unsigned value."""
    encode = ulaw_encode_sample if law == "ulaw" else alaw_encode_sample
    return bytes(encode(u - 0x10000 if u & 0x8000 else u) for u in range(0x10000))


@cache
def _decode_table(law: str) -> tuple[bytes, ...]:
    """The little-endian 16-bit sample of every code word."""
    decode = ulaw_decode_sample if law == "ulaw" else alaw_decode_sample
    return tuple(decode(code).to_bytes(2, "little", signed=True) for code in range(256))


def _samples(pcm: bytes) -> array[int]:
    """The samples of 16-bit little-endian PCM as unsigned values."""
    if len(pcm) % 2:
        raise AudioError(f"16-bit PCM has an even number of bytes (got {len(pcm)})")
    samples = array("H", pcm)
    if sys.byteorder == "big":
        samples.byteswap()
    return samples


def _encode(pcm: bytes, law: str) -> bytes:
    table = _encode_table(law)
    return bytes(map(table.__getitem__, _samples(pcm)))


def _decode(data: bytes, law: str) -> bytes:
    return b"".join(map(_decode_table(law).__getitem__, data))


def ulaw_encode(pcm: bytes) -> bytes:
    """16-bit little-endian PCM to μ-law, one byte per sample.

    Raises:
        AudioError: ``pcm`` has an odd number of bytes.
    """
    return _encode(pcm, "ulaw")


def ulaw_decode(data: bytes) -> bytes:
    """μ-law to 16-bit little-endian PCM."""
    return _decode(data, "ulaw")


def alaw_encode(pcm: bytes) -> bytes:
    """16-bit little-endian PCM to A-law, one byte per sample.

    Raises:
        AudioError: ``pcm`` has an odd number of bytes.
    """
    return _encode(pcm, "alaw")


def alaw_decode(data: bytes) -> bytes:
    """A-law to 16-bit little-endian PCM."""
    return _decode(data, "alaw")
