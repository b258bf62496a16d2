"""The three journal backends behind one interface, held to the same behaviour."""

from __future__ import annotations

import gc
import os
import shutil
import socket
import subprocess
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polystream.journal import Journal, JournalConflict, JournalMiss, MemoryJournal, Retention
from polystream.server.journal_redis import RedisJournal
from polystream.server.journal_sqlite import SQLiteJournal


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is missing; .ci/run must install it")
        pytest.skip("redis-server is not installed here (CI installs it)")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def make(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    def factory(retention: Retention | None = None) -> Journal:
        if request.param == "memory":
            return MemoryJournal(retention)
        if request.param == "sqlite":
            return SQLiteJournal(str(tmp_path / "journal.db"), retention)
        url = request.getfixturevalue("redis_url")
        journal = RedisJournal(url, retention, prefix=f"test:{tmp_path.name}")
        return journal

    return factory


def test_append_and_read_after(make) -> None:  # type: ignore[no-untyped-def]
    journal = make()
    journal.create("s1", {"dialect": "anthropic_messages"})
    journal.append("s1", [("1", b"event: a\ndata: {}\n\n"), ("2", b"event: b\ndata: {}\n\n")])
    journal.append("s1", [("3", b"event: c\ndata: {}\n\n")])
    entries, finished = journal.read_after("s1", "1")
    assert [(e.position, e.cursor, e.data) for e in entries] == [
        (1, "2", b"event: b\ndata: {}\n\n"),
        (2, "3", b"event: c\ndata: {}\n\n"),
    ]
    assert finished is False
    journal.finish("s1")
    entries, finished = journal.read_after("s1", None)
    assert [e.cursor for e in entries] == ["1", "2", "3"] and finished is True
    assert journal.read_after("s1", "3") == ([], True)
    assert journal.meta("s1") == {"dialect": "anthropic_messages"}
    assert [e.cursor for e in journal.read_from("s1", 2)[0]] == ["3"]


def test_read_from_every_position_while_the_stream_grows(make) -> None:  # type: ignore[no-untyped-def]
    """What a resumed client following a live stream polls: the entries from a position
    on, as ``read_after`` has them, at every position and after every append."""
    journal = make()
    journal.create("s", {})
    written: list[tuple[str, bytes]] = []
    for batch in ([("a", b"1")], [("b", b"22"), ("c", b"333")], [], [("d", b"4")]):
        if batch:
            journal.append("s", batch)
        written += batch
        whole, finished = journal.read_after("s", None)
        assert [(e.cursor, e.data) for e in whole] == written and not finished
        for position in range(len(written) + 2):
            assert journal.read_from("s", position) == (whole[position:], False)
    journal.finish("s")
    assert journal.read_from("s", 3) == (journal.read_after("s", "c")[0], True)
    assert journal.read_from("s", 4) == ([], True)


class _CountingList(list):  # type: ignore[type-arg]
    """A memory journal's list of entry bytes that counts the items read out of it."""

    def __init__(self, items: list[bytes], seen: list[int]) -> None:
        super().__init__(items)
        self.seen = seen

    def __iter__(self) -> Iterator[bytes]:
        for n, item in enumerate(super().__iter__()):
            self.seen.append(n)
            yield item

    def __getitem__(self, key: Any) -> Any:
        got = super().__getitem__(key)
        if isinstance(key, slice):
            self.seen.extend(range(*key.indices(len(self)))[: len(got)])
        else:
            self.seen.append(key)
        return got


class _CountingProxy:
    """A database connection or Redis client whose entry reads are counted: ``method``
    returns rows (a SQLite cursor's, fetched) or Redis records."""

    def __init__(self, real: Any, method: str, seen: list[int]) -> None:
        self._real = real
        self._method = method
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name != self._method:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if name == "execute" and "FROM entries" in args[0]:
                rows = result.fetchall()
                self._seen.extend(range(len(rows)))
                return _Rows(rows)
            if name == "xrange":
                self._seen.extend(range(len(result)))
            return result

        return counted


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchall(self) -> list[Any]:
        return self.rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None


def test_read_from_reads_only_the_suffix(make) -> None:  # type: ignore[no-untyped-def]
    """A follower's poll costs what it returns, not the stream's length: each backend
    reads only the entries from the position on (its reads are counted here)."""
    journal = make()
    journal.create("s", {})
    journal.append("s", [(str(n), b"x" * 10) for n in range(2000)])
    seen: list[int] = []
    if isinstance(journal, MemoryJournal):
        stream = journal._streams["s"]
        stream.data = _CountingList(stream.data, seen)
    elif isinstance(journal, SQLiteJournal):
        journal._db = _CountingProxy(journal._db, "execute", seen)  # type: ignore[assignment]
    else:
        journal._redis = _CountingProxy(journal._redis, "xrange", seen)
    entries, _ = journal.read_from("s", 1995)
    assert [e.position for e in entries] == [1995, 1996, 1997, 1998, 1999]
    assert len(seen) == 5


def test_redis_reads_the_earlier_record_layout(redis_url: str) -> None:
    """Records an earlier version wrote under Redis' own ids are read by position too."""
    journal = RedisJournal(redis_url, prefix="layout")
    journal.create("s", {})
    _, entries_key = journal._keys("s")
    for n in range(5):
        journal._redis.xadd(entries_key, {"cursor": str(n), "data": b"d", "position": n})
    journal._redis.hset(journal._keys("s")[0], mapping={"count": 5, "size": 5})
    assert [e.cursor for e in journal.read_from("s", 3)[0]] == ["3", "4"]
    assert [e.cursor for e in journal.read_after("s", "1")[0]] == ["2", "3", "4"]


def test_unknown_stream_and_cursor(make) -> None:  # type: ignore[no-untyped-def]
    journal = make()
    with pytest.raises(JournalMiss, match="no journal"):
        journal.read_after("nope", None)
    journal.create("s", {})
    journal.append("s", [("a", b"x")])
    with pytest.raises(JournalMiss, match="cursor 'zz'"):
        journal.read_after("s", "zz")


def test_byte_budget_overflow_is_reported_not_grown(make) -> None:  # type: ignore[no-untyped-def]
    journal = make(Retention(max_stream_bytes=10))
    journal.create("s", {})
    journal.append("s", [("1", b"12345")])
    journal.append("s", [("2", b"123456")])
    with pytest.raises(JournalMiss, match="byte budget"):
        journal.read_after("s", None)


def test_streams_are_independent(make) -> None:  # type: ignore[no-untyped-def]
    journal = make()
    journal.create("a", {"n": 1})
    journal.create("b", {"n": 2})
    journal.append("a", [("1", b"A")])
    journal.append("b", [("1", b"B")])
    assert journal.read_after("a", None)[0][0].data == b"A"
    assert journal.read_after("b", None)[0][0].data == b"B"


def test_memory_retention_bounds() -> None:
    journal = MemoryJournal(Retention(max_streams=2, ttl_seconds=10))
    journal.create("a", {}, now=0)
    journal.create("b", {}, now=1)
    journal.create("c", {}, now=2)
    with pytest.raises(JournalMiss):
        journal.read_after("a", None)
    journal.create("d", {}, now=100)  # b and c are past the TTL now
    with pytest.raises(JournalMiss):
        journal.meta("b")
    assert journal.meta("d") == {}


def test_memory_create_looks_at_a_bounded_number_of_streams() -> None:
    """Creating a stream checks the 16 oldest for expiry, not every stream kept (its
    cost must not grow with the number of streams the journal holds)."""
    visited: list[str] = []

    class Counting(OrderedDict):  # type: ignore[type-arg]
        def __iter__(self) -> Iterator[str]:
            for key in super().__iter__():
                visited.append(key)
                yield key

    journal = MemoryJournal(Retention(ttl_seconds=10))
    journal._streams = Counting()
    for i in range(1000):
        journal.create(f"s{i}", {}, now=5)
    visited.clear()
    journal.create("new", {}, now=16)  # the 16 oldest are past the TTL now
    assert len(visited) <= 16
    assert "s0" not in journal._streams and "s15" not in journal._streams
    assert "s16" in journal._streams and "new" in journal._streams


def test_sqlite_survives_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "j.db")
    first = SQLiteJournal(path)
    first.create("s", {"k": "v"})
    first.append("s", [("1", b"one")])
    first.finish("s")
    first.close()
    second = SQLiteJournal(path)
    entries, finished = second.read_after("s", None)
    assert [e.data for e in entries] == [b"one"] and finished


