"""The URL of a speech-to-text connection: every parameter is in its query.

Query parameters (the xAI speech-to-text reference, "Speech to text - Streaming"):
``sample_rate`` (8000, 16000, 22050, 24000, 44100, 48000; default 16000), ``encoding``
(``pcm``: 16-bit signed little-endian, ``mulaw``, ``alaw``; default ``pcm``),
``interim_results`` (partial transcripts about every 500 ms), ``endpointing`` (the
silence, 0 to 5000 ms, that ends an utterance), ``language``, ``multichannel`` and
``channels`` (2 to 8 interleaved channels, each transcribed on its own), ``diarize``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from polystream.audio.formats import AudioFormat
from polystream.dialects._xai_voice.common import CODECS, ENCODINGS, build_url, query_of
from polystream.dialects.xai_stt.spec import SPEC
from polystream.errors import LocalProtocolError

__all__ = ["DEFAULT_INPUT", "SAMPLE_RATES", "input_format", "stt_query", "stt_url"]

SAMPLE_RATES: Final = (8000, 16000, 22050, 24000, 44100, 48000)
"""The sample rates the service reads."""

DEFAULT_INPUT: Final = AudioFormat("pcm16", 16000)
"""The format the service reads when the query names none."""


def stt_query(
    *,
    input: AudioFormat | None = None,
    sample_rate: int | None = None,
    encoding: str | None = None,
    interim_results: bool | None = None,
    endpointing: int | None = None,
    language: str | None = None,
    multichannel: bool | None = None,
    channels: int | None = None,
    diarize: bool | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The query of a connection, from unified parameters: ``input`` (an
    :class:`~polystream.audio.AudioFormat`) gives ``sample_rate`` and ``encoding``,
    and, past one channel, ``multichannel`` and ``channels``. A parameter left None is
    not written (the service's default); ``extra`` adds parameters this list does not
    know.

    Raises:
        LocalProtocolError: A rate or encoding the service does not read, channels
            outside 2 to 8, an ``endpointing`` outside 0 to 5000, or ``input``
            contradicting the other parameters, ``multichannel`` without ``channels``.
    """
    if input is not None:
        named = CODECS[input.encoding]
        for given, value, name in (
            (sample_rate, input.rate, "sample_rate"),
            (encoding, named, "encoding"),
        ):
            if given is not None and given != value:
                raise _error(f"{name}={given!r} contradicts input={input}")
        sample_rate, encoding = input.rate, named
        if input.channels > 1:
            if multichannel is False or channels not in (None, input.channels):
                raise _error(f"multichannel={multichannel}, channels={channels} contradict {input}")
            multichannel, channels = True, input.channels
    if sample_rate is not None and sample_rate not in SAMPLE_RATES:
        raise _error(f"sample_rate {sample_rate} is not one of {SAMPLE_RATES}")
    if encoding is not None and encoding not in ENCODINGS:
        raise _error(f"unknown encoding {encoding!r} (known: {', '.join(ENCODINGS)})")
    if multichannel and channels is None:
        raise _error("multichannel=True needs channels (2 to 8)")
    if channels is not None and not 2 <= channels <= 8:
        raise _error(f"channels={channels}: 2 to 8 interleaved channels")
    if endpointing is not None and not 0 <= endpointing <= 5000:
        raise _error(f"endpointing={endpointing}: 0 to 5000 ms")
    params: dict[str, Any] = {
        "sample_rate": sample_rate,
        "encoding": encoding,
        "interim_results": interim_results,
        "endpointing": endpointing,
        "language": language,
        "multichannel": multichannel,
        "channels": channels,
        "diarize": diarize,
    }
    for name, value in (extra or {}).items():
        if name in params:
            raise _error(f"{name!r} is a parameter of its own, not an extra one")
        params[name] = value
    return query_of(params, SPEC.name)


def input_format(query: Mapping[str, str]) -> AudioFormat:
    """The format of the audio a connection with ``query`` reads (the service's
    defaults for what it leaves out)."""
    encoding = ENCODINGS[query.get("encoding", CODECS[DEFAULT_INPUT.encoding])]
    rate = int(query.get("sample_rate", DEFAULT_INPUT.rate))
    channels = int(query.get("channels", "1")) if query.get("multichannel") == "true" else 1
    return AudioFormat(encoding, rate, channels)


def stt_url(**params: Any) -> str:
    """The URL to connect to: the endpoint with :func:`stt_query`'s query."""
    return build_url(SPEC.url, stt_query(**params))


def _error(message: str) -> LocalProtocolError:
    return LocalProtocolError(message, dialect=SPEC.name)
