"""The stream inspector's endpoints, under ``/inspect``: the page, the decoding of a
capture the page uploads, and on the gateway the streams passing through.

:class:`Inspector` is a plain ASGI app (no framework), so that the emulator (a Starlette
app), the gateway (its own ASGI app) and ``polystream inspect`` (polystream's own
HTTP/1.1 server) serve the same thing. :func:`mount_inspector` adds it to the emulator or
the gateway.

Endpoints (``GET`` unless said):

* ``/inspect``: the page (its scripts, styles and the preloaded captures inlined);
* ``POST /inspect/api/decode?name=N&dialect=D``: the body is a capture; the answer its
  page data (:func:`polystream.inspector.build_capture`). Not on the gateway;
* ``/inspect/api/streams`` (gateway): the streams the gateway journalled, the newest
  first, those of the tenant whose key the request presents;
* ``/inspect/api/streams/{id}`` (gateway): ``{"finished", "capture"}``, the stream as
  journalled so far, each event dated by when the journal got it.

On the gateway the API takes the gateway's client key (``Authorization: Bearer``,
``x-api-key`` or ``x-goog-api-key``) like any request, and shows a tenant only its own
streams; the page holds no data, and asks for the key.
"""

from __future__ import annotations

import asyncio
import threading
import time
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, Final
from urllib.parse import parse_qsl, unquote

import msgspec

from polystream.dialects import DIALECTS
from polystream.inspector import build_capture, page_data, render_page
from polystream.journal import Entry, Journal, JournalMiss

