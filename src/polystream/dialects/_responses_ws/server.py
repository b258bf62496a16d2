"""The Responses WebSocket server, sans-I/O: what the emulator runs for one connection.

Each ``response.create`` is a Responses request (the ``POST /v1/responses`` body
without its transport fields); its reply is written by the same encoder that writes the
SSE stream (the shared Responses encoder with the provider's quirks, which the family
binds as :attr:`ResponsesSocketServer.reply_encoder`), each event's JSON object sent as
one message, with the request's ``stream_id`` echoed. The
connection keeps the responses it made, so that a later request continues one
(``previous_response_id``): a request naming one it does not hold fails with
``previous_response_not_found``. With ``store: false`` only the most recent of those
responses is kept (the service's connection-local cache); ``generate: false`` prepares a
response to continue from without output (a warm-up).

Lanes: the requests of one ``stream_id`` are answered in order, one at a time; lanes run
side by side. Errors are the socket's wrapped shape, ``{"type": "error", "status",
"error": {"type", "code", "message", "param"}}``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Final

import msgspec

from polystream.dialects._errors import error_body, status_for
from polystream.dialects._realtime.server import (
    IdMaker,
    Message,
    Outbound,
    Refusal,
    Replier,
    ReplyRun,
    SocketServer,
    Turn,
)
from polystream.dialects._responses.encode import ResponsesEncoder
from polystream.dialects._responses_ws.errors import CONNECTION_LIMIT
from polystream.dialects._responses_ws.wire import CLIENT_MESSAGES
from polystream.dialects._spec import ErrorSpec
from polystream.errors import ProtocolError
from polystream.events import ErrorEvent, ErrorInfo, Event, Finish, FinishReason, StreamStart
from polystream.wire.sse import ServerSentEvent, SSEDecoder
from polystream.wire.ws import MessageReader, dump_message

__all__ = ["ResponsesRun", "ResponsesSocketServer", "wrapped_error"]

_OPENAI_ERRORS: Final = ErrorSpec("openai", param_field=True)
_LIFECYCLE: Final = frozenset(
    {
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.completed",
        "response.incomplete",
        "response.failed",
    }
)
_TERMINAL: Final = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_ENVELOPE: Final = frozenset({"type", "stream_id", "generate", "stream"})
"""The fields of a ``response.create`` that are the socket's, not the request's."""
_LIMIT_MESSAGE: Final = (
    "Responses websocket connection limit reached (60 minutes). Create a new websocket "
    "connection to continue."
)
_decode: Final = msgspec.json.Decoder()


def wrapped_error(
    status: int,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
    kind: str | None = None,
    sequence_number: int | None = None,
    stream_id: str | None = None,
) -> str:
    """The socket's ``error`` message for a failure of the given HTTP status."""
    nested = error_body(_OPENAI_ERRORS, status, message, kind=kind, param=param, code=code)
    fields = nested["error"]
    out: dict[str, Any] = {"type": "error", "status": status}
    if sequence_number is not None:
        out["sequence_number"] = sequence_number
    out["error"] = {
        "type": fields["type"],
        "code": fields["code"],
        "message": fields["message"],
        "param": fields["param"],
    }
    if stream_id is not None:
        out["stream_id"] = stream_id
    return dump_message(out)


