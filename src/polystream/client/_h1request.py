"""What the client writes: a request's head from an ``httpx.Request``, its header
checks, and a streamed request body."""

from __future__ import annotations

import re
from typing import Any, Final

import httpx

from polystream.client._h1conn import Connection

__all__ = ["DEFAULT_PORTS", "check_header", "conn_tokens", "request_head", "write_stream"]

_TOKEN: Final = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def conn_tokens(head: bytes) -> bytes:
    """The request's ``Connection`` header value, lowered (b"" when absent)."""
    lowered = head.lower()
    start = lowered.find(b"\r\nconnection:")
    if start < 0:
        return b""
    end = lowered.find(b"\r\n", start + 2)
    return lowered[start + 13 : end]


def check_header(name: bytes, value: bytes) -> None:
    """Refuse a header that would break the request head (a line break in the value,
    a name that is not a token)."""
    if b"\r" in value or b"\n" in value or _TOKEN.fullmatch(name) is None:
        raise httpx.LocalProtocolError(f"invalid request header {name!r}")


def request_head(
    request: httpx.Request, method: bytes, url: httpx.URL
) -> tuple[bytes, bytes | None, Any]:
    """(head, body bytes or None, body stream) of a request."""
    try:
        body: bytes | None = request.content
    except httpx.RequestNotRead:
        body = None
    parts = [method, b" ", url.raw_path, b" HTTP/1.1\r\n"]
    has_host = has_length = has_te = False
    for name, value in request.headers.raw:
        check_header(name, value)
        lowered = name.lower()
        if lowered == b"host":
            has_host = True
        elif lowered == b"content-length":
            has_length = True
        elif lowered == b"transfer-encoding":
            has_te = True
        parts += (name, b": ", value, b"\r\n")
    if not has_host:
        parts[4:4] = (b"Host: ", url.netloc, b"\r\n")
    if body is not None:
        if body and not has_length and not has_te:
            parts += (b"Content-Length: ", str(len(body)).encode(), b"\r\n")
    elif not has_length and not has_te:
        parts.append(b"Transfer-Encoding: chunked\r\n")
        has_te = True
    parts.append(b"\r\n")
    return b"".join(parts), body, (request.stream, has_te and not has_length)


async def write_stream(conn: Connection, head: bytes, stream: Any, timeout: float | None) -> None:
    """Write a streamed request body (chunked unless its length was given)."""
    source, chunked = stream
    await conn.write(head, timeout)
    if hasattr(source, "__aiter__"):
        async for part in source:
            if part:
                await conn.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part, timeout)
    else:
        for part in source:
            if part:
                await conn.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part, timeout)
    if chunked:
        await conn.write(b"0\r\n\r\n", timeout)
