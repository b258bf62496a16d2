"""A journal in a SQLite file: survives a gateway restart; one host."""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any

from polystream.journal import Entry, Journal, JournalConflict, JournalMiss, Retention

__all__ = ["SQLiteJournal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS streams (
    id TEXT PRIMARY KEY,
    meta TEXT NOT NULL,
    finished INTEGER NOT NULL DEFAULT 0,
    overflowed INTEGER NOT NULL DEFAULT 0,
    size INTEGER NOT NULL DEFAULT 0,
    touched REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    stream TEXT NOT NULL,
    position INTEGER NOT NULL,
    cursor TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (stream, position)
);
CREATE INDEX IF NOT EXISTS entries_cursor ON entries (stream, cursor);
CREATE INDEX IF NOT EXISTS streams_touched ON streams (touched);
"""


class SQLiteJournal(Journal):
    """Journal in a SQLite file (WAL mode). Blocking: async shells use a thread.

    Args:
        path: The database file.
        retention: Bounds (streams, bytes per stream, TTL after the last write).
    """

    blocking = True

    def __init__(self, path: str, retention: Retention | None = None) -> None:
        super().__init__(retention)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def create(self, stream_id: str, meta: dict[str, Any], *, now: float = 0.0) -> None:
        with self._lock:
            db = self._db
            # (IMMEDIATE: the write lock from the start, so that two processes sharing
            # the file cannot both find the id free.)
            db.execute("BEGIN IMMEDIATE")
            held = db.execute("SELECT touched FROM streams WHERE id = ?", (stream_id,)).fetchone()
            if held is not None and held[0] >= now - self.retention.ttl_seconds:
                db.execute("ROLLBACK")
                raise JournalConflict(stream_id)
            db.execute("DELETE FROM entries WHERE stream = ?", (stream_id,))
            db.execute(
                "INSERT OR REPLACE INTO streams (id, meta, touched) VALUES (?, ?, ?)",
                (stream_id, json.dumps(meta), now),
            )
            # Retention: expired streams, then the oldest beyond max_streams.
            expired = [
                row[0]
                for row in db.execute(
                    "SELECT id FROM streams WHERE touched < ?",
                    (now - self.retention.ttl_seconds,),
                )
            ]
            excess = [
                row[0]
                for row in db.execute(
                    "SELECT id FROM streams ORDER BY touched DESC LIMIT -1 OFFSET ?",
                    (self.retention.max_streams,),
                )
            ]
            for old in {*expired, *excess}:
                db.execute("DELETE FROM entries WHERE stream = ?", (old,))
                db.execute("DELETE FROM streams WHERE id = ?", (old,))
            db.execute("COMMIT")

    def append(self, stream_id: str, entries: list[tuple[str, bytes]], *, now: float = 0.0) -> None:
        with self._lock:
            db = self._db
            # The next position from the primary key's last one (a count of the stream's
            # entries would read them all on every append).
            row = db.execute(
                "SELECT size, overflowed, "
                "(SELECT COALESCE(MAX(position) + 1, 0) FROM entries WHERE stream = ?) "
                "FROM streams WHERE id = ?",
                (stream_id, stream_id),
            ).fetchone()
            if row is None or row[1]:
                return
            size, _, count = row
            added = sum(len(data) for _, data in entries)
            db.execute("BEGIN")
            if size + added > self.retention.max_stream_bytes:
                db.execute("DELETE FROM entries WHERE stream = ?", (stream_id,))
                db.execute("UPDATE streams SET overflowed = 1 WHERE id = ?", (stream_id,))
            else:
                db.executemany(
                    "INSERT INTO entries (stream, position, cursor, data) VALUES (?, ?, ?, ?)",
                    [(stream_id, count + i, c, d) for i, (c, d) in enumerate(entries)],
                )
                db.execute(
                    "UPDATE streams SET size = ?, touched = ? WHERE id = ?",
                    (size + added, now, stream_id),
                )
            db.execute("COMMIT")

    def finish(self, stream_id: str, *, now: float = 0.0) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE streams SET finished = 1, touched = ? WHERE id = ?", (now, stream_id)
            )

    def _row(self, stream_id: str) -> tuple[str, int, int]:
        row = self._db.execute(
            "SELECT meta, finished, overflowed FROM streams WHERE id = ?", (stream_id,)
        ).fetchone()
        if row is None:
            raise JournalMiss(f"no journal for stream {stream_id!r} (unknown or expired)")
        return row  # type: ignore[no-any-return]

    def meta(self, stream_id: str) -> dict[str, Any]:
        with self._lock:
            meta: dict[str, Any] = json.loads(self._row(stream_id)[0])
            return meta

    def read_after(self, stream_id: str, cursor: str | None) -> tuple[list[Entry], bool]:
        with self._lock:
            finished = self._readable(stream_id)
            start = 0
            if cursor is not None:
                found = self._db.execute(
                    "SELECT position FROM entries WHERE stream = ? AND cursor = ?",
                    (stream_id, cursor),
                ).fetchone()
                if found is None:
                    raise JournalMiss(f"cursor {cursor!r} is not in stream {stream_id!r}")
                start = found[0] + 1
            return self._entries(stream_id, start), finished

    def read_from(self, stream_id: str, position: int) -> tuple[list[Entry], bool]:
        with self._lock:
            finished = self._readable(stream_id)
            return self._entries(stream_id, position), finished

    def _readable(self, stream_id: str) -> bool:
        """Whether the stream finished (JournalMiss: unknown, or past its budget)."""
        _, finished, overflowed = self._row(stream_id)
        if overflowed:
            raise JournalMiss(
                f"stream {stream_id!r} outgrew the journal's byte budget and cannot be resumed"
            )
        return bool(finished)

    def _entries(self, stream_id: str, start: int) -> list[Entry]:
        rows = self._db.execute(
            "SELECT position, cursor, data FROM entries WHERE stream = ? AND position >= ? "
            "ORDER BY position",
            (stream_id, start),
        ).fetchall()
        return [Entry(p, c, bytes(d)) for p, c, d in rows]
