"""What a WebSocket reply says, in unified terms: the request summary of a turn, the
warm-up reply, a spoken reply, a forced message, and the answers of the speech sockets.

A Realtime response that speaks (output modality ``audio``) says its text aloud: the
reply's text block becomes an ``audio`` block, the tone standing for the text (see
:func:`~polystream.scenario._media.tone`) in the session's output format (PCM16 at
24 kHz, or G.711 at 8 kHz), and a ``transcript`` block of the same text, their deltas
interleaved (a transcript delta, then the audio that goes with it). The usage counts 25
output tokens a second of audio besides the text's, unless the scenario states it.

A text-to-speech turn is answered with the tone standing for its own text (or the
scenario's ``reply.audio.text``) in the connection's format, one ``audio`` block; a
speech-to-text turn with the scenario's text, or by default ``Emulated transcript of
N.NN s of audio.``
"""

from __future__ import annotations

import base64
from typing import Final

import msgspec

from polystream.audio.convert import encode_pcm16
from polystream.audio.formats import PCM16_24K, AudioFormat
from polystream.dialects._realtime.server import Turn
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    Event,
    Finish,
    FinishReason,
    MediaInfo,
    StreamStart,
    TextDelta,
    Usage,
)
from polystream.scenario._format import AudioSpec, Reply, Scenario
from polystream.scenario._media import tone
from polystream.scenario._media_blocks import as_audio, audio_tokens
from polystream.scenario._reply import SCENARIO_SOURCE, reply_events
from polystream.scenario._request import RequestSummary

__all__ = [
    "DEFAULT_SPEECH",
    "speech",
    "spoken",
    "transcript",
    "turn_summary",
    "verbatim",
    "warm_up",
]

_STOP: Final = FinishReason(unified="stop")
DEFAULT_SPEECH: Final = PCM16_24K
"""The format of speech when the turn states none."""


def turn_summary(family: str, provider: str, turn: Turn) -> RequestSummary:
    """The summary of a turn that is no HTTP request (a Realtime response)."""
    return RequestSummary(
        dialect=family,
        provider=provider,
        model=turn.model,
        stream=True,
        user_text=turn.user_text,
        has_tools=turn.has_tools,
        tool_names=turn.tool_names,
        has_tool_result=turn.has_tool_result,
    )


