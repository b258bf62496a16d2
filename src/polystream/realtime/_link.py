"""A socket client's decisions, sans-I/O: what to send now and what to queue, when to
reconnect and after how long, what to send on a new connection. The async and sync
shells (:mod:`polystream.client._realtime`, :mod:`polystream.client._realtime_sync`)
carry them out, so they behave the same.

One :class:`SocketLink` lives as long as a connection object, across its sockets: it
holds the family's session (one session for every socket: its replies are numbered on
across reconnections) and the record of the context
(:mod:`polystream.dialects._realtime.context`).

Reconnection follows the official OpenAI SDK: only after a close code of the family's
``reconnect_codes`` (1001, 1005, 1006, 1011, 1012, 1013, 1015), with exponential
backoff (``RetryPolicy``: 0.5 s doubling up to 8 s, scaled by a random factor in
[0.75, 1], 5 attempts by default), the attempts counted again from the first message
other than an ``error`` read on the new socket. While it reconnects, sends are queued;
the new socket first gets the replay of the context, then the queue, in order.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from polystream.dialects._realtime.context import Context
from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.dialects._sockets import open_context, open_session
from polystream.errors import IdleTimeout, LocalProtocolError, PolystreamError, SocketClosed
from polystream.events import Lifetime, Raw, RetryAdvice, StreamWarning
from polystream.realtime._endpoint import socket_spec
from polystream.retry import RetryPolicy, RetryState

__all__ = ["DEFAULT_RECONNECT", "Drop", "SocketLink"]

DEFAULT_RECONNECT: Final = RetryPolicy(max_retries=5)
"""The official SDK's reconnection: 5 attempts, 0.5 s doubling up to 8 s, jitter 25 %."""

_NO_RETRY: Final = RetryPolicy(max_retries=0)

Message = str | bytes


@dataclass(slots=True)
class Drop:
    """What follows the end of a socket.

    Attributes:
        events: To deliver first (the replies the socket's end cut short, a warning).
        delay: Reconnect after this many seconds; None: the connection is over.
        error: To raise after the events, when the connection is over (None: it ended
            cleanly).
    """

    events: list[Routed] = field(default_factory=list)
    delay: float | None = None
    error: PolystreamError | None = None


