"""WAV in memory, and conversion between formats (G.711 <-> PCM, with the rate)."""

from __future__ import annotations

import io
import struct
import wave

import pytest

from polystream.audio import (
    PCM16_8K,
    PCM16_24K,
    PCMU_8K,
    AudioConverter,
    AudioError,
    AudioFormat,
    convert,
    read_wav,
    ulaw_decode,
    ulaw_encode,
    write_wav,
)

from .test_resample import samples, tone


def test_wav_round_trip_and_exact_header() -> None:
    pcm = struct.pack("<4h", 0, 1, -1, 32767)
    data = write_wav(pcm, PCM16_24K)
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt "
    # fmt chunk: PCM (1), mono, 24000 Hz, 48000 bytes/s, 2-byte frames, 16 bits
    assert struct.unpack("<IHHIIHH", data[16:36]) == (16, 1, 1, 24000, 48000, 2, 16)
    assert data[36:44] == b"data" + struct.pack("<I", 8)
    assert data[44:] == pcm
    assert len(data) == 52
    assert read_wav(data) == (PCM16_24K, pcm)
    stereo = AudioFormat("pcm16", 48000, 2)
    assert read_wav(write_wav(pcm, stereo)) == (stereo, pcm)


def test_wav_errors_are_typed() -> None:
    with pytest.raises(AudioError, match="not a WAV file"):
        read_wav(b"not a wav file at all")
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(1)
        writer.setframerate(8000)
        writer.writeframes(b"\x80\x81")
    with pytest.raises(AudioError, match="8-bit"):
        read_wav(out.getvalue())
    with pytest.raises(AudioError, match="16-bit PCM only"):
        write_wav(b"\xff", PCMU_8K)
    with pytest.raises(AudioError, match="whole number"):
        write_wav(b"\x00", PCM16_8K)


def test_ulaw_telephony_to_24k_pcm_and_back() -> None:
    speech = tone(8000, 200, 300.0, 8000)
    line = ulaw_encode(speech)
    wide = convert(line, PCMU_8K, PCM16_24K)
    assert len(wide) == len(line) * 2 * 3
    back = convert(wide, PCM16_24K, PCMU_8K)
    assert len(back) == len(line)
    # Away from the filter's edges the round trip is the companded signal, within a
    # couple of μ-law steps.
    a, b = samples(ulaw_decode(line)), samples(ulaw_decode(back))
    middle = range(len(a) // 10, len(a) * 9 // 10)
    assert max(abs(a[i] - b[i]) for i in middle) < 400


def test_converter_streams_like_one_shot() -> None:
    line = ulaw_encode(tone(8000, 200, 300.0, 8000))
    whole = convert(line, PCMU_8K, PCM16_24K)
    converter = AudioConverter(PCMU_8K, PCM16_24K)
    streamed = b"".join(converter.feed(line[i : i + 37]) for i in range(0, len(line), 37))
    streamed += converter.flush()
    assert max(abs(x - y) for x, y in zip(samples(whole), samples(streamed), strict=True)) <= 1
    assert convert(b"\x01\x02", PCM16_8K, PCMU_8K) == ulaw_encode(b"\x01\x02")
    with pytest.raises(AudioError, match="same count only"):
        AudioConverter(PCM16_8K, AudioFormat("pcm16", 8000, 2))
    odd = AudioConverter(PCM16_8K, PCM16_24K)
    odd.feed(b"\x00")
    with pytest.raises(AudioError, match="inside a frame"):
        odd.flush()
