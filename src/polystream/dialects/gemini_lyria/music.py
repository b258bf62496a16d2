"""The emulator's music: a deterministic tone per prompt, so that what a test hears can
be computed exactly.

Each prompt sounds as a sine wave whose frequency, a whole number of hertz from 110 to
769, comes from the SHA-256 of its text (:func:`prompt_frequency`); the prompts are
mixed by weight (each one's amplitude is its share of the weights' absolute sum, a
negative weight inverting its phase). The level is ``12000 * (0.25 + 0.75 * density)``
(``density`` 0.5 when not set); with ``bpm`` set, every other beat is half as loud.
Sample ``n`` of the context (counted from 0 at the first ``PLAY``, again after
``STOP`` and ``RESET_CONTEXT``) is::

    round(env(n) * sum(a_i * sin(2 * pi * ((f_i * n) % 48000) / 48000)))

(the sum taken in the prompts' order from 0.0), clamped to 16 bits, the same on both
channels (48 kHz stereo PCM16, little-endian). Every frequency being a whole number of
hertz, the mix repeats each second: one second of it is computed once and kept.
"""

from __future__ import annotations

import functools
import hashlib
import math
import sys
from array import array
from collections.abc import Sequence
from typing import Final

__all__ = ["RATE", "level", "music_pcm", "prompt_frequency"]

RATE: Final = 48000
_FULL: Final = 12000.0


def prompt_frequency(text: str) -> int:
    """The frequency of a prompt's tone, in hertz (110 to 769)."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return 110 + int.from_bytes(digest[:2], "big") % 660


def level(density: float | None) -> float:
    """The mix's peak amplitude for a ``density``."""
    return _FULL * (0.25 + 0.75 * (0.5 if density is None else min(max(density, 0.0), 1.0)))


def music_pcm(
    prompts: Sequence[tuple[str, float]],
    *,
    start: int,
    frames: int,
    density: float | None = None,
    bpm: int | None = None,
) -> bytes:
    """``frames`` stereo frames of the prompts' music from frame ``start`` of the
    context (silence without prompts)."""
    period = _period(tuple(prompts), level(density))
    pulse = bpm if bpm is not None and bpm > 0 else 0
    beat = 60 * RATE
    samples = array("h")
    for n in range(start, start + frames):
        value = period[n % RATE]
        if pulse and (n * pulse // beat) % 2:
            value *= 0.5
        sample = max(-32768, min(32767, round(value)))
        samples.append(sample)
        samples.append(sample)
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


@functools.lru_cache(maxsize=16)
def _period(prompts: tuple[tuple[str, float], ...], peak: float) -> array[float]:
    """One second of the mix before the beat (every frequency is a whole number of
    hertz: the mix repeats each second); 384 KB, the last 16 kept."""
    out = array("d", bytes(8 * RATE))
    total = sum(abs(weight) for _, weight in prompts)
    for text, weight in prompts if total else ():
        amp = peak * weight / total
        freq = prompt_frequency(text)
        for n in range(RATE):
            out[n] += amp * _SINE[(freq * n) % RATE]
    return out


_SINE: Final = tuple(math.sin(2.0 * math.pi * k / RATE) for k in range(RATE))
