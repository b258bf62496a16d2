"""The library's entry points: decode a whole stream, or decode incrementally.

``decode(data)`` turns the bytes of a whole stream into a :class:`~polystream.Result`;
:class:`StreamDecoder` does the same incrementally (``feed`` / ``close`` / ``result``),
detecting the dialect from the first bytes when asked to (``dialect="auto"``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, get_args

from polystream.accumulate import Accumulator, Result
from polystream.dialects import DialectDecoder, get_dialect
from polystream.dialects._base import Coalesce, UsageRun
from polystream.dialects._detect import Detector
from polystream.errors import LocalProtocolError, RemoteProtocolError
from polystream.events import Event

__all__ = ["StreamDecoder", "decode", "decode_events"]

AUTO: Final = "auto"

_SLICE: Final = 64 * 1024
"""Slice size when :func:`decode` is given a whole body in memory: the events of one
slice at a time are alive (they are dropped once accumulated), not every event of the
stream at once."""


class StreamDecoder:
    """Decode one stream incrementally into unified events, and rebuild its reply.

    Args:
        dialect: A dialect name, or ``"auto"`` to detect it from the content
            (see :mod:`polystream.dialects._detect` for the rules).
        strict: Raise typed protocol errors instead of emitting error events; unknown
            events become errors too.
        keep_raw: Emit :class:`~polystream.events.Raw` events with each native event.
        keep_events: Keep every event so that :meth:`native` can rebuild the
            provider's own final object (costs memory proportional to the stream).
        framing: For ``gemini_generate``: ``"sse"``, ``"json_array"`` or ``"auto"``.
        coalesce: The dialect decoder's fast path
            (:data:`~polystream.dialects._base.Coalesce`), given to it when it is made:
            ``"result"`` when the events go only to the accumulator (as
            :func:`decode` does: :meth:`native` then rebuilds from the coalesced
            events); ``"usage"`` / ``"usage_texts"`` for an encoder, with
            :meth:`take_runs`. A dialect without that fast path decodes as ``"off"``.

    Raises:
        LocalProtocolError: ``coalesce`` is not a mode.

    Usage::

        decoder = StreamDecoder("anthropic_messages")
        for chunk in chunks:
            for event in decoder.feed(chunk):
                ...
        decoder.close()
        print(decoder.result().text)
    """

    def __init__(
        self,
        dialect: str = AUTO,
        *,
        strict: bool = False,
        keep_raw: bool = False,
        keep_events: bool = False,
        framing: str = AUTO,
        coalesce: Coalesce = "off",
        **options: Any,
    ) -> None:
        self.strict = strict
        self._options: dict[str, Any] = {"strict": strict, "keep_raw": keep_raw, **options}
        if framing != AUTO:
            self._options["framing"] = framing
        if coalesce not in get_args(Coalesce):
            raise LocalProtocolError(
                f"coalesce must be one of {', '.join(get_args(Coalesce))} (got {coalesce!r})"
            )
        self._coalesce: Coalesce = coalesce
        self._dialect_name: str | None = None
        self._decoder: DialectDecoder | None = None
        # The input while the dialect is detected, kept in pieces: joined once, when
        # the dialect is known (or at close, to report what it was).
        self._prefix: list[bytes] = []
        self._detector = Detector()
        self._accumulator = Accumulator(strict=strict)
        self._events: list[Event] | None = [] if keep_events else None
        self._closed = False
        if dialect != AUTO:
            self._start(dialect)

    @property
    def dialect(self) -> str | None:
        """The dialect being decoded (None until ``auto`` has detected it)."""
        return self._dialect_name

    @property
    def events(self) -> list[Event]:
        """Every event so far (only with ``keep_events=True``)."""
        if self._events is None:
            raise LocalProtocolError("events are kept only with keep_events=True")
        return self._events

    @property
    def dialect_decoder(self) -> DialectDecoder | None:
        """The dialect's own decoder (None until ``auto`` has detected the dialect)."""
        return self._decoder

    @property
    def coalesce(self) -> Coalesce:
        """The ``coalesce`` mode asked for (the dialect decoder's own
        ``coalesce`` says what it uses)."""
        return self._coalesce

    def coalesce_for(self, dialect: str) -> Coalesce:
        """The :data:`~polystream.dialects._base.Coalesce` mode the decoder of
        ``dialect`` is made with, once the dialect is known: :attr:`coalesce` (a
        subclass may choose by dialect)."""
        return self.coalesce

    def _start(self, dialect: str) -> None:
        info = get_dialect(dialect)
        self._dialect_name = info.name
        coalesce = self.coalesce_for(info.name)
        if coalesce == "off":
            self._decoder = info.decoder(**self._options)
        else:
            self._decoder = info.decoder(coalesce=coalesce, **self._options)

    def take_runs(self) -> list[UsageRun]:
        """The runs of usage updates the last :meth:`feed` or :meth:`close` gave as one
        (see :meth:`~polystream.dialects._base.DialectDecoder.take_runs`): none unless
        made with ``coalesce="usage"`` or ``"usage_texts"``."""
        decoder = self._decoder
        return [] if decoder is None else decoder.take_runs()

    def feed(self, data: bytes) -> list[Event]:
        """Consume a chunk; return the unified events it completed.

        Raises:
            RemoteProtocolError: Framing errors; dialect errors in strict mode;
                detection failure.
        """
        if self._closed:
            raise LocalProtocolError("feed() after close()")
        if self._decoder is None:
            # The input is kept in pieces (joined once, when the dialect is known) and
            # the detector reads each piece once.
            self._prefix.append(data)
            found = self._detector.feed(data)
            if found is None:
                return []
            joined = b"".join(self._prefix)
            self._prefix = []
            self._dialect_name = found[0]
            if len(get_dialect(found[0]).framings) > 1:
                self._options.setdefault("framing", found[1])
            self._start(found[0])
            data = joined
        assert self._decoder is not None
        events = self._decoder.feed(data)
        self._absorb(events)
        return events

    def close(self) -> list[Event]:
        """End of input; returns the remaining events (the last is the Finish).

        Raises:
            RemoteProtocolError: ``auto`` could not detect any dialect.
        """
        if self._closed:
            return []
        self._closed = True
        if self._decoder is None:
            joined = b"".join(self._prefix)
            if not joined.strip():
                raise RemoteProtocolError("empty input: no stream to decode", byte_offset=0)
            raise RemoteProtocolError(
                "could not detect the dialect of this input (not a stream of any known dialect)",
                byte_offset=0,
            )
        events = self._decoder.close()
        self._absorb(events)
        return events

    def _absorb(self, events: list[Event]) -> None:
        self._accumulator.feed_all(events)
        if self._events is not None:
            self._events.extend(events)

    @property
    def snapshot(self) -> Result:
        """The reply so far."""
        return self._accumulator.snapshot

    def result(self) -> Result:
        """The reply (final once :meth:`close` has been called)."""
        return self._accumulator.result()

    def native(self) -> dict[str, Any]:
        """The provider's own final object (needs ``keep_events=True``)."""
        if self._dialect_name is None:
            raise LocalProtocolError("no dialect detected yet")
        return get_dialect(self._dialect_name).rebuild(self.events)


