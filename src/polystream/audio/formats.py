"""Audio formats as realtime APIs state them: an encoding, a sample rate, a channel count.

Only the raw formats the WebSocket voice APIs carry are modelled: 16-bit signed
little-endian PCM (``pcm16``) and ITU-T G.711 μ-law (``pcmu``) and A-law (``pcma``), one
byte per sample. A format turns a byte count into a duration and back, exactly: what a
client needs to know how much audio it has received or played (barge-in).

The rate is never guessed from the bytes: every function takes the format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from polystream.errors import LocalProtocolError

__all__ = [
    "PCM16_8K",
    "PCM16_16K",
    "PCM16_24K",
    "PCM16_48K",
    "PCMA_8K",
    "PCMU_8K",
    "RATES",
    "AudioError",
    "AudioFormat",
    "Encoding",
    "FrameCarry",
]

Encoding: TypeAlias = Literal["pcm16", "pcmu", "pcma"]
"""``pcm16``: 16-bit signed little-endian PCM; ``pcmu``: G.711 μ-law; ``pcma``: G.711
A-law (one byte per sample)."""

_ENCODINGS: Final = frozenset({"pcm16", "pcmu", "pcma"})

RATES: Final = (8000, 16000, 24000, 48000)
"""The sample rates the realtime APIs use (OpenAI Realtime 24 kHz, G.711 8 kHz, Gemini
Live 16 kHz in, Lyria 48 kHz); any positive rate is accepted."""


class AudioError(LocalProtocolError):
    """Audio that does not fit its stated format (an odd byte count for 16-bit PCM, a
    WAV file of another encoding), or a conversion this build cannot do."""


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """A raw audio format.

    Attributes:
        encoding: See :data:`Encoding`.
        rate: Samples per second, per channel.
        channels: Interleaved channels.

    Raises:
        AudioError: An unknown encoding, a rate or channel count below 1.
    """

    encoding: Encoding = "pcm16"
    rate: int = 24000
    channels: int = 1

    def __post_init__(self) -> None:
        if self.encoding not in _ENCODINGS:
            raise AudioError(f"unknown audio encoding {self.encoding!r}")
        if type(self.rate) is not int or self.rate < 1:
            raise AudioError(f"sample rate must be a positive integer (got {self.rate!r})")
        if type(self.channels) is not int or self.channels < 1:
            raise AudioError(f"channel count must be a positive integer (got {self.channels!r})")

    @property
    def sample_width(self) -> int:
        """Bytes per sample: 2 for ``pcm16``, 1 for G.711."""
        return 2 if self.encoding == "pcm16" else 1

    @property
    def frame_size(self) -> int:
        """Bytes per frame (one sample of every channel)."""
        return self.sample_width * self.channels

    @property
    def bytes_per_second(self) -> int:
        """Bytes of one second of audio."""
        return self.frame_size * self.rate

    @property
    def mime_type(self) -> str:
        """``audio/pcm;rate=24000`` (with ``;channels=N`` past mono), ``audio/pcmu``,
        ``audio/pcma`` (G.711 names its rate only when it is not 8 kHz)."""
        if self.encoding == "pcm16":
            base = f"audio/pcm;rate={self.rate}"
        else:
            base = f"audio/{self.encoding}" + ("" if self.rate == 8000 else f";rate={self.rate}")
        return base if self.channels == 1 else f"{base};channels={self.channels}"

    def duration_ms(self, size: int) -> float:
        """The duration of ``size`` bytes, in milliseconds (a partial frame counts for
        what it holds)."""
        return size * 1000 / self.bytes_per_second

    def size_for(self, ms: float) -> int:
        """The bytes of the whole frames that fit in ``ms`` milliseconds."""
        if ms <= 0:
            return 0
        return int(ms * self.rate / 1000) * self.frame_size

    def check(self, data: bytes) -> None:
        """Check that ``data`` is whole frames of this format.

        Raises:
            AudioError: It ends inside a frame.
        """
        if len(data) % self.frame_size:
            raise AudioError(
                f"{len(data)} bytes is not a whole number of {self.frame_size}-byte "
                f"frames of {self.mime_type}"
            )


PCM16_8K: Final = AudioFormat("pcm16", 8000)
PCM16_16K: Final = AudioFormat("pcm16", 16000)
PCM16_24K: Final = AudioFormat("pcm16", 24000)
PCM16_48K: Final = AudioFormat("pcm16", 48000)
PCMU_8K: Final = AudioFormat("pcmu", 8000)
PCMA_8K: Final = AudioFormat("pcma", 8000)


class FrameCarry:
    """Whole frames out of chunks cut anywhere (a network read may end inside a
    sample): :meth:`take` returns the whole frames so far and keeps the rest, at most
    ``frame_size - 1`` bytes, for the next chunk."""

    __slots__ = ("_frame", "_rest")

    def __init__(self, frame_size: int) -> None:
        self._frame = frame_size
        self._rest = b""

    @property
    def pending(self) -> int:
        """Bytes kept from the last chunk (less than one frame)."""
        return len(self._rest)

    def take(self, chunk: bytes) -> bytes:
        """The whole frames of what was kept and ``chunk``."""
        data = self._rest + chunk if self._rest else bytes(chunk)
        cut = len(data) - len(data) % self._frame
        self._rest = data[cut:]
        return data[:cut]
