"""WAV files of 16-bit PCM in memory: read with the standard library's :mod:`wave`,
written with :func:`~polystream.audio.media_types.pcm_to_wav`'s header (no file is
opened: the bytes come in and go out)."""

from __future__ import annotations

import io
import wave

from polystream.audio.formats import AudioError, AudioFormat
from polystream.audio.media_types import pcm_to_wav

__all__ = ["read_wav", "write_wav"]


def read_wav(data: bytes) -> tuple[AudioFormat, bytes]:
    """The format and the samples of a WAV file of 16-bit PCM.

    Raises:
        AudioError: The bytes are not a WAV file, or its samples are not 16-bit PCM.
    """
    try:
        with wave.open(io.BytesIO(data), "rb") as reader:
            width = reader.getsampwidth()
            rate = reader.getframerate()
            channels = reader.getnchannels()
            frames = reader.readframes(reader.getnframes())
    except (wave.Error, EOFError) as exc:
        raise AudioError(f"not a WAV file of PCM samples: {exc}") from None
    if width != 2:
        raise AudioError(f"WAV samples are {8 * width}-bit; only 16-bit PCM is read")
    return AudioFormat("pcm16", rate, channels), frames


def write_wav(pcm: bytes, fmt: AudioFormat) -> bytes:
    """A WAV file holding ``pcm`` (16-bit little-endian PCM of ``fmt``).

    Raises:
        AudioError: ``fmt`` is not ``pcm16`` (convert G.711 first), or ``pcm`` is not
            whole frames.
    """
    if fmt.encoding != "pcm16":
        raise AudioError(f"WAV is written from 16-bit PCM only (got {fmt.encoding})")
    fmt.check(pcm)
    return pcm_to_wav(pcm, sample_rate=fmt.rate, channels=fmt.channels)
