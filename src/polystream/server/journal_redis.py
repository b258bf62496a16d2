"""A journal in Redis Streams, shared by several gateway instances.

Layout, per stream ``S`` (prefix configurable): ``<prefix>:S:meta`` a hash
(``meta`` JSON, ``finished``, ``overflowed``, ``size``, ``count``) and
``<prefix>:S:entries`` a Redis Stream whose records hold ``cursor``, ``data`` and
``position``, under the record id ``0-<position + 1>``, so that a client following a
live stream reads only the records after the last it has. Both keys expire
``ttl_seconds`` after the last write; the byte budget per stream is enforced on append.
``max_streams`` is left to Redis' own memory policy (keys expire by TTL). A stream is
created by setting its ``meta`` field only where there is none (``HSETNX``, in one
script with the rest of its creation): of two instances creating one id, one gets
:class:`~polystream.journal.JournalConflict`.
"""

from __future__ import annotations

import json
from typing import Any

from polystream.journal import Entry, Journal, JournalConflict, JournalMiss, Retention

__all__ = ["RedisJournal"]

_CREATE = """
if redis.call('HSETNX', KEYS[1], 'meta', ARGV[1]) == 0 then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'finished', 0, 'overflowed', 0, 'size', 0, 'count', 0)
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""
"""A stream's creation, in one step (a Lua script runs atomically): its meta where the
id has none, what an earlier append to the id left reset, its TTL; 0 when the id is
held."""


class RedisJournal(Journal):
    """Journal in Redis Streams. Blocking (redis-py); async shells use a thread.

    Args:
        url: A Redis URL (``redis://127.0.0.1:6379/0``).
        retention: Bounds.
        prefix: Key prefix.
    """

    blocking = True

    def __init__(
        self, url: str, retention: Retention | None = None, *, prefix: str = "polystream:journal"
    ) -> None:
        super().__init__(retention)
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise RuntimeError("the Redis journal needs `pip install redis`") from exc
        self._redis = redis.Redis.from_url(url)
        self._prefix = prefix
        self._ttl = max(1, int(self.retention.ttl_seconds))

    def _keys(self, stream_id: str) -> tuple[str, str]:
        return f"{self._prefix}:{stream_id}:meta", f"{self._prefix}:{stream_id}:entries"

    def close(self) -> None:
        """Close the connection pool."""
        self._redis.close()

    def create(self, stream_id: str, meta: dict[str, Any], *, now: float = 0.0) -> None:
        meta_key, entries_key = self._keys(stream_id)
        if not self._redis.eval(_CREATE, 2, meta_key, entries_key, json.dumps(meta), self._ttl):
            raise JournalConflict(stream_id)

    def append(self, stream_id: str, entries: list[tuple[str, bytes]], *, now: float = 0.0) -> None:
        meta_key, entries_key = self._keys(stream_id)
        added = sum(len(data) for _, data in entries)
        size = self._redis.hincrby(meta_key, "size", added)
        if size > self.retention.max_stream_bytes:
            pipe = self._redis.pipeline()
            pipe.hset(meta_key, "overflowed", 1)
            pipe.delete(entries_key)
            pipe.execute()
            return
        count = self._redis.hincrby(meta_key, "count", len(entries)) - len(entries)
        pipe = self._redis.pipeline()
        for i, (cursor, data) in enumerate(entries, count):
            fields = {"cursor": cursor, "data": data, "position": i}
            pipe.xadd(entries_key, fields, id=f"0-{i + 1}")  # type: ignore[arg-type]
        pipe.expire(entries_key, self._ttl)
        pipe.expire(meta_key, self._ttl)
        pipe.execute()

    def finish(self, stream_id: str, *, now: float = 0.0) -> None:
        meta_key, _ = self._keys(stream_id)
        self._redis.hset(meta_key, "finished", 1)

    def _meta(self, stream_id: str) -> dict[bytes, bytes]:
        meta_key, _ = self._keys(stream_id)
        row: dict[bytes, bytes] = self._redis.hgetall(meta_key)  # type: ignore[assignment]
        if not row:
            raise JournalMiss(f"no journal for stream {stream_id!r} (unknown or expired)")
        return row

    def meta(self, stream_id: str) -> dict[str, Any]:
        meta: dict[str, Any] = json.loads(self._meta(stream_id)[b"meta"])
        return meta

    def read_after(self, stream_id: str, cursor: str | None) -> tuple[list[Entry], bool]:
        finished = self._readable(stream_id)
        entries = self._entries(stream_id, 0)
        if cursor is None:
            return entries, finished
        for i, entry in enumerate(entries):
            if entry.cursor == cursor:
                return entries[i + 1 :], finished
        raise JournalMiss(f"cursor {cursor!r} is not in stream {stream_id!r}")

    def read_from(self, stream_id: str, position: int) -> tuple[list[Entry], bool]:
        finished = self._readable(stream_id)
        return self._entries(stream_id, position), finished

    def _readable(self, stream_id: str) -> bool:
        """Whether the stream finished (JournalMiss: unknown, or past its budget)."""
        row = self._meta(stream_id)
        if row.get(b"overflowed") == b"1":
            raise JournalMiss(
                f"stream {stream_id!r} outgrew the journal's byte budget and cannot be resumed"
            )
        return row.get(b"finished") == b"1"

    def _entries(self, stream_id: str, start: int) -> list[Entry]:
        """The entries from position ``start`` on (records whose id is not their position,
        as an earlier layout wrote them, are read too and kept by their position)."""
        _, entries_key = self._keys(stream_id)
        records: Any = self._redis.xrange(entries_key, min=f"0-{start + 1}")
        entries = [
            Entry(int(fields[b"position"]), fields[b"cursor"].decode(), bytes(fields[b"data"]))
            for _, fields in records
        ]
        return [e for e in entries if e.position >= start] if start else entries
