"""The Realtime API session: OpenAI's vocabulary (GA, and the retired beta names),
shared by the families that speak it (``openai_realtime``, ``xai_realtime``), sans-I/O.

Each response (``response.created`` ... ``response.done``) is a unified stream of its
own (:mod:`.reply`), numbered in order of creation; the server's messages name their
response (``response_id``, or the item or function call they name). What belongs to no
response is stream 0:

* ``session.created`` / ``session.updated`` -> :class:`~polystream.events.SessionUpdate`
  (the audio formats read from it);
* ``input_audio_buffer.speech_started`` / ``speech_stopped`` / ``timeout_triggered`` ->
  :class:`~polystream.events.Speech`; ``committed`` / ``cleared`` and the conversation's
  news (``conversation.item.*``, ``conversation.created``) -> status updates named by
  the message type; a DTMF key -> :class:`~polystream.events.Metadata` ``dtmf``;
* the input audio's transcription -> one ``transcript`` block per item and content
  index (``TextDelta``, ``TranscriptSegment``, its usage, its end; xAI's ``updated``, the
  transcript so far, a ``Metadata`` ``interim_transcript``);
* ``ping`` (xAI) -> :class:`~polystream.events.KeepAlive`;
* ``rate_limits.updated`` -> :class:`~polystream.events.RateLimits`;
* ``error`` -> :class:`~polystream.events.ErrorEvent`; the codes that end the session
  (:attr:`RealtimeAPISession.expiry`) -> :class:`~polystream.events.Lifetime`
  ``expired``.

A message under an older name (:attr:`RealtimeAPISession.aliases`: the retired beta's
``response.audio.delta``, ``response.text.delta``, ``transcription_session.updated``, ...)
is read as the message that replaced it; its carrier event's ``extra`` keeps the message
as sent and adds ``"retired_beta"``: the current name (not a native field).

Barge-in: the session counts the audio received for each assistant item;
:meth:`RealtimeAPISession.barge_in` gives the ``conversation.item.truncate`` (at what
was played, clamped to what was received) and the ``response.cancel`` (only while the
response runs).

A family binds the class with its name, its :class:`~polystream.dialects._socket_spec.
SocketSpec` and the class attributes that say how it differs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import msgspec

from polystream.audio.formats import AudioFormat
from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.dialects._realtime_api.audio_format import DEFAULT_FORMAT, media_info, read_format
from polystream.dialects._realtime_api.commands import Commands, Transport
from polystream.dialects._realtime_api.perform import Performs
from polystream.dialects._realtime_api.reply import IMPLICIT, Reply
from polystream.dialects._realtime_api.usage import to_usage
from polystream.dialects._realtime_api.wire import (
    BETA_SERVER,
    CONVERSATION,
    INPUT_BUFFER,
    OUTPUT_BUFFER,
    SERVER_MESSAGES,
)
from polystream.dialects._responses.errors import error_info
from polystream.errors import BufferLimitExceeded, EventOrderError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    Lifetime,
    Metadata,
    RateLimit,
    RateLimits,
    RealtimeEvent,
    SessionUpdate,
    Speech,
    StatusUpdate,
    TextDelta,
    TranscriptSegment,
    UsageUpdate,
)
from polystream.wire.ws import WSMessage

__all__ = ["RealtimeAPISession"]

_SPEECH: Final = {
    "input_audio_buffer.speech_started": "started",
    "input_audio_buffer.speech_stopped": "stopped",
    "input_audio_buffer.timeout_triggered": "timeout",
}
_TRANSCRIPTION: Final = "conversation.item.input_audio_transcription."


class _Audio:
    """Output audio received for one assistant item (for barge-in)."""

    __slots__ = ("content_index", "response_id", "size", "truncated")

    def __init__(self, response_id: str, content_index: int) -> None:
        self.response_id = response_id
        self.content_index = content_index
        self.size = 0
        self.truncated = False


class RealtimeAPISession(Commands, Performs, RealtimeSession):
    """A session of the Realtime API's vocabulary (bound by a family's ``binding.py``).

    Class attributes (what a family binds):
        server_messages: The server messages the family has (any other is unknown).
        aliases: Older message names -> the current one they are read as.
        expiry: The error codes (or types) that say the session reached its maximum
            duration.
        route_to_running: A response message that names no response, item or call
            belongs to the newest response running (else it is an error).

    Args:
        max_responses: Most responses running at once (in-band and out-of-band); one
            more is a :class:`~polystream.errors.BufferLimitExceeded`.
        max_items: Most items remembered (for routing MCP messages, for barge-in, for
            open transcriptions); the oldest are forgotten.
        **options: See :class:`~polystream.dialects._realtime.session.RealtimeSession`.
    """

    server_messages: ClassVar[frozenset[str]] = SERVER_MESSAGES
    aliases: ClassVar[Mapping[str, str]] = BETA_SERVER
    expiry: ClassVar[frozenset[str]] = frozenset({"session_expired"})
    route_to_running: ClassVar[bool] = False

    def __init__(self, *, max_responses: int = 16, max_items: int = 256, **options: Any) -> None:
        super().__init__(**options)
        self.max_responses = max_responses
        self.max_items = max_items
        self.session_id: str | None = None
        self.conversation_id: str | None = None
        self.input_format: AudioFormat = DEFAULT_FORMAT
        self.output_format: AudioFormat = DEFAULT_FORMAT
        self.input_transport = "json"
        self.output_transport: Transport = "json"
        self._output_media = media_info(DEFAULT_FORMAT)
        self._replies: dict[str, tuple[int, Reply]] = {}  # running, by response id
        self._item_reply: OrderedDict[str, str] = OrderedDict()  # item -> response id
        self._call_reply: OrderedDict[str, str] = OrderedDict()  # call id -> response id
        self._audio: OrderedDict[str, _Audio] = OrderedDict()  # assistant audio items
        self._playing: str | None = None  # the item whose audio came last
        self._transcripts: dict[tuple[str, int], int] = {}  # open: (item, index) -> block
        self._blocks = 0  # stream 0's block indexes

    # -- state -------------------------------------------------------------------------

    @property
    def audio_formats(self) -> tuple[AudioFormat | None, AudioFormat | None]:
        return self.input_format, self.output_format

    @property
    def active_responses(self) -> list[str]:
        """The ids of the responses running, oldest first."""
        return list(self._replies)

    def received_ms(self, item_id: str | None = None) -> float:
        """Milliseconds of output audio received for an item (by default the one whose
        audio came last), from its size and the session's output format."""
        state = self._audio.get(item_id or self._playing or "")
        return self.output_format.duration_ms(state.size) if state is not None else 0.0

    def barge_in(self, played_ms: float | None = None, *, item_id: str | None = None) -> list[str]:
        """The messages that stop the assistant when the user speaks over it: a
        ``conversation.item.truncate`` of the item being played (by default the one
        whose audio came last) at ``played_ms``, clamped to the audio received for it
        (all of it when ``played_ms`` is None), unless no audio of it was received or
        it was cut already; then a ``response.cancel`` of its response, only while that
        response runs (without a known item: the newest response running, if any).
        """
        target = item_id or self._playing
        state = self._audio.get(target) if target is not None else None
        out: list[str] = []
        if target is not None and state is not None and state.size and not state.truncated:
            received = self.output_format.duration_ms(state.size)
            end = received if played_ms is None else min(max(played_ms, 0.0), received)
            out += self.truncate(target, int(end), content_index=state.content_index)
            state.truncated = True
        running = None
        if state is not None:
            running = state.response_id if state.response_id in self._replies else None
        elif self._replies:
            running = next(reversed(self._replies))
        if running is not None:
            out += self.cancel(running)
        return out

    # -- reading -----------------------------------------------------------------------

    def _on_message(
        self, read: WSMessage, payload: dict[str, Any], kind: str, out: list[Routed]
    ) -> None:
        if kind in self.aliases:
            kind = self.aliases[kind]
            payload = {**payload, "retired_beta": kind}
        elif kind not in self.server_messages:
            # Unknown: passed through, in the stream of the response it names.
            rid = payload.get("response_id")
            running = self._replies.get(rid) if isinstance(rid, str) else None
            event = self._unknown(read, kind)
            if running is None:
                out.append(Routed(event=event))
            else:
                out.append(Routed(event=event, stream=running[0], response_id=rid))
            return
        if kind.startswith("session."):
            self._session(payload, kind, out)
        elif kind == "response.created":
            self._created(payload, out)
        elif kind.startswith("response.") or kind in OUTPUT_BUFFER:
            self._reply_message(payload, kind, out)
        elif kind.startswith("mcp_list_tools."):
            item = payload.get("item_id")
            if isinstance(item, str) and item in self._item_reply:
                self._reply_message(payload, kind, out)
            else:
                self._session_event(StatusUpdate(status=kind, extra=payload), out)
        elif kind in _SPEECH:
            self._speech(payload, kind, out)
        elif kind.startswith(_TRANSCRIPTION):
            self._transcription(payload, kind[len(_TRANSCRIPTION) :], out)
        elif kind in CONVERSATION or kind in INPUT_BUFFER:
            if kind == "conversation.item.truncated":
                cut = self._audio.get(payload.get("item_id"))  # type: ignore[arg-type]
                if cut is not None:
                    cut.truncated = True  # (cut by a truncate sent without barge_in)
            elif kind == "conversation.created":
                conversation = payload.get("conversation")
                cid = conversation.get("id") if isinstance(conversation, dict) else None
                if isinstance(cid, str):
                    self.conversation_id = cid
            self._session_event(StatusUpdate(status=kind, extra=payload), out)
        elif kind == "input_audio_buffer.dtmf_event_received":
            self._session_event(
                Metadata(name="dtmf", value=payload.get("event"), extra=payload), out
            )
        elif kind == "rate_limits.updated":
            self._rate_limits(payload, out)
        elif kind == "ping":
            self._session_event(KeepAlive(name=kind, extra=payload), out)
        else:
            assert kind == "error"
            self._error(payload, out)

    def _session_event(self, event: RealtimeEvent, out: list[Routed]) -> None:
        out.append(Routed(event=event))

    def _session(self, payload: dict[str, Any], kind: str, out: list[Routed]) -> None:
        session = payload.get("session")
        if not isinstance(session, dict):
            raise RemoteProtocolError(f"{kind} has no session object")
        self._configured(session)
        found = read_format(session, "input")
        inp = media_info(*found) if found is not None else None
        if found is not None:
            self.input_format = found[0]
        found = read_format(session, "output")
        outp = media_info(*found) if found is not None else None
        if found is not None and outp is not None:
            self.output_format = found[0]
            self._output_media = outp
        sid = session.get("id")
        if isinstance(sid, str):
            self.session_id = sid
        model = session.get("model")
        self._session_event(
            SessionUpdate(
                status=kind[len("session.") :],
                id=sid if isinstance(sid, str) else None,
                model=model if isinstance(model, str) else None,
                config=session,
                input_audio=inp,
                output_audio=outp,
                extra=payload,
            ),
            out,
        )

    def _configured(self, session: dict[str, Any]) -> None:
        """A configuration the client sent or the server stated: the audio transports
        (xAI's ``audio.input.transport`` / ``audio.output.transport``)."""
        audio = session.get("audio")
        for side in ("input", "output"):
            config = audio.get(side) if isinstance(audio, dict) else None
            transport = config.get("transport") if isinstance(config, dict) else None
            if transport in ("json", "binary"):
                if side == "input":
                    self.input_transport = transport
                else:
                    self.output_transport = transport

    # -- responses ---------------------------------------------------------------------

    def _created(self, payload: dict[str, Any], out: list[Routed]) -> None:
        response = payload.get("response")
        rid = response.get("id") if isinstance(response, dict) else None
        if not isinstance(rid, str):
            raise RemoteProtocolError("response.created has no response id")
        if rid in self._replies:
            raise EventOrderError(f"response {rid} created twice")
        if len(self._replies) >= self.max_responses:
            raise BufferLimitExceeded(
                f"more than max_responses={self.max_responses} responses running"
            )
        reply = Reply(self.dialect, rid)
        number = self._new_stream()
        self._replies[rid] = (number, reply)
        events: list[Event] = []
        reply.start(payload, events)
        self._emit(number, rid, events, out)

    def _route(self, payload: dict[str, Any], kind: str) -> Any:
        """The id of the response a message belongs to: the one it names, else the one
        that added the item or function call it names (else, for a family that routes
        so, the newest running)."""
        if kind == "response.done":
            response = payload.get("response")
            return response.get("id") if isinstance(response, dict) else None
        rid = payload.get("response_id")
        if rid is None:
            rid = self._item_reply.get(payload.get("item_id"))  # type: ignore[arg-type]
        if rid is None:
            rid = self._call_reply.get(payload.get("call_id"))  # type: ignore[arg-type]
        if rid is None and self.route_to_running and self._replies:
            rid = next(reversed(self._replies))
        return rid

    def _reply_message(self, payload: dict[str, Any], kind: str, out: list[Routed]) -> None:
        rid = self._route(payload, kind)
        running = self._replies.get(rid) if isinstance(rid, str) else None
        if running is None:
            raise EventOrderError(f"{kind} for response {rid!r}, which is not running")
        assert isinstance(rid, str)
        number, reply = running
        events: list[Event] = []
        reply.handle(kind, payload, self._output_media, events)
        if kind == "response.output_item.added":
            for item in reply.item_ids:
                self._remember(self._item_reply, item, rid)
            for call in reply.call_ids:
                self._remember(self._call_reply, call, rid)
        elif kind == "response.output_audio.delta":
            ci = payload.get("content_index")
            self._count_audio(
                rid, payload["item_id"], ci if type(ci) is int else 0, _b64_size(payload["delta"])
            )
        if reply.finished:
            self._forget(rid, reply)
        self._emit(number, rid, events, out)

    def _forget(self, rid: str, reply: Reply) -> None:
        del self._replies[rid]
        for item in reply.item_ids:
            self._item_reply.pop(item, None)
        for call in reply.call_ids:
            self._call_reply.pop(call, None)

    def _on_data(self, read: WSMessage, data: bytes, out: list[Routed]) -> None:
        """A binary message: output audio (xAI's ``transport: binary``), for the newest
        response running (see :meth:`.reply.Reply.binary_audio`)."""
        if not self._replies:
            raise RemoteProtocolError(f"binary audio of {len(data)} bytes with no response running")
        rid = next(reversed(self._replies))
        number, reply = self._replies[rid]
        events: list[Event] = []
        part = reply.binary_audio(data, self._output_media, events)
        if part is not None:
            self._count_audio(rid, part[0], part[1], len(data))
        self._emit(number, rid, events, out)

    def _count_audio(self, rid: str, item: str, content_index: int, size: int) -> None:
        """Count ``size`` bytes of output audio received for an assistant item."""
        state = self._audio.get(item)
        if state is None:
            state = _Audio(rid, content_index)
            self._remember(self._audio, item, state)
        state.size += size
        self._playing = item

    def _emit(self, number: int, rid: str, events: list[Event], out: list[Routed]) -> None:
        for event in events:
            out.append(Routed(event=event, stream=number, response_id=rid))

    # -- the session's own -------------------------------------------------------------

    def _speech(self, payload: dict[str, Any], kind: str, out: list[Routed]) -> None:
        start = payload.get("audio_start_ms")
        end = payload.get("audio_end_ms")
        item = payload.get("item_id")
        self._session_event(
            Speech(
                state=_SPEECH[kind],  # type: ignore[arg-type]
                start_ms=start if type(start) is int else None,
                end_ms=end if type(end) is int else None,
                item_id=item if isinstance(item, str) else None,
                extra=payload,
            ),
            out,
        )

    def _transcription(self, payload: dict[str, Any], what: str, out: list[Routed]) -> None:
        item = payload.get("item_id")
        ci = payload.get("content_index", 0)
        if not isinstance(item, str) or type(ci) is not int:
            raise RemoteProtocolError(f"input transcription {what} has no item_id")
        key = (item, ci)
        block = self._transcripts.get(key)
        events: list[RealtimeEvent] = []
        if block is None:
            if len(self._transcripts) >= self.max_items:
                raise BufferLimitExceeded(
                    f"more than max_items={self.max_items} input transcriptions open"
                )
            block = self._transcripts[key] = self._blocks
            self._blocks += 1
            events.append(BlockStart(index=block, kind="transcript", id=item, extra=IMPLICIT))
        if what == "delta":
            delta = payload.get("delta")
            events.append(
                TextDelta(
                    index=block,
                    delta=delta if isinstance(delta, str) else "",
                    part=ci,
                    extra=payload,
                )
            )
        elif what == "segment":
            text, start, end = payload.get("text"), payload.get("start"), payload.get("end")
            speaker, sid = payload.get("speaker"), payload.get("id")
            events.append(
                TranscriptSegment(
                    index=block,
                    text=text if isinstance(text, str) else "",
                    start=float(start) if isinstance(start, int | float) else None,
                    end=float(end) if isinstance(end, int | float) else None,
                    speaker=speaker if isinstance(speaker, str) else None,
                    id=sid if isinstance(sid, str) else None,
                    extra=payload,
                )
            )
        elif what == "updated":
            # The transcript so far (xAI), which a later one may revise: not a delta.
            text = payload.get("transcript")
            events.append(
                Metadata(
                    name="interim_transcript",
                    value=text if isinstance(text, str) else "",
                    extra=payload,
                )
            )
        elif what == "completed":
            del self._transcripts[key]
            usage = to_usage(payload.get("usage"))
            if usage is not None:
                events.append(UsageUpdate(usage=usage, extra=IMPLICIT))
            transcript = payload.get("transcript")
            events.append(
                BlockEnd(index=block, status="completed", value=transcript, extra=payload)
            )
        else:  # failed
            del self._transcripts[key]
            error = payload.get("error")
            info = error_info(error if isinstance(error, dict) else {}, output_started=False)
            events.append(ErrorEvent(error=info, extra=IMPLICIT))
            events.append(BlockEnd(index=block, status="failed", extra=payload))
        out.extend(Routed(event=event) for event in events)

    def _rate_limits(self, payload: dict[str, Any], out: list[Routed]) -> None:
        limits = payload.get("rate_limits")
        if not isinstance(limits, list):
            raise RemoteProtocolError("rate_limits.updated has no rate_limits list")
        parsed = []
        for entry in limits:
            entry = entry if isinstance(entry, dict) else {}
            name, limit, remaining, reset = (
                entry.get("name"),
                entry.get("limit"),
                entry.get("remaining"),
                entry.get("reset_seconds"),
            )
            parsed.append(
                RateLimit(
                    name=name if isinstance(name, str) else None,
                    limit=limit if type(limit) is int else None,
                    remaining=remaining if type(remaining) is int else None,
                    reset_seconds=float(reset) if isinstance(reset, int | float) else None,
                )
            )
        self._session_event(RateLimits(limits=parsed, extra=payload), out)

    def _error(self, payload: dict[str, Any], out: list[Routed]) -> None:
        error = payload.get("error")
        error = error if isinstance(error, dict) else payload
        info = error_info(error, output_started=False)
        ended = next((v for v in (info.code, error.get("type")) if v in self.expiry), None)
        if ended is not None:
            info = msgspec.structs.replace(info, kind="timeout", retryable=False)
            event: RealtimeEvent = Lifetime(
                state="expired",
                reason=ended,
                max_duration=self.spec.max_duration,
                message=info.message,
                error=info,
                extra=payload,
            )
        else:
            event = ErrorEvent(error=info, extra=payload)
        self._session_event(event, out)

    # -- the end -------------------------------------------------------------------------

    def _on_close(self, out: list[Routed]) -> None:
        for rid, (number, reply) in list(self._replies.items()):
            events: list[Event] = [
                BlockEnd(index=block, extra=IMPLICIT) for block in reply.open_blocks()
            ]
            events.append(
                Finish(
                    status="truncated",
                    reason=FinishReason(unified="error", raw=None),
                    error=ErrorInfo(
                        kind="truncated",
                        message=f"the connection closed before response {rid} was done",
                        retryable=True,
                        dialect=self.dialect,
                    ),
                    extra=IMPLICIT,
                )
            )
            self._emit(number, rid, events, out)
        self._replies.clear()
        self._item_reply.clear()
        self._call_reply.clear()
        for block in sorted(self._transcripts.values()):
            self._session_event(BlockEnd(index=block, status="truncated", extra=IMPLICIT), out)
        self._transcripts.clear()

    def _remember(self, table: OrderedDict[str, Any], key: str, value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > self.max_items:
            table.popitem(last=False)


def _b64_size(text: str) -> int:
    """The bytes a base64 text holds (without whitespace)."""
    return len(text) * 3 // 4 - (2 if text.endswith("==") else 1 if text.endswith("=") else 0)
