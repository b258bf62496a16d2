"""G.711 μ-law and A-law against the values of Recommendation G.711 and its reference
implementation, and the round trips every code word must survive."""

from __future__ import annotations

import itertools
import struct
import warnings

import pytest

from polystream.audio import AudioError, alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from polystream.audio.g711 import (
    alaw_decode_sample,
    alaw_encode_sample,
    ulaw_decode_sample,
    ulaw_encode_sample,
)

ALL_SAMPLES = struct.pack("<65536h", *range(-32768, 32768))
ALL_CODES = bytes(range(256))

# (16-bit sample, μ-law code, A-law code): the ends of the range, zero (μ-law's positive
# zero 0xFF, A-law's 0xD5: the even bits inverted), the smallest steps and mid values.
ENCODED = [
    (0, 0xFF, 0xD5),
    (1, 0xFF, 0xD5),
    (-1, 0x7E, 0x55),
    (100, 0xF2, 0xD3),
    (-100, 0x72, 0x53),
    (1000, 0xCE, 0xFA),
    (-1000, 0x4E, 0x7A),
    (4000, 0xAF, 0x9A),
    (12345, 0x97, 0xBD),
    (-12345, 0x17, 0x3D),
    (32000, 0x80, 0xAA),
    (32767, 0x80, 0xAA),
    (-32768, 0x00, 0x2A),
]

# Decoder outputs: G.711 Table 2a (μ-law, 14-bit values 0..8031, times 4) and Table 2b
# (A-law, 13-bit values 1..4032, times 8).
ULAW_DECODED = [
    (0x00, -32124),
    (0x0F, -16764),
    (0x10, -15996),
    (0x7E, -8),
    (0x7F, 0),
    (0x80, 32124),
    (0xCE, 988),
    (0xFE, 8),
    (0xFF, 0),
]
ALAW_DECODED = [
    (0x00, -5504),
    (0x2A, -32256),
    (0x54, -24),
    (0x55, -8),
    (0x80, 5504),
    (0xAA, 32256),
    (0xD4, 24),
    (0xD5, 8),
    (0xFA, 1008),
]


@pytest.mark.parametrize(("sample", "ulaw", "alaw"), ENCODED)
def test_encode_known_values(sample: int, ulaw: int, alaw: int) -> None:
    assert ulaw_encode_sample(sample) == ulaw
    assert alaw_encode_sample(sample) == alaw
    pcm = struct.pack("<h", sample)
    assert ulaw_encode(pcm) == bytes([ulaw])
    assert alaw_encode(pcm) == bytes([alaw])


@pytest.mark.parametrize(("code", "sample"), ULAW_DECODED)
def test_ulaw_decode_known_values(code: int, sample: int) -> None:
    assert ulaw_decode_sample(code) == sample
    assert ulaw_decode(bytes([code])) == struct.pack("<h", sample)


@pytest.mark.parametrize(("code", "sample"), ALAW_DECODED)
def test_alaw_decode_known_values(code: int, sample: int) -> None:
    assert alaw_decode_sample(code) == sample
    assert alaw_decode(bytes([code])) == struct.pack("<h", sample)


def test_every_ulaw_code_survives_decode_then_encode() -> None:
    again = ulaw_encode(ulaw_decode(ALL_CODES))
    # 0x7F is the negative zero: it decodes to 0, which encodes as the positive zero.
    assert again == ALL_CODES.replace(b"\x7f", b"\xff")


def test_every_alaw_code_survives_decode_then_encode() -> None:
    assert alaw_encode(alaw_decode(ALL_CODES)) == ALL_CODES


@pytest.mark.parametrize(
    ("encode", "decode"), [(ulaw_encode, ulaw_decode), (alaw_encode, alaw_decode)]
)
def test_companding_is_idempotent_and_monotonic(encode: object, decode: object) -> None:
    assert callable(encode) and callable(decode)
    once = decode(encode(ALL_SAMPLES))
    assert decode(encode(once)) == once
    values = struct.unpack("<65536h", once)
    assert all(a <= b for a, b in itertools.pairwise(values))
    # The quantisation error stays within the largest segment's half step.
    assert max(abs(v - s) for v, s in zip(values, range(-32768, 32768), strict=True)) <= 1024


def test_decoded_length_and_odd_input() -> None:
    assert len(ulaw_decode(ALL_CODES)) == 512
    assert ulaw_encode(b"") == b"" and alaw_decode(b"") == b""
    with pytest.raises(AudioError, match="even number of bytes"):
        ulaw_encode(b"\x00\x01\x02")
    with pytest.raises(AudioError):
        alaw_encode(b"\x00")


def test_whole_tables_match_the_reference_implementation() -> None:
    # The removed ``audioop`` module wrapped the same reference C code; where the
    # interpreter still has it, every one of the 65,536 samples and 256 codes agrees.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")
    assert ulaw_encode(ALL_SAMPLES) == audioop.lin2ulaw(ALL_SAMPLES, 2)
    assert alaw_encode(ALL_SAMPLES) == audioop.lin2alaw(ALL_SAMPLES, 2)
    assert ulaw_decode(ALL_CODES) == audioop.ulaw2lin(ALL_CODES, 2)
    assert alaw_decode(ALL_CODES) == audioop.alaw2lin(ALL_CODES, 2)
