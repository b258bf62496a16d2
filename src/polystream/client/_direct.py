"""The direct client: ``httpx.AsyncClient.stream()``'s surface over an
:class:`~polystream.client._h1.AsyncH1Transport`'s own connections, without httpx's
client layer (:class:`DirectClient`, whose replies are :class:`DirectReply`)."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urlsplit

import httpx

from polystream.client._h1body import Body, PushSink
from polystream.client._h1request import DEFAULT_PORTS, check_header

if TYPE_CHECKING:
    from polystream.client._h1 import AsyncH1Transport

__all__ = ["INFLATE_STEP", "DirectClient", "DirectReply"]

INFLATE_STEP: Final = 256 * 1024
"""Most decompressed bytes a compressed reply gives at once (deflate inflates up to
about 1,000 times: one 64 KiB read could otherwise become 64 MiB)."""
_SAFE_TARGET: Final = "/:@!$&'()*+,;=-._~%?"
"""Kept as they are in a request target (everything else is percent-encoded)."""
_TARGETS_CACHED: Final = 1024
_HEADERS_CACHED: Final = 256


class DirectReply:
    """A reply opened by :meth:`DirectClient.stream`: the reading surface of
    ``httpx.Response`` that a streaming call uses.

    Attributes:
        status_code: The HTTP status.
        reason_phrase: The status line's reason.
        http_version: ``HTTP/1.1`` or ``HTTP/1.0``.
        headers: Header names lowered; repeated headers joined with ``", "``.
    """

    __slots__ = ("_body", "_decoder", "headers", "http_version", "reason_phrase", "status_code")

    def __init__(
        self,
        status: int,
        reason: bytes,
        minor: int,
        raw_headers: list[tuple[bytes, bytes]],
        body: Body | None,
    ) -> None:
        self.status_code = status
        self.reason_phrase = reason.decode("latin-1")
        self.http_version = f"HTTP/1.{minor}"
        headers: dict[str, str] = {}
        for name, value in raw_headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self.headers = headers
        self._body = body
        self._decoder: Any = None
        coding = headers.get("content-encoding", "identity").strip().lower()
        if coding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif coding == "deflate":
            self._decoder = zlib.decompressobj()
        elif coding not in ("identity", ""):
            if body is not None:
                body.close()
            raise httpx.DecodingError(f"unsupported Content-Encoding {coding!r}")

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body, as it arrives (decompressed when the server compressed it)."""
        return _BodyIterator(self)

    def push(self, sink: PushSink) -> bool:
        """Hand each later read's body bytes to ``sink`` as the connection receives
        them, between two reads of :meth:`aiter_bytes` (see :meth:`Body.push`); False
        when this reply cannot (no body, a compressed one, ended, or bytes waiting)."""
        body = self._body
        return body is not None and self._decoder is None and body.push(sink)

    def unpush(self) -> None:
        """Stop pushing."""
        if self._body is not None:
            self._body.unpush()

    def expire(self, error: Exception) -> None:
        """Stop pushing; the next read raises ``error``."""
        if self._body is not None:
            self._body.expire(error)

    async def aread(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.aiter_bytes()])

    async def aclose(self) -> None:
        """Release the connection (kept for reuse when the body was read to its end)."""
        body = self._body
        if body is not None:
            await body.aclose()

    def _decode(self, data: bytes, final: bool) -> bytes:
        """At most :data:`INFLATE_STEP` bytes of the decompressed body; input left over
        stays in the decoder's ``unconsumed_tail`` for the next call (so that a small,
        highly compressed read never becomes one huge piece of memory)."""
        try:
            out: bytes = self._decoder.decompress(data, INFLATE_STEP)
            if final and not self._decoder.unconsumed_tail:
                out += self._decoder.flush()
        except zlib.error as exc:
            raise httpx.DecodingError(f"cannot decompress the body: {exc}") from None
        return out


class _BodyIterator:
    """Iterates a :class:`DirectReply`'s body (a class, not a generator: nothing is left
    to finalize when the reader stops early)."""

    __slots__ = ("_done", "_reply")

    def __init__(self, reply: DirectReply) -> None:
        self._reply = reply
        self._done = reply._body is None

    def __aiter__(self) -> _BodyIterator:
        return self

    async def __anext__(self) -> bytes:
        reply = self._reply
        decoder = reply._decoder
        if decoder is not None and decoder.unconsumed_tail:
            # What the last read left to decompress comes first, a step at a time.
            data = reply._decode(decoder.unconsumed_tail, self._done)
            if data:
                return data
        while not self._done:
            body = reply._body
            assert body is not None
            data = await body.next_bytes()
            if decoder is None:
                if data:
                    return data
                self._done = True
                break
            if not data:
                self._done = True
                data = reply._decode(b"", True)
            else:
                data = reply._decode(data, False)
            if data:
                return data
        raise StopAsyncIteration


