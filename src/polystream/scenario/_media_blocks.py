"""Audio and image blocks of an emulated reply, as unified events.

An ``audio`` block holds a tone (:func:`~polystream.scenario._media.tone`) in the
requested format, cut into :class:`~polystream.events.DataDelta` s of
``AudioSpec.chunk`` bytes; an ``image`` block holds a PNG
(:func:`~polystream.scenario._media.png`) in one delta. Each dialect's encoder writes
them its own way (OpenAI speech ``speech.audio.delta``, Gemini ``inlineData`` parts...).
"""

from __future__ import annotations

import base64
import math
from typing import Final

from polystream.events import BlockEnd, BlockStart, DataDelta, Event, MediaInfo
from polystream.scenario._format import AudioSpec, ImageSpec
from polystream.scenario._media import PCM_RATE, audio_file, png, tone

__all__ = [
    "AUDIO_TOKENS_PER_SECOND",
    "as_audio",
    "as_image",
    "audio_block",
    "audio_tokens",
    "b64",
    "image_block",
]

AUDIO_TOKENS_PER_SECOND: Final = 25
"""Output tokens counted for a second of emulated audio."""
_DEFAULT_SIDE: Final = 256
"""The size of an image a text reply shows (a scenario's ``image`` without a size)."""


def as_audio(value: AudioSpec | bool | None) -> AudioSpec | None:
    """A reply's ``audio`` field as a spec (``true``: the default one)."""
    if value is True:
        return AudioSpec()
    return value if isinstance(value, AudioSpec) else None


def as_image(value: ImageSpec | bool | None) -> ImageSpec | None:
    """A reply's ``image`` field as a spec (``true``: the default one)."""
    if value is True:
        return ImageSpec()
    return value if isinstance(value, ImageSpec) else None


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def audio_block(
    index: int, spec: AudioSpec, *, speak: str, audio_format: str, mime_type: str
) -> tuple[list[Event], float]:
    """The events of an audio block, and the audio's length in seconds.

    Args:
        index: The block's index.
        spec: The scenario's audio (its ``text`` overrides ``speak``).
        speak: The text the tone stands for by default.
        audio_format: ``pcm``, ``wav``, ``mp3``, ``opus``, ``aac`` or ``flac``.
        mime_type: The audio's media type.
    """
    pcm = tone(
        spec.text if spec.text is not None else speak,
        frequency=spec.frequency,
        seconds=spec.seconds,
    )
    data = audio_file(pcm, audio_format)
    media = MediaInfo(
        format=audio_format,
        mime_type=mime_type,
        sample_rate=PCM_RATE if audio_format == "pcm" else None,
        channels=1,
    )
    events: list[Event] = [BlockStart(index=index, kind="audio", media=media)]
    chunk = spec.chunk
    events.extend(
        DataDelta(index=index, delta=b64(data[start : start + chunk]), mime_type=mime_type)
        for start in range(0, len(data), chunk)
    )
    events.append(BlockEnd(index=index))
    return events, len(pcm) / 2 / PCM_RATE


def audio_tokens(seconds: float) -> int:
    """Output tokens counted for ``seconds`` of audio (at least 1)."""
    return max(1, math.ceil(seconds * AUDIO_TOKENS_PER_SECOND))


def image_block(index: int, spec: ImageSpec, *, prompt: str) -> list[Event]:
    """The events of an image block in a text reply: one PNG, whole."""
    width = spec.width or _DEFAULT_SIDE
    height = spec.height or _DEFAULT_SIDE
    data = png(spec.text if spec.text is not None else prompt, width, height)
    media = MediaInfo(format="png", mime_type="image/png", size=f"{width}x{height}")
    return [
        BlockStart(index=index, kind="image", media=media),
        DataDelta(index=index, delta=b64(data), mime_type="image/png"),
        BlockEnd(index=index),
    ]