class ResponsesRun(ReplyRun):
    """A reply written message by message.

    Args:
        response_id: Its id (its ``StreamStart``'s).
        events: The reply in unified terms.
        tag: Handed back to whoever drives the run.
        stream_id: The lane to echo (None: the default lane).
        response_fields: Fields set on the response object of its lifecycle events
            (``previous_response_id``, ``store``), as the request gave them.
        encoder: A new encoder of the reply's dialect (its SSE stream is split into
            messages).
    """

    def __init__(
        self,
        response_id: str,
        events: list[Event],
        tag: Any,
        *,
        stream_id: str | None,
        response_fields: dict[str, Any],
        encoder: ResponsesEncoder,
    ) -> None:
        self.response_id = response_id
        self.tag = tag
        self.stream_id = stream_id
        self.status: str | None = None  # completed / incomplete / failed, once ended
        self.stored = response_fields.get("store") is not False
        self._fields = response_fields
        self._events: Iterator[Event] = iter(events)
        self._encoder = encoder
        self._sse = SSEDecoder()
        self._queue: deque[Message] = deque()
        self._error: ErrorInfo | None = None
        self._ended = False
        self._echo = (
            ',"stream_id":' + dump_message(stream_id) + "}" if stream_id is not None else None
        )

    @property
    def done(self) -> bool:
        return self._ended and not self._queue

    def next(self) -> Message | None:
        while not self._queue and not self._ended:
            event = next(self._events, None)
            if event is None:
                self._take(self._encoder.close())
                self._ended = True
                break
            if type(event) is ErrorEvent:
                self._error = event.error
            self._take(self._encoder.encode(event))
        return self._queue.popleft() if self._queue else None

    def fail(self, error: ErrorInfo) -> None:
        if self._ended:
            return
        self._error = error
        data = self._encoder.encode(ErrorEvent(error=error))
        data += self._encoder.encode(
            Finish(status="failed", reason=FinishReason(unified="error"), error=error)
        )
        self._take(data + self._encoder.close())
        self._ended = True

    def _take(self, data: bytes) -> None:
        for frame in self._sse.feed(data):
            if type(frame) is ServerSentEvent:
                self._queue.append(Message(text=self._message(frame.data)))

    def _message(self, payload: str) -> str:
        """One event's JSON as the socket sends it."""
        head = payload[: payload.find(",")]
        kind = head[len('{"type":"') : -1] if head.startswith('{"type":"') else None
        if kind in _LIFECYCLE or kind == "error":
            value = _decode.decode(payload)
            if kind == "error":
                return self._wrapped(value)
            response = value.get("response")
            if isinstance(response, dict):
                response.update((k, v) for k, v in self._fields.items() if k in response)
            if kind in _TERMINAL:
                self.status = _TERMINAL[kind]
                self._ended = True
            if self.stream_id is not None:
                value["stream_id"] = self.stream_id
            return dump_message(value)
        return payload if self._echo is None else payload[:-1] + self._echo

    def _wrapped(self, value: dict[str, Any]) -> str:
        error = self._error or ErrorInfo(kind="server", message=str(value.get("message")))
        status = error.http_status or status_for(error.kind, _OPENAI_ERRORS)
        return wrapped_error(
            status,
            error.message,
            code=error.code,
            kind=error.kind,
            sequence_number=value.get("sequence_number"),
            stream_id=self.stream_id,
        )


class _Lane:
    __slots__ = ("active", "waiting")

    def __init__(self) -> None:
        self.waiting: deque[dict[str, Any]] = deque()
        self.active: ResponsesRun | None = None


