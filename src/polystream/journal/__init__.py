"""The event journal: what a gateway sent on each stream, so that a client can resume.

A stream's journal is an ordered list of *entries*: one SSE event's exact bytes as sent
to the client, with its cursor (the ``sequence_number`` for OpenAI Responses, the
``event_id`` for Interactions, the gateway's own counter, sent as the SSE ``id:``, for
every other dialect). Resuming means replaying the entries after a cursor, then following
the stream live while it is still running.

Backends share one interface: :class:`MemoryJournal` here (the default, one process),
``polystream.server.journal_sqlite.SQLiteJournal`` (a file) and
``polystream.server.journal_redis.RedisJournal`` (Redis Streams, shared by several
gateway instances behind a load balancer).

Retention is bounded (documented defaults in :class:`Retention`): the number of streams
kept, the bytes kept per stream, the bytes kept in all (the memory journal), and how
long a stream is kept after it finished. A stream that outgrows its byte budget stops
being resumable (the journal says so) rather than growing without bound.

A stream id is written once: :meth:`Journal.create` of an id the journal still holds
(not expired) raises :class:`JournalConflict` and leaves that stream as it is.
"""

from __future__ import annotations

import abc
import itertools
from collections import OrderedDict
from typing import Any

import msgspec

__all__ = ["Entry", "Journal", "JournalConflict", "JournalMiss", "MemoryJournal", "Retention"]


class Entry(msgspec.Struct, frozen=True, gc=False):
    """One journalled SSE event, as a read gives it (not tracked by the garbage
    collector: it holds only an int, a str and bytes, so it can be in no reference
    cycle, and a resume may read many).

    Fields:
        position: 0-based position in the stream.
        cursor: The client-visible cursor of this event.
        data: The exact bytes sent.
    """

    position: int
    cursor: str
    data: bytes


