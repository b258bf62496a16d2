"""The URL of a text-to-speech connection: every parameter is in its query.

Query parameters (the shared reference's xAI TTS section, pipecat's xAI TTS client):
``voice``, ``language`` (BCP-47 or ``auto``; required), ``codec`` (``pcm``, ``wav``,
``mulaw``, ``alaw``, ``mp3``), ``sample_rate``, ``speed``,
``optimize_streaming_latency``, ``text_normalization``, ``with_timestamps``. Changing
any of them means connecting again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from polystream.audio.formats import AudioFormat
from polystream.dialects._xai_voice.common import CODECS, build_url, query_of
from polystream.dialects.xai_tts.spec import SPEC
from polystream.errors import LocalProtocolError

__all__ = ["CODEC_NAMES", "tts_query", "tts_url"]

CODEC_NAMES: Final = frozenset({"pcm", "wav", "mulaw", "alaw", "mp3"})
"""The codecs the service writes."""


def tts_query(
    *,
    voice: str | None = None,
    language: str = "auto",
    output: AudioFormat | None = None,
    codec: str | None = None,
    sample_rate: int | None = None,
    speed: float | None = None,
    optimize_streaming_latency: int | bool | None = None,
    text_normalization: bool | None = None,
    with_timestamps: bool | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The query of a connection, from unified parameters: ``output`` (an
    :class:`~polystream.audio.AudioFormat`: PCM, μ-law or A-law, mono) gives ``codec``
    and ``sample_rate``; ``codec`` names one directly (``wav`` and ``mp3`` too). A
    parameter left None is not written (the service's default); ``extra`` adds
    parameters this list does not know.

    Raises:
        LocalProtocolError: An unknown codec, a format of more than one channel, or
            ``output`` contradicting ``codec`` or ``sample_rate``.
    """
    if output is not None:
        if output.channels != 1:
            raise _error(f"speech is mono: {output.channels} channels asked")
        named = CODECS[output.encoding]
        if codec is not None and codec != named:
            raise _error(f"codec={codec!r} contradicts output={output}")
        if sample_rate is not None and sample_rate != output.rate:
            raise _error(f"sample_rate={sample_rate} contradicts output={output}")
        codec, sample_rate = named, output.rate
    if codec is not None and codec not in CODEC_NAMES:
        raise _error(f"unknown codec {codec!r} (known: {', '.join(sorted(CODEC_NAMES))})")
    params: dict[str, Any] = {
        "voice": voice,
        "language": language,
        "codec": codec,
        "sample_rate": sample_rate,
        "speed": speed,
        "optimize_streaming_latency": optimize_streaming_latency,
        "text_normalization": text_normalization,
        "with_timestamps": with_timestamps,
    }
    for name, value in (extra or {}).items():
        if name in params:
            raise _error(f"{name!r} is a parameter of its own, not an extra one")
        params[name] = value
    return query_of(params, SPEC.name)


def tts_url(**params: Any) -> str:
    """The URL to connect to: the endpoint with :func:`tts_query`'s query."""
    return build_url(SPEC.url, tts_query(**params))


def _error(message: str) -> LocalProtocolError:
    return LocalProtocolError(message, dialect=SPEC.name)
