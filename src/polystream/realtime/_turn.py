"""One turn's reply among a connection's events, sans-I/O: what
:func:`polystream.realtime.text_turn` reads."""

from __future__ import annotations

from polystream.accumulate import Accumulator, Result
from polystream.dialects._realtime.session import Routed
from polystream.events import Event, Finish, StreamWarning

__all__ = ["Turn"]


class Turn:
    """Follows the reply to the one request sent on a fresh connection: the first
    reply stream that appears, accumulated into a :class:`~polystream.accumulate.Result`.

    When that reply fails and the connection sends its request again (a ``warning``
    with code ``retry`` in the reply's stream), the retry is followed instead: the next
    reply.
    """

    def __init__(self) -> None:
        self.stream: int | None = None
        self.done = False
        self._after = 0  # streams up to this one are not the turn's
        self._retried = False
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
        if type(event) is StreamWarning and event.code == "retry":
            self._retried = True  # the connection sends the request again
            return False
        if not isinstance(event, Event):
            return False
        self._acc.feed(event)
        if type(event) is Finish:
            if event.status == "failed" and self._retried:
                self._after, self.stream, self._retried = self.stream, None, False
                self._acc = Accumulator()
                return False
            self.done = True
        return self.done

    def result(self) -> Result:
        """The reply (``in_progress`` while it runs)."""
        return self._acc.result()