class _ResultDecoder(StreamDecoder):
    """:class:`StreamDecoder` for :func:`decode`, whose events go only to the
    accumulator: the dialect decoder may coalesce them (``coalesce="result"``)."""

    def __init__(self, dialect: str = AUTO, **options: Any) -> None:
        options.setdefault("coalesce", "result")
        super().__init__(dialect, **options)


def decode_events(data: bytes, dialect: str = AUTO, **options: Any) -> list[Event]:
    """Decode a whole stream held in memory into its list of unified events."""
    decoder = StreamDecoder(dialect, **options)
    return decoder.feed(data) + decoder.close()


def decode(data: bytes | Iterable[bytes], dialect: str = AUTO, **options: Any) -> Result:
    """Decode a whole stream and rebuild its reply.

    Args:
        data: The stream's bytes, whole or as an iterable of chunks.
        dialect: A dialect name or ``"auto"``.
        **options: As for :class:`StreamDecoder` (``strict``, ``framing``, ...).

    Returns:
        The unified :class:`~polystream.Result`.
    """
    decoder = _ResultDecoder(dialect, **options)
    if isinstance(data, bytes | bytearray | memoryview):
        body = data if isinstance(data, bytes) else bytes(data)
        size = len(body)
        pos = 0
        step = _SLICE
        while pos < size:
            # The events each feed returns are dropped here: only the accumulator
            # keeps what the Result needs (decoders are chunking-invariant, so the
            # Result is the same as for one piece), and the dialect's decoder may
            # give them coalesced (_ResultDecoder).
            decoder.feed(body[pos : pos + step])
            pos += step
            # While ``auto`` is still detecting, each slice is kept and read by the
            # detector: doubling the slice keeps the number of feeds until the
            # dialect is known small.
            step = _SLICE if decoder.dialect is not None else step * 2
    else:
        for chunk in data:
            decoder.feed(chunk)
    decoder.close()
    return decoder.result()
