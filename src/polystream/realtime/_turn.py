"""One turn's reply among a connection's events, sans-I/O: what
:func:`polystream.realtime.text_turn` reads."""

from __future__ import annotations

from polystream.accumulate import Accumulator, Result
from polystream.dialects._realtime.session import Routed
from polystream.events import (
    BlockStart,
    DataDelta,
    ErrorEvent,
    Event,
    Finish,
    FinishReason,
    StreamStart,
    StreamWarning,
)

__all__ = ["Turn"]


class Turn:
    """Follows the reply to the one request sent on a fresh connection: the first
    reply stream that appears, accumulated into a :class:`~polystream.accumulate.Result`.

    When that reply fails and the connection sends its request again (a ``warning``
    with code ``retry`` in the reply's stream), the retry is followed instead: the next
    reply.

    A server ``error`` that comes in the session's stream (0) before the reply began
    is the answer to the turn's request (the Realtime API reports a refused
    ``response.create`` so: no reply will come): the turn ends ``failed`` with that
    error, its code as the finish reason's raw value. (A protocol error of the session,
    a malformed message read in tolerant mode, is not the server's answer.)

    Args:
        dialect: The family the turn is read from (the result's ``dialect`` when the
            request is refused before any reply).
    """

    def __init__(self, dialect: str | None = None) -> None:
        self.dialect = dialect
        self.stream: int | None = None
        self.done = False
        self._after = 0  # streams up to this one are not the turn's
        self._retried = False
        self._acc = Accumulator()
        self._rates: dict[int, int] = {}  # a PCM audio block -> its bytes per second
        self._sizes: dict[int, int] = {}  # a PCM audio block -> its bytes received

    @property
    def audio_seconds(self) -> float:
        """Seconds of the reply's PCM audio received so far (blocks whose sample rate
        is stated)."""
        return sum(size / self._rates[index] for index, size in self._sizes.items())

    @property
    def answered(self) -> bool:
        """A reply began, or the request was refused."""
        return self.stream is not None or self.done

    def feed(self, routed: Routed) -> bool:
        """One routed event; True once the reply ended."""
        if self.done:
            return True
        if routed.stream == 0:
            event = routed.event
            if self.stream is None and type(event) is ErrorEvent and event.error.kind != "protocol":
                self._refused(event)
            return self.done
        if routed.stream <= self._after:
            return False
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
        if type(event) is BlockStart:
            media = event.media
            pcm = event.kind == "audio" and media is not None and media.format == "pcm"
            if pcm and media is not None and media.sample_rate:
                self._rates[event.index] = media.sample_rate * (media.channels or 1) * 2
        elif type(event) is DataDelta and event.index in self._rates:
            delta = event.delta
            size = len(delta) * 3 // 4 - len(delta[-2:]) + len(delta[-2:].rstrip("="))
            self._sizes[event.index] = self._sizes.get(event.index, 0) + size
        if type(event) is Finish:
            if event.status == "failed" and self._retried:
                self._after, self.stream, self._retried = self.stream, None, False
                self._acc = Accumulator()
                self._rates.clear()
                self._sizes.clear()
                return False
            self.done = True
        return self.done

    def _refused(self, event: ErrorEvent) -> None:
        """The request was refused before any reply: the turn fails with the error."""
        self._acc = Accumulator()
        if self.dialect is not None:
            self._acc.feed(StreamStart(dialect=self.dialect))
        self._acc.feed(event)
        reason = FinishReason(unified="error", raw=event.error.code)
        self._acc.feed(Finish(status="failed", reason=reason, error=event.error))
        self.done = True

    def result(self) -> Result:
        """The reply (``in_progress`` while it runs)."""
        return self._acc.result()