def warm_up(summary: RequestSummary, response_id: str, created: int) -> list[Event]:
    """A reply without output (``generate: false``): its start and its end, the input
    counted (about 4 characters a token, 8 more for the request)."""
    given = max(1, (len(summary.user_text) + 3) // 4) + 8
    return [
        StreamStart(dialect=SCENARIO_SOURCE, id=response_id, model=summary.model, created=created),
        Finish(
            status="completed",
            reason=_STOP,
            usage=Usage(input_tokens=given, output_tokens=0, total_tokens=given),
        ),
    ]


def spoken(
    events: list[Event], fmt: AudioFormat, scenario: Scenario | None, user_text: str
) -> list[Event]:
    """The reply said aloud (see the module docstring): each text block becomes an
    audio block and its transcript; an audio block of the reply is the tone of its own
    text in ``fmt``, without a transcript, when the reply has no text (else it is left
    out: the text's audio is the reply's); the other blocks are kept. Block indexes are
    renumbered in order."""
    reply = scenario.reply if scenario is not None else None
    spec = as_audio(reply.audio if reply is not None else None) or AudioSpec()
    estimated = reply is None or reply.usage is None
    # The reply's own audio block says its text: with a text block, that one speaks.
    has_text = any(type(e) is BlockStart and e.kind == "text" for e in events)
    out: list[Event] = []
    kept: dict[int, int] = {}  # a kept block -> its new index
    said: dict[int, list[str] | None] = {}  # a block said aloud -> its text deltas
    dropped: set[int] = set()
    seconds = 0.0
    count = 0
    for event in events:
        where = getattr(event, "index", None)
        if type(event) is BlockStart and event.kind == "audio" and has_text:
            dropped.add(event.index)
        elif where in dropped:
            continue
        elif type(event) is BlockStart and event.kind in ("text", "audio"):
            said[event.index] = [] if event.kind == "text" else None
        elif type(event) is BlockStart:
            kept[event.index] = count
            out.append(msgspec.structs.replace(event, index=count))
            count += 1
        elif type(event) is BlockEnd and event.index in said:
            deltas = said.pop(event.index)
            text = "".join(deltas) if deltas is not None else user_text
            spoken_events, length = _said(
                count, deltas or [], spec.text if spec.text is not None else text, spec, fmt
            )
            out.extend(spoken_events)
            seconds += length
            count += 2
        elif where in said:
            deltas = said[where]
            if type(event) is TextDelta and deltas is not None:
                deltas.append(event.delta)
        elif type(where) is int:
            if where in kept:
                out.append(msgspec.structs.replace(event, index=kept[where]))
        elif type(event) is Finish:
            out.append(_with_audio_usage(event, seconds, estimated=estimated))
        else:
            out.append(event)
    return out


def _said(
    first: int, deltas: list[str], text: str, spec: AudioSpec, fmt: AudioFormat
) -> tuple[list[Event], float]:
    """An audio block (index ``first``) and its transcript (``first + 1``), and the
    audio's length in seconds."""
    pcm = tone(text, frequency=spec.frequency, seconds=spec.seconds, rate=fmt.rate)
    data = encode_pcm16(pcm, fmt.encoding)
    chunk = spec.chunk
    pieces = [data[at : at + chunk] for at in range(0, len(data), chunk)]
    media = MediaInfo(mime_type=fmt.mime_type, sample_rate=fmt.rate, channels=fmt.channels)
    audio, said = first, first + 1
    out: list[Event] = [
        BlockStart(index=audio, kind="audio", media=media),
        BlockStart(index=said, kind="transcript"),
    ]
    shown = 0
    for position, delta in enumerate(deltas):
        out.append(TextDelta(index=said, delta=delta))
        upto = (position + 1) * len(pieces) // len(deltas)
        out.extend(_audio(audio, pieces[shown:upto], fmt))
        shown = upto
    out.extend(_audio(audio, pieces[shown:], fmt))
    out.append(BlockEnd(index=audio))
    out.append(BlockEnd(index=said, value="".join(deltas)))
    return out, len(pcm) / 2 / fmt.rate


def _audio(index: int, pieces: list[bytes], fmt: AudioFormat) -> list[Event]:
    return [
        DataDelta(
            index=index, delta=base64.b64encode(piece).decode("ascii"), mime_type=fmt.mime_type
        )
        for piece in pieces
    ]


def _with_audio_usage(finish: Finish, seconds: float, *, estimated: bool) -> Finish:
    """The finish with the spoken audio counted (unless the scenario stated the usage)."""
    usage = finish.usage
    if usage is None or not estimated or seconds == 0:
        return finish
    spoken_tokens = audio_tokens(seconds)
    text = (usage.output_tokens or 0) - (usage.audio_output_tokens or 0)
    made = text + spoken_tokens
    given = usage.input_tokens or 0
    return msgspec.structs.replace(
        finish,
        usage=msgspec.structs.replace(
            usage, output_tokens=made, audio_output_tokens=spoken_tokens, total_tokens=given + made
        ),
    )


def verbatim(text: str, summary: RequestSummary, response_id: str, created: int) -> list[Event]:
    """A reply that says ``text`` exactly (a forced message), cut into words."""
    return reply_events(Reply(text=text), summary, response_id=response_id, created=created)


def speech(
    summary: RequestSummary,
    fmt: AudioFormat,
    scenario: Scenario | None,
    response_id: str,
    created: int,
) -> list[Event]:
    """A text-to-speech answer: the tone of the turn's text (``summary.user_text``, or
    the scenario's ``reply.audio.text``) in ``fmt``, one ``audio`` block, in deltas of
    ``reply.audio.chunk`` bytes."""
    reply = scenario.reply if scenario is not None else None
    spec = as_audio(reply.audio if reply is not None else None) or AudioSpec()
    text = spec.text if spec.text is not None else summary.user_text
    pcm = tone(text, frequency=spec.frequency, seconds=spec.seconds, rate=fmt.rate)
    data = encode_pcm16(pcm, fmt.encoding)
    media = MediaInfo(mime_type=fmt.mime_type, sample_rate=fmt.rate, channels=fmt.channels)
    chunk = spec.chunk
    return [
        StreamStart(dialect=SCENARIO_SOURCE, id=response_id, model=summary.model, created=created),
        BlockStart(index=0, kind="audio", media=media),
        *_audio(0, [data[at : at + chunk] for at in range(0, len(data), chunk)], fmt),
        BlockEnd(index=0),
        Finish(status="completed", reason=_STOP),
    ]


def transcript(
    summary: RequestSummary, heard: float, response_id: str, created: int
) -> list[Event]:
    """The default speech-to-text answer: ``Emulated transcript of N.NN s of audio.``
    (``heard`` seconds), cut into words."""
    text = f"Emulated transcript of {heard:.2f} s of audio."
    return reply_events(Reply(text=text), summary, response_id=response_id, created=created)
