"""Resampling: the streaming resampler gives what the one-shot one gives, whatever the
chunking; lengths follow the rate ratio; a tone keeps its frequency."""

from __future__ import annotations

import math
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.audio import AudioError, Resampler, resample

RATES = [8000, 16000, 24000, 48000]


def tone(rate: int, ms: int, freq: float = 440.0, amplitude: int = 12000) -> bytes:
    n = rate * ms // 1000
    return struct.pack(
        f"<{n}h", *(round(amplitude * math.sin(2 * math.pi * freq * i / rate)) for i in range(n))
    )


def samples(pcm: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(pcm) // 2}h", pcm)


def chunked(resampler: Resampler, data: bytes, sizes: list[int]) -> bytes:
    out = []
    at = 0
    for size in sizes:
        out.append(resampler.feed(data[at : at + size]))
        at += size
    out.append(resampler.feed(data[at:]))
    out.append(resampler.flush())
    return b"".join(out)


@pytest.mark.parametrize("src", RATES)
@pytest.mark.parametrize("dst", RATES)
def test_streaming_equals_one_shot(src: int, dst: int) -> None:
    data = tone(src, 300)
    whole = resample(data, src, dst)
    rng = random.Random(src * 7 + dst)
    sizes = [rng.randint(1, 997) for _ in range(40)]
    streamed = chunked(Resampler(src, dst), data, sizes)
    assert len(whole) == len(data) * dst // src
    assert len(streamed) == len(whole)
    assert max(abs(a - b) for a, b in zip(samples(whole), samples(streamed), strict=True)) <= 1


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1500), max_size=30))
def test_any_chunking_gives_the_same_output(sizes: list[int]) -> None:
    data = tone(24000, 120, 1000.0)
    reference = resample(data, 24000, 16000)
    streamed = chunked(Resampler(24000, 16000), data, sizes)
    assert len(streamed) == len(reference)
    assert max(abs(a - b) for a, b in zip(samples(reference), samples(streamed), strict=True)) <= 1


@pytest.mark.parametrize(("src", "dst"), [(24000, 16000), (8000, 24000), (48000, 24000)])
def test_a_tone_keeps_its_frequency(src: int, dst: int) -> None:
    out = samples(resample(tone(src, 500, 440.0), src, dst))
    ideal = [12000 * math.sin(2 * math.pi * 440.0 * i / dst) for i in range(len(out))]
    # Away from the edges (the filter's ramp), the error is a few LSB at most.
    middle = range(len(out) // 10, len(out) * 9 // 10)
    assert max(abs(out[i] - ideal[i]) for i in middle) < 8


def test_same_rate_passes_through_and_bad_input_is_typed() -> None:
    data = tone(16000, 20)
    assert resample(data, 16000, 16000) == data
    assert chunked(Resampler(16000, 16000), data, [3, 5, 7]) == data
    with pytest.raises(AudioError, match="whole number"):
        resample(b"\x00\x01\x02", 16000, 24000)
    with pytest.raises(AudioError, match="source rate"):
        Resampler(0, 24000)
    resampler = Resampler(16000, 24000)
    resampler.feed(b"\x00\x00\x01")
    with pytest.raises(AudioError, match="inside a sample"):
        resampler.flush()
    with pytest.raises(AudioError, match="after flush"):
        resampler.feed(b"\x00\x00")
    assert resampler.flush() == b""


def test_stereo_streaming_equals_one_shot() -> None:
    left = samples(tone(48000, 100, 440.0))
    right = samples(tone(48000, 100, 880.0))
    data = struct.pack(
        f"<{2 * len(left)}h", *(v for pair in zip(left, right, strict=True) for v in pair)
    )
    whole = resample(data, 48000, 24000, channels=2)
    streamed = chunked(Resampler(48000, 24000, channels=2), data, [1, 3, 1001, 7])
    assert len(whole) == len(data) // 2
    assert max(abs(a - b) for a, b in zip(samples(whole), samples(streamed), strict=True)) <= 1