__all__ = ["MAX_CAPTURE_BYTES", "PREFIX", "Inspector", "JournalTap", "mount_inspector"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PREFIX: Final = "/inspect"
MAX_CAPTURE_BYTES: Final = 32 * 1024 * 1024
"""The largest capture ``POST /inspect/api/decode`` takes (413 past it)."""

TAPPED_STREAMS: Final = 256
"""Streams a :class:`JournalTap` remembers (the oldest are forgotten first)."""
TIMED_APPENDS: Final = 20_000
"""Appends of one stream a :class:`JournalTap` dates (16 bytes each; the entries of later
ones take the last time)."""


class _Tapped:
    """What a :class:`JournalTap` knows of one stream: when each append came, as the
    entry count after it and its time (the entries of one append share its time)."""

    __slots__ = ("count", "dialect", "ends", "finished", "id", "size", "started", "tenant", "times")

    def __init__(self, stream_id: str, meta: dict[str, Any], now: float) -> None:
        self.id = stream_id
        self.dialect = meta.get("dialect")
        self.tenant = meta.get("tenant")
        self.started = now
        self.ends = array("q")
        self.times = array("d")
        self.count = 0
        self.size = 0
        self.finished: float | None = None

    def add(self, entries: int, size: int, now: float) -> None:
        self.count += entries
        self.size += size
        if len(self.times) < TIMED_APPENDS:
            self.ends.append(self.count)
            self.times.append(now)

    def time_of(self, position: int) -> float:
        """When the entry at ``position`` was journalled (an entry past the dated ones:
        the last time known; none: the stream's start)."""
        if not self.times:
            return self.started
        at = bisect_right(self.ends, position)
        return self.times[min(at, len(self.times) - 1)]

    def listing(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dialect": self.dialect,
            "started": self.started,
            "entries": self.count,
            "bytes": self.size,
            "finished": self.finished is not None,
        }


class JournalTap(Journal):
    """A journal that passes everything to another and remembers, for the inspector,
    which streams were made, when each entry came and when each stream finished (the
    journals keep no time per entry). Aliases (a native id leading to a stream) are not
    streams of their own and are not listed. Read-only for the inspector: it changes
    nothing that is written or read."""

    def __init__(self, inner: Journal) -> None:
        super().__init__(inner.retention)
        self.inner = inner
        self.blocking = inner.blocking
        self._streams: OrderedDict[str, _Tapped] = OrderedDict()
        self.lock = threading.Lock()  # (a blocking journal is written from threads)

    def create(self, stream_id: str, meta: dict[str, Any], *, now: float = 0.0) -> None:
        self.inner.create(stream_id, meta, now=now)
        if "alias" in meta:
            return
        with self.lock:
            self._streams[stream_id] = _Tapped(stream_id, meta, now or time.time())
            while len(self._streams) > TAPPED_STREAMS:
                self._streams.popitem(last=False)

    def append(self, stream_id: str, entries: list[tuple[str, bytes]], *, now: float = 0.0) -> None:
        self.inner.append(stream_id, entries, now=now)
        tapped = self._streams.get(stream_id)
        if tapped is not None:
            size = sum([len(data) for _, data in entries])
            with self.lock:
                tapped.add(len(entries), size, now or time.time())

    def finish(self, stream_id: str, *, now: float = 0.0) -> None:
        self.inner.finish(stream_id, now=now)
        tapped = self._streams.get(stream_id)
        if tapped is not None:
            tapped.finished = now or time.time()

    def meta(self, stream_id: str) -> dict[str, Any]:
        return self.inner.meta(stream_id)

    def read_after(self, stream_id: str, cursor: str | None) -> tuple[list[Entry], bool]:
        return self.inner.read_after(stream_id, cursor)

    def read_from(self, stream_id: str, position: int) -> tuple[list[Entry], bool]:
        return self.inner.read_from(stream_id, position)

    def __getattr__(self, name: str) -> Any:
        # Anything else the journal has (``close``, ``total_bytes``...) is the inner one's.
        return getattr(self.inner, name)

    # -- for the inspector -----------------------------------------------------------------

    def streams(self, tenant: str | None) -> list[dict[str, Any]]:
        """The streams of ``tenant`` the tap knows, the newest first."""
        with self.lock:
            found = [s.listing() for s in self._streams.values() if s.tenant == tenant]
        return found[::-1]

    def tapped(self, stream_id: str, tenant: str | None) -> _Tapped | None:
        """The stream, when the tap knows it and it is ``tenant``'s."""
        found = self._streams.get(stream_id)
        return found if found is not None and found.tenant == tenant else None


class Inspector:
    """The ``/inspect`` endpoints (see the module docstring).

    Args:
        captures: Page data of captures the page shows at once
            (:func:`~polystream.inspector.build_capture`).
        decode: Whether ``POST /inspect/api/decode`` is served.
        tap: The gateway's journal tap (the stream endpoints are served with one).
        identify: The tenant of a presented key (None: refused); None: no key needed.
        keyed: Whether a key must be presented (the page then asks for one); default:
            whether ``identify`` is given.
        title: The page's title.
    """

    def __init__(
        self,
        *,
        captures: Sequence[dict[str, Any]] = (),
        decode: bool = True,
        tap: JournalTap | None = None,
        identify: Callable[[str | None], str | None] | None = None,
        keyed: Callable[[], bool] | None = None,
        title: str = "polystream inspector",
    ) -> None:
        self.captures = list(captures)
        self.decode = decode
        self.tap = tap
        self.identify = identify
        self.keyed = keyed if keyed is not None else lambda: identify is not None
        self.title = title

    @staticmethod
    def claims(path: str) -> bool:
        """Whether ``path`` is the inspector's."""
        return path == PREFIX or path.startswith(PREFIX + "/")

    def page(self) -> str:
        api = PREFIX + "/api"
        server = {
            "decode": f"{api}/decode" if self.decode else None,
            "streams": f"{api}/streams" if self.tap is not None else None,
            "auth": self.keyed(),
        }
        return render_page(page_data(self.captures, server=server, title=self.title))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method = scope["method"]
        path = scope["path"]
        if path in (PREFIX, PREFIX + "/"):
            if method not in ("GET", "HEAD"):
                await _json(send, 405, {"error": {"message": f"{method} not allowed here"}})
                return
            body = (await asyncio.to_thread(self.page)).encode("utf-8")
            await _send(send, 200, "text/html; charset=utf-8", body, head=method == "HEAD")
            return
        if path == PREFIX + "/api/decode" and self.decode:
            await self._decode(scope, receive, send)
            return
        if self.tap is not None and path.startswith(PREFIX + "/api/streams"):
            await self._streams(scope, send, path[len(PREFIX + "/api/streams") :])
            return
        await _json(send, 404, {"error": {"message": f"no such inspector endpoint: {path}"}})

    async def _decode(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await _json(send, 405, {"error": {"message": "POST the capture's bytes"}})
            return
        body = await _read_body(receive, MAX_CAPTURE_BYTES)
        if body is None:
            return
        if body is _TOO_LARGE:
            message = f"a capture is at most {MAX_CAPTURE_BYTES} bytes"
            await _json(send, 413, {"error": {"message": message}})
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        dialect = query.get("dialect", "auto")
        if dialect != "auto" and dialect not in DIALECTS:
            await _json(send, 400, {"error": {"message": f"unknown dialect {dialect!r}"}})
            return
        name = query.get("name") or "capture"
        capture = await asyncio.to_thread(build_capture, body, name=name, dialect=dialect)
        await _json(send, 200, capture)

    async def _streams(self, scope: Scope, send: Send, rest: str) -> None:
        assert self.tap is not None
        if scope["method"] != "GET":
            await _json(send, 405, {"error": {"message": "streams are read with GET"}})
            return
        tenant: str | None = None
        if self.identify is not None:
            tenant = self.identify(_presented_key(scope["headers"]))
            if tenant is None:
                await _json(send, 401, {"error": {"message": "missing or invalid API key"}})
                return
        if rest in ("", "/"):
            await _json(send, 200, {"streams": self.tap.streams(tenant)})
            return
        stream_id = unquote(rest[1:])
        tapped = self.tap.tapped(stream_id, tenant)
        if tapped is None:
            await _json(send, 404, {"error": {"message": f"no stream {stream_id!r}"}})
            return
        try:
            if self.tap.blocking:
                entries, finished = await asyncio.to_thread(self.tap.read_from, stream_id, 0)
            else:
                entries, finished = self.tap.read_from(stream_id, 0)
        except JournalMiss as exc:
            await _json(send, 404, {"error": {"message": str(exc)}})
            return
        with self.tap.lock:
            chunks = _timed(entries, tapped)
        capture = await asyncio.to_thread(
            build_capture,
            chunks,
            name=stream_id,
            dialect=tapped.dialect or "auto",
            targets=None if finished else [],
            time_origin="first_event",
        )
        await _json(send, 200, {"finished": finished, "capture": capture})


def _timed(entries: list[Entry], tapped: _Tapped) -> list[tuple[float, bytes]]:
    """The journalled entries as timed chunks, in seconds from the first entry."""
    origin = tapped.time_of(0)
    return [
        (round(max(tapped.time_of(entry.position) - origin, 0.0), 6), entry.data)
        for entry in entries
    ]


def _presented_key(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"authorization":
            text = value.decode("latin-1")
            if text[:7].lower() == "bearer ":
                return text[7:].strip()
        elif lowered in (b"x-api-key", b"x-goog-api-key"):
            return value.decode("latin-1").strip()
    return None


_TOO_LARGE: Final = b"\x00too-large"


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return _TOO_LARGE
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send(send: Send, status: int, media: str, body: bytes, *, head: bool = False) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", media.encode("latin-1")),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})


async def _json(send: Send, status: int, value: Any) -> None:
    await _send(send, status, "application/json", msgspec.json.encode(value))


def mount_inspector(app: Any, *, captures: Sequence[dict[str, Any]] = ()) -> Inspector:
    """Serve the inspector at ``/inspect`` on ``app``: the emulator's Starlette app (its
    route comes first), or the gateway (a tap on its journal is put in its place, and the
    stream endpoints take its client keys; the gateway hands ``/inspect`` paths to the
    returned :class:`Inspector`)."""
    router = getattr(app, "router", None)
    if router is not None:
        from starlette.routing import Route

        inspector = Inspector(captures=captures)
        route = Route(PREFIX + "{rest:path}", endpoint=inspector)
        router.routes.insert(0, route)
        return inspector
    tap = JournalTap(app.journal)
    app.journal = tap

    def identify(key: str | None) -> str | None:
        tenant: str | None = app.tenants.identify(key)
        return tenant

    def keyed() -> bool:
        return not app.tenants.open

    return Inspector(captures=captures, decode=False, tap=tap, identify=identify, keyed=keyed)