def test_redis_shared_between_instances(redis_url: str) -> None:
    writer = RedisJournal(redis_url, prefix="shared")
    reader = RedisJournal(redis_url, prefix="shared")
    writer.create("s", {"dialect": "openai_chat"})
    writer.append("s", [("1", b"data: {}\n\n")])
    entries, finished = reader.read_after("s", None)
    assert [e.data for e in entries] == [b"data: {}\n\n"] and not finished


def test_sqlite_append_costs_the_same_however_long_the_stream(tmp_path: Path) -> None:
    """An append does not count the stream's entries to find its next position
    (SQLite's virtual-machine steps are counted, in hundreds: the same for an append
    after 10 entries and after 5,000)."""
    journal = SQLiteJournal(str(tmp_path / "j.db"))
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    def cost(write: Callable[[], None]) -> int:
        steps[0] = 0
        journal._db.set_progress_handler(step, 100)
        try:
            write()
        finally:
            journal._db.set_progress_handler(None, 100)
        return steps[0]

    journal.create("s", {}, now=1.0)
    journal.append("s", [(str(n), b"x") for n in range(10)], now=1.0)
    small = cost(lambda: journal.append("s", [("a", b"x")], now=1.0))
    journal.append("s", [(str(n), b"x") for n in range(10, 5000)], now=1.0)
    large = cost(lambda: journal.append("s", [("b", b"x")], now=1.0))
    assert large <= small + 2, (small, large)
    assert [e.position for e in journal.read_from("s", 5000)[0]] == [5000, 5001]


