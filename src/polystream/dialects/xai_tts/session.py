"""The xAI text-to-speech session: text in, each utterance's audio out as a unified
stream.

The client sends ``text.delta`` (``{"delta": text}``) as the text comes, ``text.done``
to have what it sent spoken (an utterance), ``text.clear`` to drop what is being
spoken (barge-in, without reconnecting). The server answers each utterance with
``audio.delta`` messages (``{"delta": base64}``, timestamps with them when asked for)
and an ``audio.done``; ``audio.clear`` acknowledges a ``text.clear``; ``error``
(``{"message"}``) reports a failure.

Each utterance's audio is a stream (dialect ``xai_tts``): ``StreamStart`` and the
``audio`` block (its ``media`` the connection's codec and rate) open with its first
message (implicit), an ``audio.delta`` is a ``DataDelta`` (base64 as sent), an
``audio.done`` ends the block and the stream (``Finish`` completed, ``stop``). An
``audio.clear`` ends the running utterance ``incomplete`` (``cancelled``); with none
running it is a status update of the session's. An ``error`` ends the running
utterance ``failed``, or, with none running but one asked for, is that utterance's
stream; else it is the session's. A connection that closes ends the running utterance,
and each one asked for and not answered, ``truncated``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from polystream.audio.formats import AudioFormat
from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._xai_voice.common import (
    build_url,
    media_of,
    raw_format,
    truncated,
    voice_error,
)
from polystream.dialects._xai_voice.turn import IMPLICIT, Turn
from polystream.dialects.xai_tts.query import tts_query
from polystream.dialects.xai_tts.spec import SPEC
from polystream.errors import LocalProtocolError, RemoteProtocolError
from polystream.events import (
    DataDelta,
    ErrorEvent,
    Event,
    Finish,
    FinishReason,
    MediaInfo,
    StatusUpdate,
)
from polystream.wire.ws import WSMessage

__all__ = ["TTSSession"]

_AUDIO = "audio"  # the key of a turn's one block


class TTSSession(RealtimeSession):
    """An xAI text-to-speech WebSocket session.

    Args:
        voice, language, output, codec, sample_rate, speed,
            optimize_streaming_latency, text_normalization, with_timestamps, extra_query:
            The connection's parameters (see :func:`.query.tts_query`): they make
            :attr:`url`, and the audio's format.
        max_pending: Most utterances asked for and not yet answered.
        **options: See :class:`~polystream.dialects._realtime.session.RealtimeSession`.

    Raises:
        LocalProtocolError: A parameter :func:`.query.tts_query` refuses.
    """

    dialect: ClassVar[str] = "xai_tts"
    spec: ClassVar[SocketSpec] = SPEC

    def __init__(
        self,
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
        extra_query: dict[str, Any] | None = None,
        max_pending: int = 1024,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.query = tts_query(
            voice=voice,
            language=language,
            output=output,
            codec=codec,
            sample_rate=sample_rate,
            speed=speed,
            optimize_streaming_latency=optimize_streaming_latency,
            text_normalization=text_normalization,
            with_timestamps=with_timestamps,
            extra=extra_query,
        )
        """The connection's query parameters, as text."""
        name = self.query.get("codec")
        rate = int(self.query["sample_rate"]) if "sample_rate" in self.query else None
        self.output_media: MediaInfo | None = None if name is None else media_of(name, rate)
        """What the audio blocks hold, as far as the parameters state it (None: the
        service's default codec)."""
        self.output_format: AudioFormat | None = None if name is None else raw_format(name, rate)
        """The audio's raw format (PCM, μ-law, A-law at a stated rate), else None."""
        self.max_pending = max_pending
        self._pending = 0
        self._turn: Turn | None = None

    @property
    def url(self) -> str:
        """The URL to connect to (the endpoint and :attr:`query`)."""
        return build_url(SPEC.url, self.query)

    @property
    def pending(self) -> int:
        """Utterances asked for (``text.done`` sent) and not yet answered."""
        return self._pending

    # -- reading -----------------------------------------------------------------------

    def _on_message(
        self, read: WSMessage, payload: dict[str, Any], kind: str, out: list[Routed]
    ) -> None:
        turn = self._turn
        events: list[Event] = []
        if kind == "audio.delta":
            delta = payload.get("delta")
            if type(delta) is not str:
                raise RemoteProtocolError("audio.delta has no string delta")
            turn = self._running(events)
            index = turn.block(_AUDIO, "audio", events, media=self.output_media)
            events.append(DataDelta(index=index, delta=delta, extra=payload))
        elif kind == "audio.done":
            turn = self._running(events)
            turn.end(_AUDIO, events)
            events.append(
                Finish(
                    status="completed",
                    reason=FinishReason(unified="stop", raw=kind),
                    extra=payload,
                )
            )
            self._answered()
        elif kind == "audio.clear":
            self._pending = 0
            if turn is None:
                out.append(Routed(event=StatusUpdate(status=kind, extra=payload)))
                return
            turn.end(_AUDIO, events)
            events.append(
                Finish(
                    status="incomplete",
                    reason=FinishReason(unified="cancelled", raw=kind),
                    extra=payload,
                )
            )
            self._turn = None
        elif kind == "error":
            info = voice_error(payload, output_started=turn is not None)
            if turn is None and not self._pending:
                out.append(Routed(event=ErrorEvent(error=info, extra=payload)))
                return
            turn = self._running(events)
            events.append(ErrorEvent(error=info, extra=payload))
            turn.end(_AUDIO, events)
            events.append(
                Finish(
                    status="failed",
                    reason=FinishReason(unified="error", raw=kind),
                    error=info,
                    extra=IMPLICIT,
                )
            )
            self._answered()
        else:
            unknown = self._unknown(read, kind)
            out.append(Routed(event=unknown, stream=0 if turn is None else turn.number))
            return
        out.extend(Routed(event=event, stream=turn.number) for event in events)

    def _running(self, events: list[Event]) -> Turn:
        if self._turn is None:
            self._turn = Turn(self._new_stream(), self.dialect, events)
        return self._turn

    def _answered(self) -> None:
        self._turn = None
        self._pending = max(self._pending - 1, 0)

    def _on_close(self, out: list[Routed]) -> None:
        waiting = self._pending
        if self._turn is not None:
            events: list[Event] = []
            self._turn.end(_AUDIO, events)
            events.append(truncated(self.dialect, "the connection closed before audio.done"))
            out.extend(Routed(event=event, stream=self._turn.number) for event in events)
            self._turn = None
            waiting -= 1
        for _ in range(max(waiting, 0)):
            events = []
            number = Turn(self._new_stream(), self.dialect, events).number
            events.append(truncated(self.dialect, "the connection closed before any audio"))
            out.extend(Routed(event=event, stream=number) for event in events)
        self._pending = 0

    # -- writing -----------------------------------------------------------------------

    def send_text(self, text: str, *, flush: bool = True) -> list[str]:
        """A ``text.delta`` of ``text``, then (``flush``) a ``text.done``: the text
        sent so far is spoken as one utterance.

        Raises:
            LocalProtocolError: ``max_pending`` utterances wait already.
        """
        out = [self._message({"type": "text.delta", "delta": text})]
        if flush:
            out += self.flush()
        return out

    def flush(self) -> list[str]:
        """A ``text.done``: speak the text sent since the last one.

        Raises:
            LocalProtocolError: ``max_pending`` utterances wait already.
        """
        if self._pending >= self.max_pending:
            raise LocalProtocolError(
                f"max_pending={self.max_pending} utterances wait already", dialect=self.dialect
            )
        self._pending += 1
        return [self._message({"type": "text.done"})]

    def cancel(self) -> list[str]:
        """A ``text.clear``: drop the text and audio under way (barge-in); the server
        acknowledges with ``audio.clear``."""
        return [self._message({"type": "text.clear"})]
