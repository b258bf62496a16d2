"""polystream.audio: media types read into MediaInfo, PCM written as WAV (read back with
the standard library's ``wave``), and the signatures of audio files."""

from __future__ import annotations

import io
import struct
import wave

import pytest

from polystream.audio import (
    SNIFF_BYTES,
    format_of_type,
    may_be_audio,
    media_of_type,
    pcm_duration,
    pcm_to_wav,
    sniff_audio,
)
from polystream.errors import LocalProtocolError
from polystream.events import MediaInfo


@pytest.mark.parametrize(
    ("mime_type", "expected"),
    [
        (
            "audio/L16;codec=pcm;rate=24000",
            MediaInfo(
                mime_type="audio/L16;codec=pcm;rate=24000",
                format="pcm",
                sample_rate=24000,
                channels=1,
            ),
        ),
        (
            "audio/l16; rate=16000; channels=2",
            MediaInfo(
                mime_type="audio/l16; rate=16000; channels=2",
                format="pcm",
                sample_rate=16000,
                channels=2,
            ),
        ),
        ("audio/pcm", MediaInfo(mime_type="audio/pcm", format="pcm", channels=1)),
        # A rate that is not a positive number is not stated.
        (
            "audio/L16;rate=fast",
            MediaInfo(mime_type="audio/L16;rate=fast", format="pcm", channels=1),
        ),
        ("audio/mpeg", MediaInfo(mime_type="audio/mpeg", format="mp3")),
        ("audio/x-wav", MediaInfo(mime_type="audio/x-wav", format="wav")),
        ("Audio/FLAC", MediaInfo(mime_type="Audio/FLAC", format="flac")),
        ("audio/ogg", MediaInfo(mime_type="audio/ogg", format="ogg")),
        ("audio/webm", MediaInfo(mime_type="audio/webm", format="webm")),
        ("image/png", MediaInfo(mime_type="image/png", format="png")),
        ("image/jpeg", MediaInfo(mime_type="image/jpeg", format="jpeg")),
        ("application/pdf", MediaInfo(mime_type="application/pdf")),
        (None, MediaInfo()),
        ("", MediaInfo()),
    ],
)
def test_media_of_type(mime_type: str | None, expected: MediaInfo) -> None:
    assert media_of_type(mime_type) == expected


def test_format_of_type() -> None:
    assert format_of_type("audio/mp3") == "mp3"
    assert format_of_type("audio/aac") == "aac"
    assert format_of_type("audio/opus") == "opus"
    assert format_of_type("image/svg+xml") == "svg"
    assert format_of_type("text/plain") is None
    assert format_of_type(None) is None


def test_pcm_to_wav_reads_back_with_wave() -> None:
    samples = [0, 1000, -1000, 32767, -32768, 7]
    pcm = struct.pack("<6h", *samples)
    data = pcm_to_wav(pcm, sample_rate=24000)
    assert len(data) == 44 + len(pcm)
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt "
    assert struct.unpack("<I", data[4:8]) == (36 + len(pcm),)
    with wave.open(io.BytesIO(data)) as reader:
        assert reader.getnchannels() == 1
        assert reader.getsampwidth() == 2
        assert reader.getframerate() == 24000
        assert reader.getnframes() == 6
        assert reader.readframes(6) == pcm


def test_pcm_to_wav_stereo() -> None:
    pcm = bytes(range(16))  # 4 frames of 2 channels x 16 bits
    with wave.open(io.BytesIO(pcm_to_wav(pcm, sample_rate=8000, channels=2))) as reader:
        assert (reader.getnchannels(), reader.getframerate(), reader.getnframes()) == (2, 8000, 4)
        assert reader.readframes(4) == pcm


def test_pcm_to_wav_refuses_what_a_wav_cannot_say() -> None:
    with pytest.raises(LocalProtocolError, match="positive sample rate"):
        pcm_to_wav(b"\x00\x00", sample_rate=0)
    with pytest.raises(LocalProtocolError, match="positive sample rate"):
        pcm_to_wav(b"\x00\x00", sample_rate=24000, channels=0)


def test_pcm_duration() -> None:
    assert pcm_duration(48000, 24000) == 1.0
    assert pcm_duration(316, 24000) == 0.006583
    assert pcm_duration(96000, 24000, 2) == 1.0


@pytest.mark.parametrize(
    ("head", "mime_type"),
    [
        (b"ID3\x04\x00\x00\x00\x00\x00\x00", "audio/mpeg"),
        (b"\xff\xfb\x90\x64", "audio/mpeg"),  # MPEG-1 layer III
        (b"\xff\xf3\x48\xc4", "audio/mpeg"),  # MPEG-2 layer III
        (b"\xff\xe3\x18\xc4", "audio/mpeg"),  # MPEG-2.5 layer III
        (b"\xff\xf1\x50\x80", "audio/aac"),  # ADTS, MPEG-4, no CRC
        (b"\xff\xf9\x50\x80", "audio/aac"),  # ADTS, MPEG-2
        (b"RIFF\x24\x08\x00\x00WAVEfmt ", "audio/wav"),
        (b"fLaC\x00\x00\x00\x22", "audio/flac"),
        (b"OggS\x00\x02\x00\x00", "audio/ogg"),
        (b"RIFF\x24\x08\x00\x00AVI LIST", None),  # a RIFF file, not a WAVE one
        (b"\xff\xeb\x90\x64", None),  # MPEG version 01 is reserved
        (b"\xff\x00", None),
        (b"data: {}\n\n", None),
        (b"[{", None),
        (b"\x00\x01\x02\x03", None),  # raw PCM has no signature
    ],
)
def test_sniff_audio(head: bytes, mime_type: str | None) -> None:
    assert sniff_audio(head) == mime_type
    assert may_be_audio(head) is False


def test_may_be_audio_while_too_short_to_tell() -> None:
    for head in (b"", b"I", b"ID", b"\xff", b"R", b"RIFF", b"RIFF\x00\x00\x00\x00WAV", b"fLa"):
        assert sniff_audio(head) is None
        assert may_be_audio(head) is True, head
    for head in (b"d", b"IE", b"RIFX", b"fLaX", b"\xff\x00"):
        assert may_be_audio(head) is False, head
    assert SNIFF_BYTES == 12