def test_journal_entries_are_not_tracked_by_the_garbage_collector() -> None:
    """A gateway's memory journal keeps every event it streamed; anything kept per entry
    that the collector tracked would lengthen every full collection of the process. A
    stream's journal is a few tracked objects however long it is, and the entries a
    read makes are not tracked either."""
    journal = MemoryJournal()
    journal.create("s", {})
    journal.append("s", [("0", b"data: {}\n\n")])
    tracked = len(gc.get_objects())
    for n in range(1, 1001):
        journal.append("s", [(str(n), b"data: {}\n\n")])
    assert len(gc.get_objects()) - tracked < 10
    entries, _ = journal.read_after("s", None)
    assert len(entries) == 1001
    assert not any(gc.is_tracked(entry) for entry in entries)


def test_a_cursor_looked_up_before_later_appends_still_finds_them(make) -> None:  # type: ignore[no-untyped-def]
    """A resume looks a cursor up while the stream still grows: the entries appended
    after that lookup are found by their cursors too."""
    journal = make()
    journal.create("s", {})
    journal.append("s", [("s.1", b"a"), ("s.2", b"b")])
    assert [e.cursor for e in journal.read_after("s", "s.1")[0]] == ["s.2"]
    journal.append("s", [("s.3", b"c")])
    journal.append("s", [("s.4", b"d"), ("s.5", b"e")])
    entries, _ = journal.read_after("s", "s.3")
    assert [(e.position, e.cursor, e.data) for e in entries] == [(3, "s.4", b"d"), (4, "s.5", b"e")]
    assert journal.read_after("s", "s.5") == ([], False)
    with pytest.raises(JournalMiss, match=r"cursor 's\.6'"):
        journal.read_after("s", "s.6")


