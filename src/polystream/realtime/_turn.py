"""One turn's reply among a connection's events, sans-I/O: what
:func:`polystream.realtime.text_turn` reads."""

from __future__ import annotations

from polystream.accumulate import Accumulator, Result
from polystream.dialects._realtime.session import Routed
from polystream.events import Event, Finish, RetryAdvice

__all__ = ["Turn"]


class Turn:
    """Follows the reply to the one request sent on a fresh connection: the first
    reply stream that appears, accumulated into a :class:`~polystream.accumulate.Result`.

    When that reply fails with a retry advice that the connection acts on
    (``retried=True``), the request's retry is followed instead: the next reply.

    Args:
        retried: The connection sends a request again on a safe retry advice.
    """

    def __init__(self, *, retried: bool = False) -> None:
        self.retried = retried
        self.stream: int | None = None
        self.done = False
        self._after = 0  # streams up to this one are not the turn's
        self._advised = False
        self._acc = Accumulator()

    def feed(self, routed: Routed) -> bool:
        """One routed event; True once the reply ended."""
        if self.done or routed.stream <= self._after:
            return self.done
        if self.stream is None:
            self.stream = routed.stream
        elif routed.stream != self.stream:
            return False
        event = routed.event
        if type(event) is RetryAdvice:
            self._advised = self.retried and event.safe
            return False
        if not isinstance(event, Event):
            return False
        self._acc.feed(event)
        if type(event) is Finish:
            if event.status == "failed" and self._advised:
                self._after, self.stream, self._advised = self.stream, None, False
                self._acc = Accumulator()
                return False
            self.done = True
        return self.done

    def result(self) -> Result:
        """The reply (``in_progress`` while it runs)."""
        return self._acc.result()