class _Exchange:
    """``async with client.stream(...) as reply``: sends on enter, releases on exit."""

    __slots__ = ("_client", "_reply", "_request")

    def __init__(
        self,
        client: DirectClient,
        request: tuple[str, str, Mapping[str, str], bytes | None],
    ) -> None:
        self._client = client
        self._request = request
        self._reply: Any = None

    async def __aenter__(self) -> Any:
        client = self._client
        method, url, headers, content = self._request
        key, target, host, proxied = client._target(url)
        if proxied:
            self._reply = client._fallback.stream(method, url, headers=headers, content=content)
            return await self._reply.__aenter__()
        head = client._head(method, target, host, headers, content)
        status, reason, minor, raw, body = await client._transport.send(
            key, method.encode("ascii"), head, content or b"", None, client._timeouts
        )
        self._reply = DirectReply(status, reason, minor, raw, body)
        return self._reply

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        reply = self._reply
        if isinstance(reply, DirectReply):
            await reply.aclose()
        elif reply is not None:
            await reply.__aexit__(kind, value, traceback)


class DirectClient:
    """``httpx.AsyncClient.stream()`` over an :class:`AsyncH1Transport`'s own
    connections, without httpx's client layer (request and response objects, cookies,
    auth and event hooks), which costs about 140 µs per request.

    What is sent: the given headers, ``Host``, ``Content-Length``, and unless given,
    ``Accept-Encoding: identity`` and a ``User-Agent``. A reply that is compressed anyway
    (gzip, deflate) is decompressed. No redirects are followed. A URL the environment
    proxies goes through ``fallback`` (an httpx client on the same transport).

    Args:
        transport: The connections.
        timeout: Connect, read, write and pool timeouts.
        fallback: The httpx client for proxied URLs.
        user_agent: The ``User-Agent`` header.
    """

    def __init__(
        self,
        transport: AsyncH1Transport,
        *,
        timeout: httpx.Timeout,
        fallback: httpx.AsyncClient,
        user_agent: str,
    ) -> None:
        self._transport = transport
        self.timeout = timeout
        self._timeouts: dict[str, Any] = timeout.as_dict()
        self._fallback = fallback
        self._user_agent = user_agent.encode("latin-1")
        self._targets: dict[str, tuple[tuple[str, str, int], bytes, bytes, bool]] = {}
        # The header lines of a header set, checked and encoded once: a gateway sends
        # the same few sets (one per upstream) on every request.
        self._lines: dict[tuple[tuple[str, str], ...], bytes] = {}

    def stream(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        content: bytes | None = None,
    ) -> _Exchange:
        """Send a request; the reply's body streams (use as ``async with``)."""
        return _Exchange(self, (method, url, headers, content))

    def _target(self, url: str) -> tuple[tuple[str, str, int], bytes, bytes, bool]:
        """(pool key, request target, Host value, whether it is proxied) of a URL."""
        cached = self._targets.get(url)
        if cached is not None:
            return cached
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        host = parts.hostname
        if not host:
            raise httpx.UnsupportedProtocol(f"no host in URL {url!r}")
        try:
            port = parts.port or DEFAULT_PORTS[scheme]
        except ValueError:
            raise httpx.InvalidURL(f"invalid port in URL {url!r}") from None
        target = quote(parts.path or "/", safe=_SAFE_TARGET)
        if parts.query:
            target += "?" + quote(parts.query, safe=_SAFE_TARGET)
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None and parts.port != DEFAULT_PORTS[scheme]:
            netloc += f":{parts.port}"
        entry = (
            (scheme, host, port),
            target.encode("ascii"),
            netloc.encode("idna"),
            self._transport.proxied(url),
        )
        if len(self._targets) >= _TARGETS_CACHED:
            self._targets.clear()
        self._targets[url] = entry
        return entry

    def _head(
        self,
        method: str,
        target: bytes,
        host: bytes,
        headers: Mapping[str, str],
        content: bytes | None,
    ) -> bytes:
        """The request head (the framing headers are this client's)."""
        key = tuple(headers.items())
        lines = self._lines.get(key)
        if lines is None:
            lines = self._header_lines(key)
            if len(self._lines) >= _HEADERS_CACHED:
                self._lines.clear()
            self._lines[key] = lines
        parts = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\nHost: ", host, b"\r\n", lines]
        if content or method not in ("GET", "HEAD"):
            parts += (b"Content-Length: ", b"%d" % len(content or b""), b"\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)

    def _header_lines(self, headers: tuple[tuple[str, str], ...]) -> bytes:
        """The lines of the given headers, each checked, and the defaults this client
        adds (``User-Agent``, ``Accept-Encoding``); the framing headers are dropped."""
        parts: list[bytes] = []
        agent = encoding = False
        for name, value in headers:
            raw_name = name.encode("latin-1")
            raw_value = value.encode("latin-1")
            check_header(raw_name, raw_value)
            lowered = raw_name.lower()
            if lowered in (b"host", b"content-length", b"transfer-encoding"):
                continue  # the framing is this client's
            if lowered == b"user-agent":
                agent = True
            elif lowered == b"accept-encoding":
                encoding = True
            parts += (raw_name, b": ", raw_value, b"\r\n")
        if not agent:
            parts += (b"User-Agent: ", self._user_agent, b"\r\n")
        if not encoding:
            parts.append(b"Accept-Encoding: identity\r\n")
        return b"".join(parts)