def test_memory_journal_keeps_only_the_entries_bytes_and_cursors_until_read() -> None:
    """A gateway's memory journal keeps every event it streamed, and most streams are
    never resumed: appending keeps the cursor and bytes objects it is given (no copy)
    and makes nothing per entry but two list slots; the entry objects and the cursor
    index are made by the reads that need them."""
    import tracemalloc

    journal = MemoryJournal()
    journal.create("s", {})
    journal.append("s", [("warm", b"x")])
    batches = [
        [(f"s.{n}", b'data: {"n": %d}\n\n' % n) for n in range(start, start + 4)]
        for start in range(1, 4001, 4)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for batch in batches:
            journal.append("s", batch)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # Two list slots an entry (8 bytes each, and the lists' spare room as they grow).
    assert grown / 4000 < 24, grown / 4000
    stream = journal._streams["s"]
    assert stream.index is None
    assert stream.data[1] is batches[0][0][1] and stream.cursors[1] is batches[0][0][0]
    entries, _ = journal.read_after("s", "s.3999")
    assert [(e.position, e.cursor, e.data) for e in entries] == [
        (4000, "s.4000", b'data: {"n": 4000}\n\n')
    ]
    assert stream.index is not None and stream.index["s.1"] == 1


def test_create_of_a_held_id_refuses_and_leaves_the_stream(make) -> None:  # type: ignore[no-untyped-def]
    journal = make()
    journal.create("s", {"dialect": "openai_responses", "tenant": "a"}, now=100.0)
    journal.append("s", [("0", b"a0"), ("1", b"a1")], now=100.0)
    for finished in (False, True):
        with pytest.raises(JournalConflict) as caught:
            journal.create("s", {"dialect": "openai_responses", "tenant": "b"}, now=101.0)
        assert caught.value.stream_id == "s"
        assert str(caught.value) == "the journal already holds a stream with id 's'"
        assert journal.meta("s") == {"dialect": "openai_responses", "tenant": "a"}
        assert [(e.cursor, e.data) for e in journal.read_after("s", None)[0]] == [
            ("0", b"a0"),
            ("1", b"a1"),
        ]
        assert journal.read_after("s", None)[1] is finished
        journal.finish("s", now=100.0)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_create_of_an_expired_id_starts_it_over(kind: str, tmp_path: Path) -> None:
    retention = Retention(ttl_seconds=10.0)
    journal: Journal = (
        MemoryJournal(retention)
        if kind == "memory"
        else SQLiteJournal(str(tmp_path / "j.db"), retention)
    )
    journal.create("s", {"n": 1}, now=100.0)
    journal.append("s", [("0", b"old")], now=100.0)
    journal.create("s", {"n": 2}, now=111.0)
    assert journal.meta("s") == {"n": 2}
    assert journal.read_after("s", None) == ([], False)


def test_memory_total_bytes_drop_finished_streams_first_then_the_oldest_running() -> None:
    journal = MemoryJournal(Retention(max_total_bytes=100, max_stream_bytes=500))
    assert Retention().max_total_bytes == 256 * 1024 * 1024
    for name in ("r1", "f1", "r2", "f2"):
        journal.create(name, {})
        journal.append(name, [("0", b"x" * 20)])
    journal.finish("f2")
    journal.finish("f1")  # (finished after f2: f2 is the oldest finished)
    assert journal.total_bytes == 80
    journal.create("r3", {})
    journal.append("r3", [("0", b"y" * 30)])  # 110 bytes: f2 goes
    assert journal.total_bytes == 90
    with pytest.raises(JournalMiss, match="no journal for stream 'f2'"):
        journal.read_after("f2", None)
    assert journal.read_after("f1", None)[1] is True
    journal.append("r3", [("1", b"y" * 31)])  # 121: f1 goes, then r1 (oldest running)
    assert journal.total_bytes == 81
    with pytest.raises(JournalMiss, match="no journal for stream 'f1'"):
        journal.read_after("f1", None)
    with pytest.raises(
        JournalMiss,
        match=r"stream 'r1' was dropped to keep the journal within its total bytes \(100\) "
        "and cannot be resumed",
    ):
        journal.read_after("r1", None)
    journal.append("r1", [("1", b"z")])  # (no longer journalled)
    assert journal.total_bytes == 81
    assert [e.data for e in journal.read_after("r2", None)[0]] == [b"x" * 20]
    assert [e.data for e in journal.read_after("r3", None)[0]] == [b"y" * 30, b"y" * 31]
    # A stream past its own budget gives its bytes back.
    journal.append("r2", [("1", b"x" * 500)])
    assert journal.total_bytes == 61
    with pytest.raises(JournalMiss, match="outgrew the journal's byte budget"):
        journal.read_after("r2", None)
