"""Audio formats: durations and sizes, MIME types, whole frames."""

from __future__ import annotations

import pytest

from polystream.audio import (
    PCM16_16K,
    PCM16_24K,
    PCMA_8K,
    PCMU_8K,
    AudioError,
    AudioFormat,
    FrameCarry,
)


def test_durations_and_sizes() -> None:
    assert PCM16_24K.bytes_per_second == 48000
    assert PCM16_24K.duration_ms(48000) == 1000.0
    assert PCM16_24K.duration_ms(4800) == 100.0
    assert PCM16_24K.duration_ms(1) == pytest.approx(1 / 48)
    assert PCMU_8K.duration_ms(8000) == 1000.0
    assert PCMA_8K.duration_ms(160) == 20.0
    assert PCM16_16K.size_for(20) == 640
    assert PCM16_24K.size_for(0.5) == 24  # 12 whole frames
    assert PCM16_24K.size_for(0.01) == 0
    assert PCM16_24K.size_for(-5) == 0
    stereo = AudioFormat("pcm16", 48000, 2)
    assert stereo.frame_size == 4 and stereo.bytes_per_second == 192000
    assert stereo.size_for(1) == 192


def test_mime_types() -> None:
    assert PCM16_24K.mime_type == "audio/pcm;rate=24000"
    assert PCMU_8K.mime_type == "audio/pcmu"
    assert AudioFormat("pcma", 16000).mime_type == "audio/pcma;rate=16000"
    assert AudioFormat("pcm16", 48000, 2).mime_type == "audio/pcm;rate=48000;channels=2"


def test_invalid_formats_are_typed_errors() -> None:
    with pytest.raises(AudioError, match="unknown audio encoding"):
        AudioFormat("mp3", 24000)  # type: ignore[arg-type]
    with pytest.raises(AudioError, match="sample rate"):
        AudioFormat("pcm16", 0)
    with pytest.raises(AudioError, match="channel count"):
        AudioFormat("pcm16", 8000, 0)
    with pytest.raises(AudioError, match="3 bytes is not a whole number of 2-byte frames"):
        PCM16_24K.check(b"abc")
    PCMU_8K.check(b"abc")


def test_frame_carry_keeps_a_split_sample() -> None:
    carry = FrameCarry(2)
    assert carry.take(b"\x01") == b""
    assert carry.pending == 1
    assert carry.take(b"\x02\x03\x04\x05") == b"\x01\x02\x03\x04"
    assert carry.pending == 1
    assert carry.take(b"\x06") == b"\x05\x06"
    assert carry.pending == 0
