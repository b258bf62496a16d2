"""The library's entry points: decode a whole stream, or decode incrementally.

``decode(data)`` turns the bytes of a whole stream into a :class:`~polystream.Result`;
:class:`StreamDecoder` does the same incrementally (``feed`` / ``close`` / ``result``),
detecting the dialect from the first bytes when asked to (``dialect="auto"``).

A dialect given by name that recognises nothing in the stream (no block, no error of the
provider's own: only unknown events, protocol errors, a cut) is checked against what
detection makes of the first :data:`HINT_BYTES` bytes: when the stream looks like
another dialect, the protocol errors raised or emitted and the Finish's error say so
(``... (the stream looks like openai_speech)``), and a ``dialect_mismatch``
:class:`~polystream.events.StreamWarning` comes before the Finish.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, get_args

import msgspec

from polystream.accumulate import Accumulator, Result
from polystream.dialects import DialectDecoder, get_dialect
from polystream.dialects._base import Coalesce, UsageRun
from polystream.dialects._detect import RAW, Detector, dialect_for_media_type
from polystream.errors import LocalProtocolError, RemoteProtocolError
from polystream.events import BlockStart, ErrorEvent, Event, Finish, StreamWarning

__all__ = ["HINT_BYTES", "StreamDecoder", "decode", "decode_events"]

AUTO: Final = "auto"

HINT_BYTES: Final = 64 * 1024
"""The first bytes of a stream decoded in a dialect given by name that are kept, until
that dialect recognises something in it, to say what the stream looks like otherwise
(see the module docstring)."""

MISMATCH: Final = "dialect_mismatch"
"""The code of the warning that the stream looks like another dialect."""

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
        content_type: The response's ``Content-Type``, when known. A media type that a
            dialect's :attr:`~polystream.dialects._spec.DetectSpec.media_types` claims
            (``audio/mpeg``: ``openai_speech``) is a body in that dialect's ``raw``
            framing: ``"auto"`` decodes it so at once, and that dialect, given by name,
            decodes it in the ``raw`` framing unless ``framing`` says otherwise. The
            dialect's decoder gets it as its ``content_type`` option (the audio's
            format). Ignored for another dialect.

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
        content_type: str | None = None,
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
        self._content_type = content_type
        # A dialect given by name is watched until it recognises something: its first
        # bytes (up to HINT_BYTES) are kept, in the pieces they came in, until an error
        # asks what they look like; then a detector reads them, and each later piece
        # once, until it knows.
        self._watching = False
        self._head: list[bytes] = []
        self._head_size = 0  # bytes kept (or read by the hint detector)
        self._hint_read = 0  # bytes the hint detector read
        self._hinter: Detector | None = None
        self._hint_done = False
        self._looks_like: str | None = None
        if dialect != AUTO:
            self._watching = True
            self._start(dialect)
        else:
            claimed = dialect_for_media_type(content_type)
            if claimed is not None:
                self._start(claimed, media_type=content_type)

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

    @property
    def looks_like(self) -> str | None:
        """For a dialect given by name that recognised nothing in the stream so far:
        the dialect the stream looks like instead, once an error or the end made
        polystream check (see the module docstring); else None."""
        return self._looks_like

    def _start(self, dialect: str, *, media_type: str | None = None) -> None:
        info = get_dialect(dialect)
        if media_type is None and dialect_for_media_type(self._content_type) == info.name:
            media_type = self._content_type
        if media_type is not None and RAW in info.framings:
            self._options.setdefault("framing", RAW)
            self._options["content_type"] = media_type
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
            self._start(found[0], media_type=self._detector.media_type)
            data = joined
        assert self._decoder is not None
        if not self._watching:
            events = self._decoder.feed(data)
        else:
            self._keep(data)
            try:
                events = self._decoder.feed(data)
            except RemoteProtocolError as exc:
                hinted = self._hinted(exc)
                if hinted is None:
                    raise
                raise hinted from None
            events = self._watch(events)
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
        if not self._watching:
            events = self._decoder.close()
        else:
            try:
                events = self._decoder.close()
            except RemoteProtocolError as exc:
                hinted = self._hinted(exc)
                if hinted is None:
                    raise
                raise hinted from None
            events = self._watch(events)
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

    # -- what the stream looks like, for a dialect given by name ---------------------------

    def _keep(self, data: bytes) -> None:
        room = HINT_BYTES - self._head_size
        if room <= 0 or self._hint_done or not data:
            return
        piece = data if len(data) <= room else data[:room]
        if type(piece) is not bytes:
            piece = bytes(piece)
        self._head_size += len(piece)
        if self._hinter is None:
            self._head.append(piece)
        else:
            self._read(piece)

    def _read(self, piece: bytes) -> None:
        """The hint detector reads the next piece of the first bytes."""
        assert self._hinter is not None
        self._hint_read += len(piece)
        try:
            found = self._hinter.feed(piece)
        except RemoteProtocolError:
            self._hint_done = True  # detection failed: nothing to say
            return
        if found is not None:
            self._hint_done = True
            if found[0] != self._dialect_name:
                self._looks_like = found[0]
        elif self._hint_read >= HINT_BYTES:
            self._hint_done = True

    def _hint(self) -> str | None:
        """The dialect the first bytes look like, when it is not the one decoding (what
        detection makes of them; None while it needs more)."""
        if self._hinter is None:
            self._hinter = Detector()
            head = self._head
            self._head = []
            for piece in head:
                if self._hint_done:
                    break
                self._read(piece)
        return self._looks_like

    def _hinted(self, exc: RemoteProtocolError) -> RemoteProtocolError | None:
        """``exc`` saying what the stream looks like (None: nothing to say)."""
        looks = self._hint()
        if looks is None:
            return None
        return type(exc)(
            f"{exc.message} (the stream looks like {looks})",
            dialect=exc.dialect,
            event_index=exc.event_index,
            byte_offset=exc.byte_offset,
        )

    def _watch(self, events: list[Event]) -> list[Event]:
        """Until the dialect recognises something: its protocol errors and its Finish
        say what the stream looks like, with a warning before the Finish."""
        out: list[Event] | None = None
        for i, event in enumerate(events):
            kind = type(event)
            if kind is BlockStart or (kind is ErrorEvent and event.error.kind != "protocol"):  # type: ignore[union-attr]
                self._watching = False  # recognised: nothing to say
                self._head = []
                self._hinter = None
                break
            if kind is not ErrorEvent and kind is not Finish:
                continue
            looks = self._hint()
            if looks is None:
                continue
            out = list(events) if out is None else out
            at = len(out) - len(events) + i  # (a warning inserted before moves it)
            out[at] = _said(event, looks)  # type: ignore[arg-type]
            if kind is Finish:
                message = (
                    f"nothing in the stream was recognised as {self._dialect_name}: "
                    f"the stream looks like {looks} (decode it as {looks}, or auto)"
                )
                out.insert(at, StreamWarning(code=MISMATCH, message=message))
            if kind is Finish:
                self._watching = False  # the end: nothing more to say
                self._head = []
                self._hinter = None
        return events if out is None else out


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


def _said(event: ErrorEvent | Finish, looks: str) -> Any:
    """``event`` whose error's message says what the stream looks like."""
    error = event.error
    if error is None:
        return event
    message = f"{error.message} (the stream looks like {looks})"
    return msgspec.structs.replace(event, error=msgspec.structs.replace(error, message=message))
