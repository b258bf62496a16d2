"""Audio, sans-I/O: formats and durations, media types and file signatures, G.711 μ-law
and A-law, sample-rate conversion (streaming), WAV in memory.

Everything takes and returns bytes. G.711 and WAV need nothing beyond the standard
library; resampling needs the ``realtime`` extra (numpy and soxr), imported only when a
resampler is made.
"""

from __future__ import annotations

from polystream.audio.convert import AudioConverter, convert, decode_pcm16, encode_pcm16
from polystream.audio.formats import (
    PCM16_8K,
    PCM16_16K,
    PCM16_24K,
    PCM16_48K,
    PCMA_8K,
    PCMU_8K,
    RATES,
    AudioError,
    AudioFormat,
    Encoding,
    FrameCarry,
)
from polystream.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from polystream.audio.media_types import (
    PCM_SAMPLE_WIDTH,
    SNIFF_BYTES,
    format_of_type,
    may_be_audio,
    media_of_type,
    pcm_duration,
    pcm_to_wav,
    sniff_audio,
)
from polystream.audio.resample import Quality, Resampler, resample
from polystream.audio.wav import read_wav, write_wav

__all__ = [
    "PCM16_8K",
    "PCM16_16K",
    "PCM16_24K",
    "PCM16_48K",
    "PCMA_8K",
    "PCMU_8K",
    "PCM_SAMPLE_WIDTH",
    "RATES",
    "SNIFF_BYTES",
    "AudioConverter",
    "AudioError",
    "AudioFormat",
    "Encoding",
    "FrameCarry",
    "Quality",
    "Resampler",
    "alaw_decode",
    "alaw_encode",
    "convert",
    "decode_pcm16",
    "encode_pcm16",
    "format_of_type",
    "may_be_audio",
    "media_of_type",
    "pcm_duration",
    "pcm_to_wav",
    "read_wav",
    "resample",
    "sniff_audio",
    "ulaw_decode",
    "ulaw_encode",
    "write_wav",
]
