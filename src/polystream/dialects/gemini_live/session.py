"""The Gemini Live session, sans-I/O: the server's messages read as unified events, the
client's written by the commands (:mod:`.commands`).

A server message has no ``type``: it is an object of one or more keys
(:data:`~.wire.SERVER_KEYS`), read in a fixed order (a ``usageMetadata`` beside a
``turnComplete`` is read before it, so that the ``Finish`` carries it); its kind (the
``Raw`` event's name) is its first key. Text and binary frames both hold JSON. Each
model turn (from its first content to ``turnComplete``) is an ordinary unified stream:

* ``serverContent.modelTurn.parts``: ``text`` -> a ``text`` block, a ``thought`` part
  -> a ``reasoning`` block, ``inlineData`` -> an ``audio`` block (its format from the
  ``mimeType``, ``audio/pcm;rate=24000``), ``executableCode`` / ``codeExecutionResult``
  -> ``code`` / ``code_result`` blocks, any other part an ``other`` block holding it;
  a ``thoughtSignature`` -> a ``SignatureDelta``; consecutive parts of one kind extend
  one block;
* ``outputTranscription`` -> a ``transcript`` block of the turn;
* ``toolCall.functionCalls`` -> one whole ``tool_call`` block each (id, name, the
  ``args`` as one ``ToolInputDelta``); the turn goes on after the tool responses;
* ``groundingMetadata`` / ``urlContextMetadata`` -> ``Metadata`` ``grounding`` /
  ``url_context``; ``generationComplete`` -> ``StatusUpdate`` ``generation_complete``;
  ``waitingForInput`` -> ``StatusUpdate`` ``waiting_for_input``;
* ``usageMetadata`` -> ``UsageUpdate`` (the last one is the ``Finish``'s usage);
* ``turnComplete`` -> ``Finish`` (:func:`~.wire.finish_of` of ``turnCompleteReason``;
  ``interactionStatus`` kept in its ``extra``);
* ``interrupted`` (the user spoke over the turn) ends it at once: ``Finish``
  ``incomplete``, reason ``cancelled`` (raw ``interrupted``); the ``turnComplete`` that
  follows is a ``StatusUpdate`` ``turn_complete`` in stream 0.

Stream 0: ``setupComplete`` -> ``SessionUpdate`` ``created`` (its ``sessionId``; the
audio formats: 16 kHz PCM in, 24 kHz out); ``inputTranscription`` -> a ``transcript``
block (ended when ``finished``, or when the model's turn completes);
``interimInputTranscription`` -> ``Metadata`` ``interim_transcript``;
``voiceActivity`` / ``voiceActivityDetectionSignal`` -> ``Speech``; ``goAway`` ->
``Lifetime`` ``going_away`` (``time_left`` in seconds);
``sessionResumptionUpdate`` -> ``Resumption``; ``toolCallCancellation`` -> ``Metadata``
``tool_call_cancellation`` (in the turn while it runs). An unknown key passes through
as an ``Unknown`` event named by it (the message's text), as does an unknown key of
``serverContent`` (its value as JSON).

The connection reports its errors as close codes: :meth:`GeminiLiveSession.close_code`
reads one (1007, 1008, 1011, 1013: :data:`~.wire.CLOSE_ERRORS`) as an ``ErrorEvent``
and ends a running turn ``failed`` with it.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.audio.media_types import media_of_type
from polystream.dialects._realtime.session import Routed
from polystream.dialects.gemini_live.commands import Commands
from polystream.dialects.gemini_live.wire import CLOSE_ERRORS, SERVER_KEYS, finish_of, seconds_of
from polystream.dialects.gemini_live.wire import to_usage as usage_of
from polystream.errors import RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockKind,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    Lifetime,
    MediaInfo,
    Metadata,
    RealtimeEvent,
    ReasoningDelta,
    Resumption,
    SessionUpdate,
    SignatureDelta,
    Speech,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.ws import WSMessage

__all__ = ["GeminiLiveSession"]

_ENCODE: Final = msgspec.json.Encoder()
_INPUT_AUDIO: Final = MediaInfo(
    mime_type="audio/pcm;rate=16000", format="pcm", sample_rate=16000, channels=1
)
_OUTPUT_AUDIO: Final = MediaInfo(
    mime_type="audio/pcm;rate=24000", format="pcm", sample_rate=24000, channels=1
)
_CONTENT_KEYS: Final = frozenset(
    {
        "modelTurn",
        "turnComplete",
        "turnCompleteReason",
        "interactionStatus",
        "interrupted",
        "generationComplete",
        "waitingForInput",
        "inputTranscription",
        "interimInputTranscription",
        "outputTranscription",
        "groundingMetadata",
        "urlContextMetadata",
    }
)
_ORDER: Final = (
    "setupComplete",
    "serverContent",  # (a usageMetadata beside it is read before its turnComplete)
    "usageMetadata",
    "toolCall",
    "toolCallCancellation",
    "voiceActivityDetectionSignal",
    "voiceActivity",
    "goAway",
    "sessionResumptionUpdate",
)
"""The order the keys of one message are read in."""
_SPEECH: Final = {
    "VAD_SIGNAL_TYPE_SOS": "started",
    "VAD_SIGNAL_TYPE_EOS": "stopped",
    "ACTIVITY_START": "started",
    "ACTIVITY_END": "stopped",
}
_PART_KINDS: Final[tuple[tuple[str, BlockKind], ...]] = (
    ("executableCode", "code"),
    ("codeExecutionResult", "code_result"),
)


class _Turn:
    """The model turn being read."""

    __slots__ = ("blocks", "open", "stream", "tool_calls", "transcript", "usage")

    def __init__(self, stream: int) -> None:
        self.stream = stream
        self.blocks = 0
        self.open: tuple[int, str] | None = None  # the block parts extend: (index, kind)
        self.transcript: int | None = None  # the output transcript's block
        self.tool_calls = False  # the last block was a tool call
        self.usage: Usage | None = None


class GeminiLiveSession(Commands):
    """A Gemini Live session (see the module docstring; bound by ``binding.py``).

    Attributes:
        session_id: The ``setupComplete``'s ``sessionId``, once known.
        handle: The latest resumption handle the server gave while the session was
            resumable (what resumes it).

    Args:
        model: The model the setup names (``gemini-live-2.5-flash-preview``, with or
            without ``models/``), when the setup is written by the first command.
        **options: See :class:`~polystream.dialects._realtime.session.RealtimeSession`.
    """

    def __init__(self, *, model: str | None = None, **options: Any) -> None:
        super().__init__(model=model, **options)
        self.session_id: str | None = None
        self.handle: str | None = None
        self._turn: _Turn | None = None
        self._interrupted = False  # the last turn was interrupted (its turnComplete is due)
        self._heard: int | None = None  # stream 0's open input transcript block
        self._beside: dict[str, Any] | None = None  # the message's usageMetadata, unread
        self._blocks = 0  # stream 0's block indexes

    # -- reading -----------------------------------------------------------------------

    def _kind_of(self, payload: dict[str, Any]) -> str:
        for key in payload:
            return key
        raise RemoteProtocolError("message is an empty object")

    def _on_message(
        self, read: WSMessage, payload: dict[str, Any], kind: str, out: list[Routed]
    ) -> None:
        unknown = any(key not in SERVER_KEYS for key in payload)
        beside = payload.get("usageMetadata")
        self._beside = beside if isinstance(beside, dict) else None
        for key in _ORDER:
            if key not in payload or (key == "usageMetadata" and self._beside is None):
                continue
            value = payload[key]
            if not isinstance(value, dict):
                raise RemoteProtocolError(f"{key} is a JSON {type(value).__name__}, not an object")
            getattr(self, f"_on_{key}")(value, out)
        if unknown:
            names = [key for key in payload if key not in SERVER_KEYS]
            out.append(Routed(event=self._unknown(read, ",".join(names))))

    def _emit(self, event: RealtimeEvent, out: list[Routed], stream: int = 0) -> None:
        out.append(Routed(event=event, stream=stream))

    def _on_setupComplete(self, value: dict[str, Any], out: list[Routed]) -> None:
        sid = value.get("sessionId")
        self.session_id = sid if isinstance(sid, str) else None
        self._emit(
            SessionUpdate(
                status="created",
                id=self.session_id,
                model=self.model,
                config=value,
                input_audio=_INPUT_AUDIO,
                output_audio=_OUTPUT_AUDIO,
            ),
            out,
        )

    def _on_goAway(self, value: dict[str, Any], out: list[Routed]) -> None:
        self._emit(
            Lifetime(
                state="going_away",
                reason="goAway",
                max_duration=self.spec.max_duration,
                time_left=seconds_of(value.get("timeLeft")),
                extra=value or None,
            ),
            out,
        )

    def _on_sessionResumptionUpdate(self, value: dict[str, Any], out: list[Routed]) -> None:
        handle = value.get("newHandle")
        handle = handle if isinstance(handle, str) and handle else None
        resumable = value.get("resumable") is True
        index = value.get("lastConsumedClientMessageIndex")
        if resumable and handle is not None:
            self.handle = handle
        last = int(index) if isinstance(index, int | str) and str(index).isdigit() else None
        self._emit(Resumption(handle=handle, resumable=resumable, last_consumed=last), out)

    def _on_voiceActivityDetectionSignal(self, value: dict[str, Any], out: list[Routed]) -> None:
        state = _SPEECH.get(value.get("vadSignalType"))  # type: ignore[arg-type]
        if state is not None:
            self._emit(Speech(state=state), out)  # type: ignore[arg-type]

    def _on_voiceActivity(self, value: dict[str, Any], out: list[Routed]) -> None:
        state = _SPEECH.get(value.get("voiceActivityType"))  # type: ignore[arg-type]
        if state is not None:
            offset = seconds_of(value.get("audioOffset"))
            start = round(offset * 1000) if offset is not None else None
            self._emit(Speech(state=state, start_ms=start), out)  # type: ignore[arg-type]

    def _on_usageMetadata(self, value: dict[str, Any], out: list[Routed]) -> None:
        usage = usage_of(value)
        turn = self._turn
        if turn is not None:
            turn.usage = usage if turn.usage is None else turn.usage.merged(usage)
        self._emit(UsageUpdate(usage=usage), out, turn.stream if turn is not None else 0)

    def _on_toolCallCancellation(self, value: dict[str, Any], out: list[Routed]) -> None:
        stream = self._turn.stream if self._turn is not None else 0
        self._emit(Metadata(name="tool_call_cancellation", value=value), out, stream)

    def _on_toolCall(self, value: dict[str, Any], out: list[Routed]) -> None:
        calls = value.get("functionCalls", [])
        if not isinstance(calls, list):
            raise RemoteProtocolError("toolCall.functionCalls is not a list")
        if not calls:
            return
        turn = self._running(out)
        self._end_block(turn, out)
        for call in calls:
            if not isinstance(call, dict):
                raise RemoteProtocolError("toolCall.functionCalls has an entry that is no object")
            ident, name = call.get("id"), call.get("name")
            ident = ident if isinstance(ident, str) else None
            name = name if isinstance(name, str) else None
            if ident is not None and name is not None:
                self._remember(ident, name)
            index = self._block(turn, "tool_call", out, id=ident, call_id=ident, name=name)
            args = call.get("args", {})
            self._emit(
                ToolInputDelta(index=index, delta=_ENCODE.encode(args).decode()), out, turn.stream
            )
            self._emit(BlockEnd(index=index), out, turn.stream)
        turn.tool_calls = bool(calls)

    def _on_serverContent(self, value: dict[str, Any], out: list[Routed]) -> None:
        for key, field in value.items():
            if key not in _CONTENT_KEYS:
                raw = _ENCODE.encode(field).decode()
                name = f"serverContent.{key}"
                if self.strict:
                    raise RemoteProtocolError(f"unknown field {name!r}")
                stream = self._turn.stream if self._turn is not None else 0
                self._emit(Unknown(name=name, data=raw), out, stream)
        heard = value.get("inputTranscription")
        if isinstance(heard, dict):
            self._input_transcript(heard, out)
        interim = value.get("interimInputTranscription")
        if isinstance(interim, dict):
            self._emit(Metadata(name="interim_transcript", value=interim), out)
        model_turn = value.get("modelTurn")
        if isinstance(model_turn, dict):
            parts = model_turn.get("parts", [])
            if not isinstance(parts, list):
                raise RemoteProtocolError("serverContent.modelTurn.parts is not a list")
            turn = self._running(out)
            for part in parts:
                if not isinstance(part, dict):
                    raise RemoteProtocolError("a modelTurn part is no object")
                self._part(turn, part, out)
        said = value.get("outputTranscription")
        if isinstance(said, dict) and isinstance(said.get("text"), str):
            turn = self._running(out)
            if turn.transcript is None:
                turn.transcript = self._new_index(turn)
                self._emit(BlockStart(index=turn.transcript, kind="transcript"), out, turn.stream)
            self._emit(TextDelta(index=turn.transcript, delta=said["text"]), out, turn.stream)
        for key, name in (
            ("groundingMetadata", "grounding"),
            ("urlContextMetadata", "url_context"),
        ):
            if isinstance(value.get(key), dict):
                turn = self._running(out)
                self._emit(Metadata(name=name, value=value[key]), out, turn.stream)
        for key, status in (
            ("generationComplete", "generation_complete"),
            ("waitingForInput", "waiting_for_input"),
        ):
            if value.get(key) is True:
                stream = self._turn.stream if self._turn is not None else 0
                self._emit(StatusUpdate(status=status), out, stream)
        if value.get("interrupted") is True:
            if self._turn is not None:
                self._finish(self._turn, out, interrupted=True)
                self._interrupted = True
            else:
                self._emit(StatusUpdate(status="interrupted"), out)
        if value.get("turnComplete") is True:
            if self._beside is not None:  # the turn's usage, in the same message
                self._on_usageMetadata(self._beside, out)
                self._beside = None
            self._end_heard(out)
            extra: dict[str, Any] = {
                key: value[key]
                for key in ("turnCompleteReason", "interactionStatus")
                if key in value
            }
            if self._turn is not None:
                self._finish(
                    self._turn, out, reason=value.get("turnCompleteReason"), extra=extra or None
                )
            elif not self._interrupted:
                # A turn without content (a reply with nothing to say).
                self._finish(self._running(out), out, reason=value.get("turnCompleteReason"))
            else:
                self._emit(StatusUpdate(status="turn_complete", extra=extra or None), out)
            self._interrupted = False

    # -- the parts of a model turn -------------------------------------------------------

    def _running(self, out: list[Routed]) -> _Turn:
        """The model turn being read (started by this content if none)."""
        if self._turn is None:
            self._turn = _Turn(self._new_stream())
            self._interrupted = False
            self._emit(StreamStart(dialect=self.dialect, model=self.model), out, self._turn.stream)
        return self._turn

    def _new_index(self, turn: _Turn) -> int:
        turn.blocks += 1
        return turn.blocks - 1

    def _block(self, turn: _Turn, kind: BlockKind, out: list[Routed], **fields: Any) -> int:
        index = self._new_index(turn)
        self._emit(BlockStart(index=index, kind=kind, **fields), out, turn.stream)
        return index

    def _end_block(self, turn: _Turn, out: list[Routed]) -> None:
        if turn.open is not None:
            self._emit(BlockEnd(index=turn.open[0]), out, turn.stream)
            turn.open = None

    def _extend(self, turn: _Turn, kind: str, out: list[Routed], **fields: Any) -> int:
        """The open block of ``kind`` (``kind`` with a media type for audio), opened."""
        if turn.open is not None and turn.open[1] == kind:
            return turn.open[0]
        self._end_block(turn, out)
        block: BlockKind = "audio" if kind.startswith("audio:") else kind  # type: ignore[assignment]
        index = self._block(turn, block, out, **fields)
        turn.open = (index, kind)
        turn.tool_calls = False
        return index

    def _part(self, turn: _Turn, part: dict[str, Any], out: list[Routed]) -> None:
        stream = turn.stream
        index: int | None = None
        if isinstance(part.get("text"), str):
            if part.get("thought") is True:
                index = self._extend(turn, "reasoning", out)
                self._emit(ReasoningDelta(index=index, delta=part["text"]), out, stream)
            else:
                index = self._extend(turn, "text", out)
                self._emit(TextDelta(index=index, delta=part["text"]), out, stream)
        elif isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            mime = data.get("mimeType")
            mime = mime if isinstance(mime, str) else None
            index = self._extend(turn, f"audio:{mime}", out, media=media_of_type(mime))
            payload = data.get("data")
            if not isinstance(payload, str):
                raise RemoteProtocolError("an inlineData part has no string data")
            self._emit(DataDelta(index=index, delta=payload, mime_type=mime), out, stream)
        else:
            for key, kind in _PART_KINDS:
                if isinstance(part.get(key), dict):
                    self._end_block(turn, out)
                    index = self._block(turn, kind, out, value=part[key])
                    break
            else:
                self._end_block(turn, out)
                index = self._block(turn, "other", out, name="part", value=part)
            signature = part.get("thoughtSignature")
            if isinstance(signature, str):
                self._emit(SignatureDelta(index=index, delta=signature), out, stream)
            self._emit(BlockEnd(index=index), out, stream)
            turn.tool_calls = False
            return
        signature = part.get("thoughtSignature")
        if isinstance(signature, str):
            self._emit(SignatureDelta(index=index, delta=signature), out, stream)

    def _finish(
        self,
        turn: _Turn,
        out: list[Routed],
        *,
        reason: Any = None,
        interrupted: bool = False,
        error: ErrorInfo | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self._end_block(turn, out)
        if turn.transcript is not None:
            self._emit(BlockEnd(index=turn.transcript), out, turn.stream)
        if error is not None:
            status, why = "failed", FinishReason(unified="error", raw=error.code)
        else:
            status, why = finish_of(reason, tool_calls=turn.tool_calls, interrupted=interrupted)
        self._emit(
            Finish(status=status, reason=why, usage=turn.usage, error=error, extra=extra),  # type: ignore[arg-type]
            out,
            turn.stream,
        )
        self._turn = None

    def _input_transcript(self, heard: dict[str, Any], out: list[Routed]) -> None:
        text = heard.get("text")
        if self._heard is None and isinstance(text, str):
            self._heard = self._blocks
            self._blocks += 1
            self._emit(BlockStart(index=self._heard, kind="transcript", name="input"), out)
        if self._heard is not None and isinstance(text, str):
            self._emit(TextDelta(index=self._heard, delta=text), out)
        if heard.get("finished") is True:
            self._end_heard(out)

    def _end_heard(self, out: list[Routed]) -> None:
        if self._heard is not None:
            self._emit(BlockEnd(index=self._heard), out)
            self._heard = None

    # -- the connection's end ------------------------------------------------------------

    def close_code(self, code: int, reason: str = "") -> list[Routed]:
        known = CLOSE_ERRORS.get(code)
        if known is None:
            return []
        kind, retryable = known
        error = ErrorInfo(
            kind=kind,  # type: ignore[arg-type]
            message=reason or f"the connection closed with code {code}",
            retryable=retryable,
            code=str(code),
            dialect=self.dialect,
        )
        out: list[Routed] = []
        if self._turn is not None:
            self._emit(ErrorEvent(error=error), out, self._turn.stream)
            self._finish(self._turn, out, error=error)
        else:
            self._emit(ErrorEvent(error=error), out)
        return out

    def _on_close(self, out: list[Routed]) -> None:
        self._end_heard(out)
        turn = self._turn
        if turn is None:
            return
        self._end_block(turn, out)
        if turn.transcript is not None:
            self._emit(BlockEnd(index=turn.transcript), out, turn.stream)
        error = ErrorInfo(
            kind="truncated", message="the connection closed before the turn completed"
        )
        self._emit(
            Finish(
                status="truncated",
                reason=FinishReason(unified="error"),
                usage=turn.usage,
                error=error,
            ),
            out,
            turn.stream,
        )
        self._turn = None
        self._interrupted = False
