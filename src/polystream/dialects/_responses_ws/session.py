"""The Responses WebSocket session: one ``response.create`` per turn, lanes, steering;
shared by the families that speak it (``openai_responses_ws``, ``xai_responses_ws``),
each binding the class with its name, descriptor and reply decoder.

Each reply is decoded by the Responses decoder that reads the SSE stream
(:class:`~polystream.dialects._responses.decode.ResponsesDecoder`, through its
:meth:`~polystream.dialects._responses.decode.ResponsesDecoder.feed_payload`): a reply
is an ``openai_responses`` stream, event for event what the same response gives over
SSE.

Lanes: a ``response.create`` with a ``stream_id`` goes to that lane (without one, to
the default lane, None). Requests of one lane are answered in order, one at a time;
lanes run side by side and their events interleave, each echoing its ``stream_id``. A
lane's events go to its running reply; an event that opens a reply (see
:data:`.wire.REPLY_EVENTS`) when none runs starts the next one, for the oldest request
the lane still waits on (when the session sent it: :meth:`create_response`, or was told
of it: :meth:`sent`). A reply ends with its terminal event.

An ``error`` for a lane that has no reply running fails its oldest request: that
request's stream is the error and a ``failed`` finish. An ``error`` inside a running
reply is that reply's (it ends with its terminal event, or when the lane's next reply
starts, or when the connection closes). An ``error`` with no request to blame is the
session's (stream 0).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec

from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.dialects._responses.decode import ResponsesDecoder
from polystream.dialects._responses.errors import error_info
from polystream.dialects._responses_ws.errors import CONNECTION_LIMIT, retry_advice, retype
from polystream.dialects._responses_ws.wire import REPLY_EVENTS, STEERING
from polystream.errors import BufferLimitExceeded, LocalProtocolError, RemoteProtocolError
from polystream.events import (
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    Lifetime,
    RealtimeEvent,
    Steering,
    StreamStart,
)
from polystream.wire.ws import WSMessage

__all__ = ["ResponsesSocketSession"]

_IMPLICIT: dict[str, Any] = {"implicit": True}


class _Reply:
    """One reply while it runs."""

    __slots__ = (
        "decoder",
        "error_status",
        "number",
        "request",
        "response_id",
        "retyped",
        "started",
    )

    def __init__(
        self,
        number: int,
        request: dict[str, Any] | None,
        decoder: type[ResponsesDecoder],
        strict: bool,
    ) -> None:
        self.number = number
        self.request = request
        self.decoder = decoder(strict=strict)
        self.response_id: str | None = None
        self.started = False  # its StreamStart was given
        self.error_status: Any = None  # the HTTP status of an error message it got
        # The error of that message as the decoder typed it, and as retyped: the decoder
        # ends the reply with the same object when no terminal event follows.
        self.retyped: tuple[ErrorInfo, ErrorInfo] | None = None


class _Lane:
    """A lane: the requests it waits on, its running reply, its last response."""

    __slots__ = ("active", "last_response_id", "name", "pending")

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.pending: deque[dict[str, Any]] = deque()
        self.active: _Reply | None = None
        self.last_response_id: str | None = None


class ResponsesSocketSession(RealtimeSession):
    """A Responses WebSocket connection, sans-I/O (bound by a family's ``binding.py``).

    Class attributes (what a family binds):
        reply_decoder: The decoder of each reply: the shared Responses decoder bound to
            the provider's quirks (its dialect is the replies' ``StreamStart`` dialect).
        steering: The family has ``response.steer`` and ``response.inject``.

    Args:
        max_lanes: Most lanes at once (by default the descriptor's ``lanes``: OpenAI
            allows 32); a server message naming one more is a
            :class:`~polystream.errors.BufferLimitExceeded`, a request for one more a
            :class:`~polystream.errors.LocalProtocolError`.
        max_pending: Most requests one lane may wait on.
        **options: See :class:`~polystream.dialects._realtime.session.RealtimeSession`.
    """

    reply_decoder: ClassVar[type[ResponsesDecoder]]
    steering: ClassVar[bool] = True

    def __init__(
        self, *, max_lanes: int | None = None, max_pending: int = 1024, **options: Any
    ) -> None:
        super().__init__(**options)
        self.max_lanes = self.spec.lanes if max_lanes is None else max_lanes
        self.max_pending = max_pending
        self._lanes: dict[str | None, _Lane] = {}
        self._defaults: dict[str, Any] = {}

    # -- state ---------------------------------------------------------------------------

    def last_response_id(self, lane: str | None = None) -> str | None:
        """The id of the lane's last reply that completed (or ended incomplete)."""
        state = self._lanes.get(lane)
        return state.last_response_id if state is not None else None

    def active_response_id(self, lane: str | None = None) -> str | None:
        """The id of the lane's running reply, once it is known."""
        state = self._lanes.get(lane)
        return state.active.response_id if state is not None and state.active else None

    def pending(self, lane: str | None = None) -> int:
        """How many requests the lane waits on (not counting its running reply)."""
        state = self._lanes.get(lane)
        return len(state.pending) if state is not None else 0

    @property
    def lanes(self) -> list[str | None]:
        """The lanes seen so far, in order."""
        return list(self._lanes)

    # -- reading -----------------------------------------------------------------------

    def _on_message(
        self, read: WSMessage, payload: dict[str, Any], kind: str, out: list[Routed]
    ) -> None:
        lane_name = payload.get("stream_id")
        if lane_name is not None and type(lane_name) is not str:
            raise self._remote("stream_id is not a string")
        if kind in STEERING:
            self._steering(payload, kind, lane_name, out)
            return
        if kind == "error":
            self._error(read, payload, lane_name, out)
            return
        lane = self._lane(lane_name, remote=True)
        reply = lane.active
        if reply is not None and reply.started and self._starts_another(reply, payload, kind):
            self._end(lane, reply, out)
            reply = None
        if reply is None:
            if kind not in REPLY_EVENTS:
                # Nothing runs on the lane: a keep-alive or an unknown message is the
                # session's.
                event: Event = (
                    KeepAlive(name=kind, extra=payload)
                    if kind == "keepalive"
                    else self._unknown(read, kind)
                )
                out.append(Routed(event=event, lane=lane_name))
                return
            reply = self._open(lane)
        assert read.text is not None
        self._emit(
            lane, reply, reply.decoder.feed_payload(payload, read.text, index=read.index), out
        )

    @staticmethod
    def _starts_another(reply: _Reply, payload: dict[str, Any], kind: str) -> bool:
        """Whether a lifecycle event belongs to a new response (the running one got an
        error and no terminal event)."""
        if kind == "response.created":
            return True
        response = payload.get("response")
        if kind.startswith("response.") and isinstance(response, dict):
            rid = response.get("id")
            return (
                isinstance(rid, str) and reply.response_id is not None and rid != reply.response_id
            )
        return False

    def _error(
        self, read: WSMessage, payload: dict[str, Any], lane_name: str | None, out: list[Routed]
    ) -> None:
        lane = self._lanes.get(lane_name)
        nested = payload.get("error")
        code = nested.get("code") if isinstance(nested, dict) else payload.get("code")
        code = code if isinstance(code, str) else None
        status = payload.get("status")
        if code == CONNECTION_LIMIT:
            info = retype(error_info(payload, output_started=False), status, started=False)
            out.append(
                Routed(
                    event=Lifetime(
                        state="limit_reached",
                        reason=code,
                        max_duration=self.spec.max_duration,
                        message=info.message,
                        error=info,
                        extra=_IMPLICIT,
                    ),
                    lane=lane_name,
                )
            )
        if lane is None or (lane.active is None and not lane.pending):
            # No request to blame: the session's error.
            info = retype(error_info(payload, output_started=False), status, started=False)
            seq = payload.pop("sequence_number", None)
            out.append(
                Routed(event=ErrorEvent(error=info, cursor=seq, extra=payload), lane=lane_name)
            )
            advice = retry_advice(code)
            if advice is not None:
                out.append(Routed(event=advice, lane=lane_name))
            return
        reply = lane.active if lane.active is not None else self._open(lane)
        reply.error_status = status
        assert read.text is not None
        events: list[RealtimeEvent] = []
        events.extend(reply.decoder.feed_payload(payload, read.text, index=read.index))
        advice = retry_advice(code)
        if advice is not None:
            events.append(msgspec.structs.replace(advice, safe=not reply.started))
        if not reply.started:
            # Before its response began: the request failed, nothing more will come.
            events.extend(reply.decoder.close())
        self._emit(lane, reply, events, out)

    def _steering(
        self, payload: dict[str, Any], kind: str, lane_name: str | None, out: list[Routed]
    ) -> None:
        action, state = STEERING[kind]
        steer = payload.get("steer")
        steer = steer if isinstance(steer, dict) else {}
        target = steer.get("previous_response_id", payload.get("response_id"))
        sid = steer.get("id")
        reason = payload.get("reason")
        error = payload.get("error")
        info: ErrorInfo | None = None
        if isinstance(error, dict):
            info = error_info(error, output_started=False)
            info = msgspec.structs.replace(info, kind="invalid_request")
        returned = steer.get("input", payload.get("input")) if state == "failed" else None
        out.append(
            Routed(
                event=Steering(
                    action=action,
                    state=state,
                    id=sid if isinstance(sid, str) else None,
                    response_id=target if isinstance(target, str) else None,
                    input=returned,
                    required_input=payload.get("required_input"),
                    reason=reason if isinstance(reason, str) else None,
                    error=info,
                    cursor=payload.get("sequence_number"),
                    extra=payload,
                ),
                lane=lane_name,
                response_id=target if isinstance(target, str) else None,
            )
        )

    def _lane(self, name: str | None, *, remote: bool) -> _Lane:
        lane = self._lanes.get(name)
        if lane is None:
            if len(self._lanes) >= self.max_lanes:
                message = f"more than max_lanes={self.max_lanes} lanes (lane {name!r})"
                if remote:
                    raise BufferLimitExceeded(message)
                raise LocalProtocolError(message, dialect=self.dialect)
            lane = self._lanes[name] = _Lane(name)
        return lane

    def _open(self, lane: _Lane) -> _Reply:
        request = lane.pending.popleft() if lane.pending else None
        reply = lane.active = _Reply(self._new_stream(), request, self.reply_decoder, self.strict)
        return reply

    def _emit(
        self, lane: _Lane, reply: _Reply, events: Sequence[RealtimeEvent], out: list[Routed]
    ) -> None:
        for event in events:
            if type(event) is StreamStart:
                reply.started = True
                if event.id is not None:
                    reply.response_id = event.id
            elif type(event) is ErrorEvent:
                error = retype(event.error, reply.error_status, started=reply.started)
                reply.retyped = (event.error, error)
                event = msgspec.structs.replace(event, error=error)
            elif type(event) is Finish:
                if reply.retyped is not None and event.error is reply.retyped[0]:
                    event = msgspec.structs.replace(event, error=reply.retyped[1])
                if event.status in ("completed", "incomplete") and reply.response_id:
                    lane.last_response_id = reply.response_id
                lane.active = None
            out.append(
                Routed(
                    event=event,
                    stream=reply.number,
                    lane=lane.name,
                    response_id=reply.response_id,
                )
            )

    def _end(self, lane: _Lane, reply: _Reply, out: list[Routed]) -> None:
        """End a reply that got no terminal event (its error stands for one)."""
        self._emit(lane, reply, reply.decoder.close(), out)
        lane.active = None

    def _on_close(self, out: list[Routed]) -> None:
        for lane in self._lanes.values():
            if lane.active is not None:
                self._end(lane, lane.active, out)
            while lane.pending:
                lane.pending.popleft()
                number = self._new_stream()
                finish = Finish(
                    status="truncated",
                    reason=FinishReason(unified="error", raw=None),
                    error=ErrorInfo(
                        kind="truncated",
                        message="the connection closed before the response began",
                        retryable=True,
                        dialect=self.dialect,
                    ),
                    extra=_IMPLICIT,
                )
                out.append(Routed(event=finish, stream=number, lane=lane.name))

    # -- writing -----------------------------------------------------------------------

    def configure(self, **settings: Any) -> list[str]:
        """Set the fields every later ``response.create`` starts from (``model``,
        ``instructions``, ``tools``, ``store``, ...). Nothing is sent: the service keeps
        no configuration for a connection (:meth:`warm_up` prepares a response to
        continue from).

        Raises:
            LocalProtocolError: A field the socket does not take (``stream``,
                ``background``, ``type``).
        """
        _check_body(settings, self.dialect)
        self._defaults.update(settings)
        return []

    def create_response(
        self,
        body: dict[str, Any] | None = None,
        *,
        lane: str | None = None,
        previous_response_id: str | None = None,
        generate: bool | None = None,
        **fields: Any,
    ) -> list[str]:
        """A ``response.create``: the configured fields, then ``body``, then ``fields``,
        then ``previous_response_id``, ``generate`` and the lane's ``stream_id`` when
        given. The request joins the lane's queue.

        Raises:
            LocalProtocolError: A field the socket does not take, ``stream_id`` in the
                body (give ``lane``), a lane past ``max_lanes`` or ``max_pending``.
        """
        request: dict[str, Any] = {"type": "response.create", **self._defaults}
        for source in (body or {}, fields):
            _check_body(source, self.dialect)
            request.update(source)
        if previous_response_id is not None:
            request["previous_response_id"] = previous_response_id
        if generate is not None:
            request["generate"] = generate
        if lane is not None:
            request["stream_id"] = lane
        self._queue(lane, request)
        return [self._message(request)]

    def warm_up(self, *, lane: str | None = None, **fields: Any) -> list[str]:
        """A ``response.create`` with ``generate: false``: the service prepares the
        request's state (tools, instructions) and answers with a response id to continue
        from, without output."""
        return self.create_response(lane=lane, generate=False, **fields)

    def send_text(
        self,
        text: str,
        *,
        lane: str | None = None,
        previous_response_id: str | None = None,
        chain: bool = True,
        **fields: Any,
    ) -> list[str]:
        """A ``response.create`` whose input is ``text``, continuing the lane's last
        response (``chain``) unless ``previous_response_id`` names another."""
        return self.create_response(
            lane=lane,
            previous_response_id=self._chain(lane, previous_response_id, chain),
            input=text,
            **fields,
        )

    def tool_result(
        self,
        call_id: str,
        output: str,
        *,
        lane: str | None = None,
        previous_response_id: str | None = None,
        chain: bool = True,
        **fields: Any,
    ) -> list[str]:
        """A ``response.create`` whose input is the ``function_call_output`` of
        ``call_id``, continuing the lane's last response (``chain``) unless
        ``previous_response_id`` names another."""
        item = {"type": "function_call_output", "call_id": call_id, "output": output}
        return self.create_response(
            lane=lane,
            previous_response_id=self._chain(lane, previous_response_id, chain),
            input=[item],
            **fields,
        )

    def append_item(
        self, item: dict[str, Any], *, response_id: str | None = None, **options: Any
    ) -> list[str]:
        """Add an input item: into the running response ``response_id``
        (``response.inject``), else as the input of a new ``response.create``
        (``options`` as :meth:`create_response`'s)."""
        if response_id is not None:
            return self.inject([item], response_id=response_id)
        return self.create_response(input=[item], **options)

    def steer(self, input: str | list[Any], *, previous_response_id: str) -> list[str]:
        """A ``response.steer``: queue user input (text, or user messages) for a
        continuation of the response ``previous_response_id`` (its lane follows from
        the response; the outcome comes back as :class:`~polystream.events.Steering`).

        Raises:
            LocalProtocolError: The family has no steering.
        """
        if not self.steering:
            raise self._unsupported("response.steer")
        return [
            self._message(
                {
                    "type": "response.steer",
                    "previous_response_id": previous_response_id,
                    "input": input,
                }
            )
        ]

    def inject(self, items: list[Any], *, response_id: str) -> list[str]:
        """A ``response.inject`` (beta): commit input items (client tool outputs) into
        the running response ``response_id``.

        Raises:
            LocalProtocolError: The family has no injection.
        """
        if not self.steering:
            raise self._unsupported("response.inject")
        return [
            self._message({"type": "response.inject", "response_id": response_id, "input": items})
        ]

    def sent(self, message: str | dict[str, Any]) -> None:
        """Tell the session of a client message sent without its commands (a relay): a
        ``response.create`` joins its lane's queue.

        Raises:
            LocalProtocolError: The message is not a JSON object with a type, or as
                :meth:`create_response`.
        """
        value = msgspec.json.decode(message) if isinstance(message, str) else message
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise LocalProtocolError(
                "a client message is a JSON object with a type", dialect=self.dialect
            )
        if value["type"] == "response.create":
            lane = value.get("stream_id")
            self._queue(lane if isinstance(lane, str) else None, value)

    def _queue(self, lane_name: str | None, request: dict[str, Any]) -> None:
        lane = self._lane(lane_name, remote=False)
        if len(lane.pending) >= self.max_pending:
            raise LocalProtocolError(
                f"lane {lane_name!r} already waits on max_pending={self.max_pending} requests",
                dialect=self.dialect,
            )
        lane.pending.append(request)

    def _chain(self, lane: str | None, given: str | None, chain: bool) -> str | None:
        if given is not None or not chain:
            return given
        return self.last_response_id(lane)

    @staticmethod
    def _remote(message: str) -> RemoteProtocolError:
        return RemoteProtocolError(message)


def _check_body(body: dict[str, Any], dialect: str) -> None:
    """Refuse what a ``response.create`` over the socket cannot carry."""
    for name in ("type", "stream_id"):
        if name in body:
            raise LocalProtocolError(
                f"{name!r} is set by the session (give lane= for the stream_id)", dialect=dialect
            )
    if "stream" in body:
        raise LocalProtocolError(
            "'stream' is implicit over the WebSocket and must not be sent", dialect=dialect
        )
    if body.get("background"):
        raise LocalProtocolError(
            "'background' is not supported over the WebSocket", dialect=dialect
        )
