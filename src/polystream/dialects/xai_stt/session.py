"""The xAI speech-to-text session: raw audio out, each turn's transcript in as a
unified stream.

The client sends the audio as bytes messages (raw, in the connection's encoding; about
100 ms each) and ``{"type": "audio.done"}`` when a turn's audio is over. The server
sends ``transcript.created`` once ready, ``transcript.partial`` as it transcribes
(``text``, ``words``, ``is_final``, ``speech_final``, ``start``, ``duration``,
``channel_index``): ``is_final`` false is an interim result (a later one replaces it),
``is_final`` alone a stretch of about 3 s locked, ``speech_final`` too the end of an
utterance; after an ``audio.done``, ``transcript.done`` (``text``, ``words``,
``duration``) with what no utterance's end covered. ``error`` (``{"message"}``) reports
a failure.

Each turn (up to its ``transcript.done``) is a stream (dialect ``xai_stt``); each
utterance of each channel is a ``transcript`` block in it:

* ``transcript.created`` -> :class:`~polystream.events.SessionUpdate` ``created``
  (stream 0; ``input_audio`` the format the query states);
* ``transcript.partial``: the first of a turn opens its stream, the first of an
  utterance its block (both implicit); interim -> ``Metadata("interim_transcript",
  text)``; final -> ``TextDelta`` (the text, after a space when neither side of the
  join has one) and a ``TranscriptSegment`` (``start``, ``start + duration``, the words'
  speaker when they agree); ``speech_final`` -> the block's ``BlockEnd``;
* ``transcript.done`` -> its text appended (``TextDelta``, implicit), every block ended,
  ``Finish`` (completed, ``stop``);
* ``error`` -> the running turn's ``ErrorEvent`` and ``Finish`` (failed); the
  session's when no turn runs or waits.

A connection that closes ends the running turn, and each one asked for
(``audio.done``) and not answered, ``truncated``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from polystream.audio.formats import AudioFormat
from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._xai_voice.common import build_url, media_of, truncated, voice_error
from polystream.dialects._xai_voice.turn import IMPLICIT, Turn
from polystream.dialects.xai_stt.query import input_format, stt_query
from polystream.dialects.xai_stt.spec import SPEC
from polystream.errors import BufferLimitExceeded, LocalProtocolError, RemoteProtocolError
from polystream.events import (
    ErrorEvent,
    Event,
    Finish,
    FinishReason,
    Metadata,
    SessionUpdate,
    TextDelta,
    TranscriptSegment,
)
from polystream.wire.ws import WSMessage

__all__ = ["STTSession"]


class STTSession(RealtimeSession):
    """An xAI speech-to-text WebSocket session.

    Args:
        input, sample_rate, encoding, interim_results, endpointing, language,
            multichannel, channels, diarize, extra_query: The connection's parameters
            (see :func:`.query.stt_query`): they make :attr:`url`, and the input format.
        max_channels: Most channels a turn may transcribe at once (the service reads up
            to 8); a message naming one more is a
            :class:`~polystream.errors.BufferLimitExceeded`.
        max_pending: Most turns ended (``audio.done``) and not yet answered.
        **options: See :class:`~polystream.dialects._realtime.session.RealtimeSession`.

    Raises:
        LocalProtocolError: A parameter :func:`.query.stt_query` refuses.
    """

    dialect: ClassVar[str] = "xai_stt"
    spec: ClassVar[SocketSpec] = SPEC

    def __init__(
        self,
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
        extra_query: dict[str, Any] | None = None,
        max_channels: int = 8,
        max_pending: int = 1024,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.query = stt_query(
            input=input,
            sample_rate=sample_rate,
            encoding=encoding,
            interim_results=interim_results,
            endpointing=endpointing,
            language=language,
            multichannel=multichannel,
            channels=channels,
            diarize=diarize,
            extra=extra_query,
        )
        """The connection's query parameters, as text."""
        self.input_format = input_format(self.query)
        """The format of the audio to send (the service's defaults for what the query
        leaves out)."""
        self.max_channels = max_channels
        self.max_pending = max_pending
        self._pending = 0
        self._turn: Turn | None = None
        self._tail: dict[int, str] = {}  # channel -> last character of its utterance

    @property
    def url(self) -> str:
        """The URL to connect to (the endpoint and :attr:`query`)."""
        return build_url(SPEC.url, self.query)

    @property
    def pending(self) -> int:
        """Turns ended (``audio.done`` sent) and not yet answered."""
        return self._pending

    # -- reading -----------------------------------------------------------------------

    def _on_message(
        self, read: WSMessage, payload: dict[str, Any], kind: str, out: list[Routed]
    ) -> None:
        events: list[Event] = []
        if kind == "transcript.partial":
            turn = self._partial(payload, events)
        elif kind == "transcript.done":
            turn = self._done(payload, events)
        elif kind == "transcript.created":
            fmt = self.input_format
            codec = self.query.get("encoding", "pcm")
            sid = payload.get("id")
            event = SessionUpdate(
                status="created",
                id=sid if isinstance(sid, str) else None,
                input_audio=media_of(codec, fmt.rate, fmt.channels),
                extra=payload,
            )
            out.append(Routed(event=event))
            return
        elif kind == "error":
            info = voice_error(payload, output_started=self._turn is not None)
            if self._turn is None and not self._pending:
                out.append(Routed(event=ErrorEvent(error=info, extra=payload)))
                return
            turn = self._running(events)
            events.append(ErrorEvent(error=info, extra=payload))
            turn.end_all(events)
            reason = FinishReason(unified="error", raw=kind)
            events.append(Finish(status="failed", reason=reason, error=info, extra=IMPLICIT))
            self._answered()
        else:
            unknown = self._unknown(read, kind)
            number = 0 if self._turn is None else self._turn.number
            out.append(Routed(event=unknown, stream=number))
            return
        out.extend(Routed(event=event, stream=turn.number) for event in events)

    def _partial(self, payload: dict[str, Any], events: list[Event]) -> Turn:
        text = payload.get("text")
        if type(text) is not str:
            raise RemoteProtocolError("transcript.partial has no string text")
        channel = self._channel(payload)
        final, speech_final = payload.get("is_final"), payload.get("speech_final")
        turn = self._running(events)
        index = self._utterance(turn, channel, events)
        if not (final is True or speech_final is True):
            events.append(Metadata(name="interim_transcript", value=text, extra=payload))
            return turn
        events.append(TextDelta(index=index, delta=self._joined(channel, text), extra=payload))
        at, duration = payload.get("start"), payload.get("duration")
        start = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None
        end = None
        if start is not None and isinstance(duration, int | float):
            end = start + float(duration)
        events.append(
            TranscriptSegment(
                index=index,
                text=text,
                start=start,
                end=end,
                speaker=_speaker(payload.get("words")),
                extra=IMPLICIT,
            )
        )
        if speech_final is True:
            turn.end(channel, events, status="completed")
            self._tail.pop(channel, None)
        return turn

    def _done(self, payload: dict[str, Any], events: list[Event]) -> Turn:
        text = payload.get("text", "")
        if type(text) is not str:
            raise RemoteProtocolError("transcript.done has a text that is not a string")
        turn = self._running(events)
        if text:
            channel = self._channel(payload)
            index = self._utterance(turn, channel, events)
            events.append(TextDelta(index=index, delta=self._joined(channel, text), extra=IMPLICIT))
        turn.end_all(events, status="completed")
        events.append(
            Finish(
                status="completed",
                reason=FinishReason(unified="stop", raw="transcript.done"),
                extra=payload,
            )
        )
        self._answered()
        return turn

    def _channel(self, payload: dict[str, Any]) -> int:
        channel = payload.get("channel_index", 0)
        if type(channel) is not int or channel < 0:
            raise RemoteProtocolError(f"channel_index {channel!r} is not a channel number")
        return channel

    def _utterance(self, turn: Turn, channel: int, events: list[Event]) -> int:
        if channel not in turn.open and len(turn.open) >= self.max_channels:
            raise BufferLimitExceeded(
                f"more than max_channels={self.max_channels} channels transcribed at once"
            )
        return turn.block(channel, "transcript", events)

    def _joined(self, channel: int, text: str) -> str:
        """``text`` as it continues the channel's utterance: after a space when neither
        side of the join has one."""
        tail = self._tail.get(channel)
        if text:
            self._tail[channel] = text[-1]
        if tail is None or not text or tail.isspace() or text[0].isspace():
            return text
        return " " + text

    def _running(self, events: list[Event]) -> Turn:
        if self._turn is None:
            self._turn = Turn(self._new_stream(), self.dialect, events)
        return self._turn

    def _answered(self) -> None:
        self._turn = None
        self._tail.clear()
        self._pending = max(self._pending - 1, 0)

    def _on_close(self, out: list[Routed]) -> None:
        waiting = self._pending
        if self._turn is not None:
            events: list[Event] = []
            self._turn.end_all(events)
            events.append(truncated(self.dialect, "the connection closed before transcript.done"))
            out.extend(Routed(event=event, stream=self._turn.number) for event in events)
            self._turn = None
            waiting -= 1
        for _ in range(max(waiting, 0)):
            events = []
            number = Turn(self._new_stream(), self.dialect, events).number
            events.append(truncated(self.dialect, "the connection closed before any transcript"))
            out.extend(Routed(event=event, stream=number) for event in events)
        self._pending = 0

    # -- writing -----------------------------------------------------------------------

    def send_audio(self, audio: bytes, *, chunk_ms: float | None = None) -> list[bytes]:
        """The audio (raw, in :attr:`input_format`) as bytes messages: one, or
        (``chunk_ms``) one per that many milliseconds, the last shorter.

        Raises:
            AudioError: ``audio`` is not whole frames of the input format.
            LocalProtocolError: ``chunk_ms`` holds no whole frame.
        """
        self.input_format.check(audio)
        if not audio:
            return []
        if chunk_ms is None:
            return [bytes(audio)]
        step = self.input_format.size_for(chunk_ms)
        if step <= 0:
            raise LocalProtocolError(
                f"chunk_ms={chunk_ms} holds no whole frame of {self.input_format.mime_type}",
                dialect=self.dialect,
            )
        return [bytes(audio[at : at + step]) for at in range(0, len(audio), step)]

    def commit_audio(self) -> list[str]:
        """``audio.done``: the turn's audio is over; the server answers with
        ``transcript.done`` (and a new turn may follow on the same connection).

        Raises:
            LocalProtocolError: ``max_pending`` turns wait already.
        """
        if self._pending >= self.max_pending:
            raise LocalProtocolError(
                f"max_pending={self.max_pending} turns wait already", dialect=self.dialect
            )
        self._pending += 1
        return [self._message({"type": "audio.done"})]

    def configure(self, *args: Any, **kwargs: Any) -> list[str]:
        """There is no configuration message: the parameters are the URL's query.

        Raises:
            LocalProtocolError: Always.
        """
        raise LocalProtocolError(
            "xai_stt is configured by its URL's query: give the parameters to the session "
            "and connect to its url",
            dialect=self.dialect,
        )


def _speaker(words: Any) -> str | None:
    """The speaker of every word, when the words (diarized) name one and the same."""
    if not isinstance(words, Sequence) or not words:
        return None
    speakers = {w.get("speaker") if isinstance(w, dict) else None for w in words}
    if len(speakers) != 1:
        return None
    speaker = speakers.pop()
    return speaker if isinstance(speaker, str) else None