class Retention(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds on what a journal keeps.

    Fields:
        max_streams: Streams kept; the oldest are dropped first (default 10,000).
        max_stream_bytes: Bytes kept per stream (default 16 MiB); past it the stream
            is marked overflowed and can no longer be resumed.
        ttl_seconds: How long a stream is kept after its last write (default 1 hour;
            enforced by the Redis and SQLite backends, and by the memory backend's
            ``now`` argument).
        max_total_bytes: Bytes of entries the memory journal keeps in all streams
            together (default 256 MiB). Past it, finished streams are dropped, the
            oldest first, then the oldest running streams lose their entries and are
            marked not resumable. (SQLite and Redis keep theirs on disk and in Redis,
            whose own memory policy bounds it.)
    """

    max_streams: int = 10_000
    max_stream_bytes: int = 16 * 1024 * 1024
    ttl_seconds: float = 3600.0
    max_total_bytes: int = 256 * 1024 * 1024


class JournalMiss(LookupError):
    """The stream is unknown, expired, or overflowed its byte budget; or the cursor is
    not in it."""


class JournalConflict(Exception):
    """:meth:`Journal.create` of a stream id the journal still holds: the stream there
    is left as it is.

    Attributes:
        stream_id: The id that is taken.
    """

    def __init__(self, stream_id: str) -> None:
        super().__init__(f"the journal already holds a stream with id {stream_id!r}")
        self.stream_id = stream_id


class Journal(abc.ABC):
    """The journal interface (see the module docstring).

    All methods are synchronous; backends that do I/O say so with ``blocking = True``
    so that async shells run them in a worker thread.
    """

    blocking = False

    def __init__(self, retention: Retention | None = None) -> None:
        self.retention = retention or Retention()

    @abc.abstractmethod
    def create(self, stream_id: str, meta: dict[str, Any], *, now: float = 0.0) -> None:
        """Start a stream's journal with its metadata (dialect, model, ...).

        Raises:
            JournalConflict: The journal holds a stream with this id (finished or not,
                until it expires or is dropped); that stream is left untouched.
        """

    @abc.abstractmethod
    def append(self, stream_id: str, entries: list[tuple[str, bytes]], *, now: float = 0.0) -> None:
        """Append ``(cursor, bytes)`` entries, in order."""

    @abc.abstractmethod
    def finish(self, stream_id: str, *, now: float = 0.0) -> None:
        """Mark the stream complete (no entry will follow)."""

    @abc.abstractmethod
    def meta(self, stream_id: str) -> dict[str, Any]:
        """The stream's metadata. Raises :class:`JournalMiss`."""

    @abc.abstractmethod
    def read_after(self, stream_id: str, cursor: str | None) -> tuple[list[Entry], bool]:
        """Entries after ``cursor`` (all when None), and whether the stream finished.

        Raises:
            JournalMiss: Unknown, expired or overflowed stream, or a cursor that is not
                in the stream.
        """

    def read_from(self, stream_id: str, position: int) -> tuple[list[Entry], bool]:
        """Entries from ``position`` on, and whether the stream finished (a resumed
        client following a live stream polls this: backends read only those entries;
        this default reads them all).

        Raises:
            JournalMiss: As :meth:`read_after`.
        """
        entries, finished = self.read_after(stream_id, None)
        return entries[position:], finished


class _Stream:
    """One stream's journal in memory: its entries' cursors and bytes in two lists, the
    entry objects made only when entries are read (a resume, which is rare), and the
    cursor -> position index made by the first read that looks a cursor up (kept up to
    date after). An entry costs its two lists' slots beside its cursor and bytes, which
    the gateway made anyway: no object, index entry or position of its own while no
    client resumes."""

    __slots__ = (
        "cursors",
        "data",
        "evicted",
        "finished",
        "index",
        "meta",
        "overflowed",
        "size",
        "touched",
    )

    def __init__(self, meta: dict[str, Any], now: float) -> None:
        self.meta = meta
        self.cursors: list[str] = []
        self.data: list[bytes] = []
        self.index: dict[str, int] | None = None
        self.size = 0  # bytes appended (held while not overflowed)
        self.finished = False
        self.overflowed = False  # holds no entries any more: not resumable
        self.evicted = False  # ... for the journal's total bound (not its own)
        self.touched = now

    def drop_entries(self) -> None:
        """Let the entries go (the stream is no longer resumable)."""
        self.overflowed = True
        self.cursors = []
        self.data = []
        self.index = None

    def entries(self, start: int) -> list[Entry]:
        """The entries from position ``start`` on."""
        cursors = self.cursors
        return [Entry(n, cursors[n], data) for n, data in enumerate(self.data[start:], start)]

    def position(self, cursor: str) -> int | None:
        """The position of the last entry with ``cursor`` (None: no such entry)."""
        index = self.index
        if index is None:
            index = self.index = {c: n for n, c in enumerate(self.cursors)}
        return index.get(cursor)


class MemoryJournal(Journal):
    """An in-process journal (the default). Sans-I/O; bounded by :class:`Retention`,
    its total bytes included (:attr:`Retention.max_total_bytes`)."""

    def __init__(self, retention: Retention | None = None) -> None:
        super().__init__(retention)
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._total = 0  # bytes held by the streams' entries
        # The streams holding entries, by state, the oldest first (what the total bound
        # drops: finished ones first, then running ones).
        self._running: dict[str, None] = {}
        self._finished: dict[str, None] = {}

    @property
    def total_bytes(self) -> int:
        """Bytes of entries held, in all streams."""
        return self._total

    def _get(self, stream_id: str, now: float | None = None) -> _Stream:
        stream = self._streams.get(stream_id)
        if stream is None:
            raise JournalMiss(f"no journal for stream {stream_id!r} (unknown or expired)")
        if now is not None and now - stream.touched > self.retention.ttl_seconds:
            self._drop(stream_id)
            raise JournalMiss(f"the journal of stream {stream_id!r} expired")
        return stream

    def _drop(self, stream_id: str) -> None:
        """Forget a stream."""
        stream = self._streams.pop(stream_id)
        if not stream.overflowed:
            self._total -= stream.size
        self._running.pop(stream_id, None)
        self._finished.pop(stream_id, None)

    def create(self, stream_id: str, meta: dict[str, Any], *, now: float = 0.0) -> None:
        held = self._streams.get(stream_id)
        if held is not None:
            if now - held.touched <= self.retention.ttl_seconds:
                raise JournalConflict(stream_id)
            self._drop(stream_id)
        self._streams[stream_id] = _Stream(dict(meta), now)
        self._running[stream_id] = None
        while len(self._streams) > self.retention.max_streams:
            self._drop(next(iter(self._streams)))
        # Expire streams idle past the TTL (the 16 oldest; a bounded cost per stream).
        for key in list(itertools.islice(self._streams, 16)):
            if now - self._streams[key].touched > self.retention.ttl_seconds:
                self._drop(key)

    def append(self, stream_id: str, entries: list[tuple[str, bytes]], *, now: float = 0.0) -> None:
        stream = self._streams.get(stream_id)
        if stream is None or stream.overflowed:
            return
        stream.touched = now
        held = size = stream.size
        for _, data in entries:
            size += len(data)
        stream.size = size
        if size > self.retention.max_stream_bytes:
            self._total -= held
            self._running.pop(stream_id, None)
            stream.drop_entries()
            return
        self._total += size - held
        index = stream.index
        cursors = stream.cursors
        if index is not None:
            for n, (cursor, _) in enumerate(entries, len(cursors)):
                index[cursor] = n
        if len(entries) == 1:
            cursor, data = entries[0]
            cursors.append(cursor)
            stream.data.append(data)
        else:
            cursors.extend([cursor for cursor, _ in entries])
            stream.data.extend([data for _, data in entries])
        if self._total > self.retention.max_total_bytes:
            self._shrink()

    def _shrink(self) -> None:
        """Keep the total bound: drop finished streams, the oldest first, then take the
        entries of the oldest running ones (no longer resumable)."""
        limit = self.retention.max_total_bytes
        finished = self._finished
        while self._total > limit and finished:
            self._drop(next(iter(finished)))
        running = self._running
        while self._total > limit and running:
            stream_id = next(iter(running))
            del running[stream_id]
            stream = self._streams[stream_id]
            self._total -= stream.size
            stream.evicted = True
            stream.drop_entries()

    def finish(self, stream_id: str, *, now: float = 0.0) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None:
            stream.finished = True
            stream.touched = now
            if stream_id in self._running:
                del self._running[stream_id]
                self._finished[stream_id] = None

    def meta(self, stream_id: str) -> dict[str, Any]:
        return dict(self._get(stream_id).meta)

    def read_after(self, stream_id: str, cursor: str | None) -> tuple[list[Entry], bool]:
        stream = self._readable(stream_id)
        if cursor is None:
            return stream.entries(0), stream.finished
        position = stream.position(cursor)
        if position is None:
            raise JournalMiss(f"cursor {cursor!r} is not in stream {stream_id!r}")
        return stream.entries(position + 1), stream.finished

    def read_from(self, stream_id: str, position: int) -> tuple[list[Entry], bool]:
        stream = self._readable(stream_id)
        return stream.entries(max(position, 0)), stream.finished

    def _readable(self, stream_id: str) -> _Stream:
        stream = self._get(stream_id)
        if stream.evicted:
            raise JournalMiss(
                f"stream {stream_id!r} was dropped to keep the journal within its total "
                f"bytes ({self.retention.max_total_bytes}) and cannot be resumed"
            )
        if stream.overflowed:
            raise JournalMiss(
                f"stream {stream_id!r} outgrew the journal's byte budget "
                f"({self.retention.max_stream_bytes} bytes) and cannot be resumed"
            )
        return stream
