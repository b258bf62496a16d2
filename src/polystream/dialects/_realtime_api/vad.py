"""The emulator's voice activity detection: a level detector over 10 ms frames.

The service's server VAD is a model; this stand-in is deterministic and needs nothing but
the samples: a frame is speech when its RMS level reaches ``threshold`` x 20% of full
scale (a tone at 30% of full scale is speech for any threshold up to 1, digital silence
never is). Speech starts at the first speech frame and stops once ``silence_duration_ms``
of frames without speech follow the last speech frame. Positions are milliseconds of all
the audio written in the session, as the service counts them (``audio_start_ms``,
``audio_end_ms``).
"""

from __future__ import annotations

import array
import math
import sys
from typing import Final, Literal

from polystream.audio.convert import decode_pcm16
from polystream.audio.formats import AudioFormat

__all__ = ["FRAME_MS", "LEVEL", "VoiceDetector"]

FRAME_MS: Final = 10
"""The length of the frames the detector measures."""
LEVEL: Final = 0.2 * 32768
"""The RMS level of a frame at ``threshold`` 1 (20% of full scale)."""


class VoiceDetector:
    """Finds where speech starts and stops in the input audio, fed in any chunks.

    Args:
        fmt: The input audio's format.
        threshold: 0 to 1 (the session's ``turn_detection.threshold``).
        silence_duration_ms: The silence that ends speech.
        offset_ms: Where the audio it is fed starts (the audio written before it).
    """

    def __init__(
        self,
        fmt: AudioFormat,
        *,
        threshold: float = 0.5,
        silence_duration_ms: int = 200,
        offset_ms: int = 0,
    ) -> None:
        self.format = fmt
        self.level = max(threshold, 0.0) * LEVEL
        self.silence_duration_ms = max(silence_duration_ms, 0)
        self._frame = fmt.rate * FRAME_MS // 1000 * fmt.frame_size
        self._pending = b""
        self._frames = offset_ms // FRAME_MS  # frames measured (and before)
        self.speaking = False
        self._last_speech = 0  # the end of the last speech frame, in frames

    @property
    def position_ms(self) -> int:
        """Milliseconds of audio measured so far (whole frames)."""
        return self._frames * FRAME_MS

    def feed(self, data: bytes) -> list[tuple[Literal["started", "stopped"], int]]:
        """Measure more audio; returns what changed, each with its position in ms:
        ``started`` at the beginning of the first speech frame, ``stopped`` once the
        silence after the last one lasted ``silence_duration_ms`` (the position then)."""
        data = self._pending + data
        whole = len(data) - len(data) % self._frame
        self._pending = data[whole:]
        out: list[tuple[Literal["started", "stopped"], int]] = []
        silence_frames = math.ceil(self.silence_duration_ms / FRAME_MS)
        for start in range(0, whole, self._frame):
            rms = self._rms(data[start : start + self._frame])
            speech = rms >= self.level if self.level > 0 else rms > 0
            self._frames += 1
            if speech:
                if not self.speaking:
                    self.speaking = True
                    out.append(("started", (self._frames - 1) * FRAME_MS))
                self._last_speech = self._frames
            elif self.speaking and self._frames - self._last_speech >= silence_frames:
                self.speaking = False
                out.append(("stopped", self._frames * FRAME_MS))
        return out

    def _rms(self, frame: bytes) -> float:
        pcm = decode_pcm16(frame, self.format.encoding)
        samples = array.array("h")
        samples.frombytes(pcm)
        if sys.byteorder == "big":
            samples.byteswap()
        if not samples:
            return 0.0
        return math.sqrt(sum(s * s for s in samples) / len(samples))