class SocketLink:
    """The decisions of one connection object, across its sockets.

    Args:
        family: The WebSocket family.
        model: The model; where the family does not take it in the URL, it is
            configured on the session (``configure(model=...)``).
        reconnect: How to reconnect after an allowed close code (None: never).
        replay: Replay the recorded context on a new socket (families with a
            ``conversation`` context).
        full_history_retry: Act on a safe :class:`~polystream.events.RetryAdvice`:
            reconnect, and send the failed request again with its full history.
        keep_raw: Deliver the session's :class:`~polystream.events.Raw` events.
        session_options: For :func:`~polystream.realtime.open_session` (``strict``,
            ``max_message_size``, ...).
        rng: Uniform floats in [0, 1) for the jitter.
    """

    def __init__(
        self,
        family: str,
        *,
        model: str | None = None,
        reconnect: RetryPolicy | None = DEFAULT_RECONNECT,
        replay: bool = True,
        full_history_retry: bool = False,
        keep_raw: bool = False,
        session_options: Mapping[str, Any] | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.spec = socket_spec(family)
        options = {**(session_options or {}), "keep_raw": True}
        if self.spec.setup_once and model is not None:
            options["model"] = model  # (the session writes it in the setup)
        self.session: RealtimeSession = open_session(family, **options)
        self.keep_raw = keep_raw or bool((session_options or {}).get("keep_raw"))
        self.full_history_retry = full_history_retry
        kind = self.spec.context
        record = kind is not None and (kind != "conversation" or replay)
        self.context: Context | None = open_context(family) if record else None
        self._policy = reconnect or _NO_RETRY
        self._reconnects = reconnect is not None
        self._rng = rng
        self._retry = RetryState(self._policy, rng=rng)
        self._state: Literal["connecting", "open", "reconnecting", "flushing", "closed"] = (
            "connecting"
        )
        self._queue: deque[Message] = deque()
        self._fresh = False  # no message but errors read yet on the current socket
        self._renew = False
        self._renewing = "renewing the connection"
        self._retry_lanes: list[str | None] = []
        self._last: tuple[int, str] = (1006, "")
        self.connections = 0
        """How many sockets were opened."""
        if model is not None and "model" not in self.spec.query and not self.spec.setup_once:
            self._queue.extend(self.session.configure(model=model))

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """``connecting``, ``open``, ``reconnecting``, ``flushing`` (a new socket gets
        the queue) or ``closed``."""
        return self._state

    @property
    def closed(self) -> bool:
        """The connection is over (closed, failed or timed out)."""
        return self._state == "closed"

    @property
    def queued(self) -> list[Message]:
        """The messages waiting for a socket, in order."""
        return list(self._queue)

    @property
    def renew(self) -> bool:
        """The socket is to be replaced now (a retry advice was acted on): close it and
        take :meth:`renewal`."""
        return self._renew

    # -- sending -------------------------------------------------------------------------

    def admit(self, messages: Iterable[Message]) -> list[Message]:
        """Messages to send: those to write now (then :meth:`sent` each); the others
        are queued until a socket takes them.

        Raises:
            LocalProtocolError: The connection is over.
        """
        if self._state == "closed":
            raise LocalProtocolError("send on a closed connection", dialect=self.spec.name)
        messages = list(messages)
        if self._state == "open" and not self._queue:
            return messages
        self._queue.extend(messages)
        return []

    def sent(self, message: Message) -> None:
        """A message was written to the socket."""
        if self.context is not None:
            self.context.sent(message)

    def unsent(self, messages: Sequence[Message]) -> None:
        """The socket failed before ``messages`` were written: they wait, first in the
        queue, for the next socket."""
        self._queue.extendleft(reversed(messages))
        if self._state == "open":
            self._state = "reconnecting"

    def connected(self) -> list[Message]:
        """A socket opened: the messages that rebuild the context on it (none on the
        first), to write first and not to :meth:`sent`; then write each of
        :meth:`next_queued`."""
        self.connections += 1
        self._fresh = True
        self._state = "flushing"
        if self.connections == 1 or self.context is None:
            return []
        return list(self.context.replay())

    def next_queued(self) -> Message | None:
        """The next queued message to write on the new socket; None when the queue is
        empty (the connection is then open)."""
        if self._state == "closed":
            return None
        if self._queue:
            return self._queue.popleft()
        self._state = "open"
        return None

    # -- reading ---------------------------------------------------------------------------

    def incoming(self, message: str | bytes) -> list[Routed]:
        """A server message: its routed events.

        Raises:
            RemoteProtocolError: (strict session) The message is malformed.
        """
        out: list[Routed] = []
        for routed in self.session.feed(message):
            event = routed.event
            if type(event) is Raw:
                data = event.data
                if type(data) is dict:
                    if self.context is not None:
                        self.context.received(data)
                    if self._fresh and event.name != "error":
                        self._fresh = False
                        self._retry = RetryState(self._policy, rng=self._rng)
                if self.keep_raw:
                    out.append(routed)
                continue
            out.append(routed)
            if type(event) is Lifetime and event.state == "going_away" and self._resumes():
                # Resumed on a new socket, once this one is closed.
                self._renew = True
                self._renewing = "the server is going away: resuming the session"
                continue
            if type(event) is RetryAdvice and self._acts_on(event):
                self._renew = True
                lane = routed.lane
                if routed.stream and self.context is not None and self.context.can_retry(lane):
                    # Announced in the failed reply's stream, before its end.
                    self._retry_lanes.append(lane)
                    message = (
                        f"{event.code}: the request is sent again with its full history"
                        " on a new connection"
                    )
                    out.append(
                        Routed(
                            event=StreamWarning(code="retry", message=message),
                            stream=routed.stream,
                            lane=lane,
                            response_id=routed.response_id,
                        )
                    )
        return out

    def _resumes(self) -> bool:
        return (
            self._reconnects
            and self._state != "closed"
            and self.context is not None
            and self.context.resumable
        )

    def _acts_on(self, advice: RetryAdvice) -> bool:
        return (
            self.full_history_retry
            and advice.safe
            and advice.replay == "full_history"
            and self._state != "closed"
        )

    # -- ending ----------------------------------------------------------------------------

    def renewal(self) -> Drop:
        """The socket was closed to be replaced (:attr:`renew`): reconnect at once (an
        attempt, counted as the others; none left, the connection is over)."""
        self._last = (1000, "renewing the connection")
        return self._renewal()

    def _renewal(self) -> Drop:
        self._renew = False
        why, self._renewing = self._renewing, "renewing the connection"
        if self._retry.after_connection_error() is None:
            return self.give_up()
        return self._reconnect(0.0, why)

    def dropped(self, code: int | None, reason: str = "") -> Drop:
        """The socket ended: ``code`` and ``reason`` of the close frame received (None:
        none was, 1006)."""
        if self._state == "closed":
            return Drop()
        code = 1006 if code is None else code
        self._last = (code, reason)
        if self._renew:
            return self._renewal()
        said = self._without_raw(self.session.close_code(code, reason))
        reconnectable = self.context is None or self.context.reconnectable
        if self._reconnects and code in self.spec.reconnect_codes and reconnectable:
            delay = self._retry.after_connection_error()
            if delay is not None:
                detail = f"{code} {reason}".strip()
                drop = self._reconnect(delay, f"the connection closed ({detail})")
                drop.events[:0] = said
                return drop
        drop = self._end(
            None
            if code == 1000
            else SocketClosed("the connection closed", code=code, reason=reason)
        )
        drop.events[:0] = said
        return drop

    def connect_failed(self, status: int | None, headers: Mapping[str, str]) -> float | None:
        """Opening a socket failed (``status``: the handshake's HTTP status, None for a
        network failure): seconds to wait before the next attempt, or None to give up
        (a status that is not worth retrying, or the attempts used up)."""
        if self._state == "closed":
            return None
        if status is not None:
            return self._retry.after_status(status, headers)
        return self._retry.after_connection_error()

    def give_up(self) -> Drop:
        """Reconnecting failed for good: the connection is over."""
        code, reason = self._last
        return self._end(
            SocketClosed(
                "the connection closed and could not be opened again", code=code, reason=reason
            )
        )

    def timed_out(self, seconds: float) -> Drop:
        """Nothing arrived for ``seconds``: the connection is over."""
        return self._end(IdleTimeout(f"no message for {seconds:g} s", seconds=seconds))

    def close(self) -> list[Routed]:
        """The caller closes the connection: the session's closing events."""
        self._state = "closed"
        self._queue.clear()
        return self._without_raw(self.session.close())

    def _reconnect(self, delay: float, why: str) -> Drop:
        self._state = "reconnecting"
        events = self._without_raw(self.session.restart())
        attempt = self._retry.retries
        of = f" (attempt {attempt} of {self._policy.max_retries})" if delay else ""
        events.append(
            Routed(
                event=StreamWarning(
                    code="reconnect", message=f"{why}; reconnecting in {delay:.2f} s{of}"
                )
            )
        )
        retried: list[Message] = []
        if self.context is not None:
            for lane in self._retry_lanes:
                retried += self.context.retry(self.session, lane)
        self._retry_lanes.clear()
        self._queue.extendleft(reversed(retried))
        return Drop(events=events, delay=delay)

    def _end(self, error: PolystreamError | None) -> Drop:
        self._state = "closed"
        events = self._without_raw(self.session.close())
        unsent = list(self._queue)
        self._queue.clear()
        if unsent:
            if error is None:
                code, reason = self._last
                error = SocketClosed(
                    "the connection closed with messages unsent", code=code, reason=reason
                )
            if isinstance(error, SocketClosed):
                error.unsent = unsent
        return Drop(events=events, error=error)

    def _without_raw(self, routed: list[Routed]) -> list[Routed]:
        if self.keep_raw:
            return routed
        return [r for r in routed if type(r.event) is not Raw]