class ResponsesSocketServer(SocketServer):
    """One Responses WebSocket connection, served.

    Args:
        replier: Chooses each reply (its :class:`Turn` holds the request body).
        model: Unused: each request names its model.
        created: Unused: each reply is stamped by its replier.
        seed: What the ids derive from.
        query: The connection URL's query (unused).
        max_kept: Most responses the connection keeps to continue from.

    A family binds it with its ``family`` name and its ``reply_encoder`` (the shared
    Responses encoder with its provider's quirks).
    """

    reply_encoder: ClassVar[type[ResponsesEncoder]]

    def __init__(
        self,
        replier: Replier,
        *,
        model: str = "",
        created: int = 0,
        seed: str = "polystream",
        query: Mapping[str, str] | None = None,
        max_kept: int = 256,
    ) -> None:
        self._replier = replier
        self._ids = IdMaker(seed)
        self._reader = MessageReader(name=self.family)
        self.max_kept = max_kept
        self.kept: OrderedDict[str, bool] = OrderedDict()  # response id -> stored
        self._lanes: dict[str | None, _Lane] = {}

    def open(self) -> list[Outbound]:
        return []

    def receive(self, message: str | bytes) -> list[Outbound]:
        try:
            value = self._reader.read(message).value
        except ProtocolError as exc:
            return [
                self.error(
                    400, f"The message could not be read: {exc.message}", code="invalid_json"
                )
            ]
        if not isinstance(value, dict):
            return [self.error(400, "A client event must be a JSON object.", code="invalid_type")]
        kind = value.get("type")
        lane = value.get("stream_id")
        if lane is not None and not isinstance(lane, str):
            return [
                self.error(
                    400, "Invalid type for 'stream_id': expected a string.", param="stream_id"
                )
            ]
        if kind != "response.create":
            supported = ", ".join(f"'{name}'" for name in sorted(CLIENT_MESSAGES))
            message_text = (
                f"'{kind}' is not served by the emulator; it answers 'response.create'."
                if kind in CLIENT_MESSAGES
                else f"Invalid value: '{kind}'. Supported values are: {supported}."
            )
            return [
                self.error(400, message_text, code="invalid_value", param="type", stream_id=lane)
            ]
        if value.get("background") is True:
            return [
                self.error(
                    400,
                    "background is not supported over WebSocket.",
                    code="invalid_value",
                    param="background",
                    stream_id=lane,
                )
            ]
        state = self._lanes.setdefault(lane, _Lane())
        state.waiting.append(value)
        return self._next(lane) if state.active is None else []

    def finished(self, run: ReplyRun) -> list[Outbound]:
        assert isinstance(run, ResponsesRun)
        if run.status in ("completed", "incomplete"):
            self._keep(run.response_id, run)
        state = self._lanes.get(run.stream_id)
        if state is None or state.active is not run:
            return []
        state.active = None
        return self._next(run.stream_id)

    def expire(self) -> list[str]:
        return [self.error(400, _LIMIT_MESSAGE, code=CONNECTION_LIMIT)]

    def error(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        kind: str | None = None,
        stream_id: str | None = None,
    ) -> str:
        return wrapped_error(
            status, message, code=code, param=param, kind=kind, stream_id=stream_id
        )

    # -- requests ----------------------------------------------------------------------

    def _next(self, lane: str | None) -> list[Outbound]:
        """Start the lane's next request (those refused at once answer in turn)."""
        state = self._lanes[lane]
        out: list[Outbound] = []
        while state.waiting and state.active is None:
            value = state.waiting.popleft()
            answer = self._start(value, lane)
            if isinstance(answer, ResponsesRun):
                state.active = answer
            out.append(answer)
        return out

    def _start(self, value: dict[str, Any], lane: str | None) -> str | ResponsesRun:
        body = {key: field for key, field in value.items() if key not in _ENVELOPE}
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.kept:
            return self.error(
                400,
                f"Previous response with id '{previous}' not found.",
                code="previous_response_not_found",
                param="previous_response_id",
                stream_id=lane,
            )
        model = body.get("model")
        answer = self._replier(
            Turn(
                model=model if isinstance(model, str) else "",
                body=body,
                generate=value.get("generate") is not False,
            )
        )
        if isinstance(answer, Refusal):
            return self.error(
                answer.status,
                answer.message,
                code=answer.code,
                param=answer.param,
                kind=answer.kind,
                stream_id=lane,
            )
        start = next((e for e in answer.events if type(e) is StreamStart), None)
        rid = start.id if start is not None and start.id else self._ids.make("resp_")
        return ResponsesRun(
            rid,
            answer.events,
            answer.tag,
            stream_id=lane,
            response_fields={
                "previous_response_id": previous,
                "store": body.get("store") is not False,
            },
            encoder=self.reply_encoder(),
        )

    def _keep(self, response_id: str, run: ResponsesRun) -> None:
        stored = run.stored
        if not stored:
            # The connection-local cache holds the most recent unstored response only.
            for rid in [rid for rid, kept in self.kept.items() if not kept]:
                del self.kept[rid]
        self.kept[response_id] = stored
        while len(self.kept) > self.max_kept:
            self.kept.popitem(last=False)
