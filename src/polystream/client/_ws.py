"""What the async and sync WebSocket shells share: the options of the opening handshake
and its failures, typed."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI

from polystream.errors import APIStatusError, LocalProtocolError, PolystreamError, TransportError
from polystream.events import kind_for_status
from polystream.realtime._endpoint import Endpoint, api_key_for, endpoint
from polystream.realtime._link import SocketLink
from polystream.retry import RetryPolicy, parse_retry_after
from polystream.wire.ws import DEFAULT_MAX_MESSAGE_SIZE

__all__ = ["HandshakeFailed", "SocketOptions", "close_of", "handshake_failure", "prepare"]


@dataclass(frozen=True, slots=True)
class SocketOptions:
    """How the shells open a socket (websockets' options).

    Attributes:
        ping_interval: Seconds between keep-alive pings (None: no pings).
        ping_timeout: Seconds to wait for a pong before the connection counts as
            broken (closed 1011, then reconnected).
        connect_timeout: Seconds for the opening handshake.
        close_timeout: Seconds to wait for the peer's part of the closing handshake (a
            broken connection is let go after it).
        max_message_size: Largest message read, in bytes.
        extra: More options for ``websockets`` (``proxy``, ``ssl``, ...).
    """

    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    connect_timeout: float | None = 10.0
    close_timeout: float | None = 10.0
    max_message_size: int | None = None
    extra: Mapping[str, Any] | None = None

    def arguments(self, endpoint: Endpoint) -> dict[str, Any]:
        """The keyword arguments of ``websockets``' ``connect`` (the URL aside)."""
        out: dict[str, Any] = {
            "additional_headers": endpoint.headers,
            "open_timeout": self.connect_timeout,
            "ping_interval": self.ping_interval,
            "ping_timeout": self.ping_timeout,
            "close_timeout": self.close_timeout,
        }
        if self.max_message_size is not None:
            out["max_size"] = self.max_message_size
        out.update(self.extra or {})
        return out


def prepare(
    family: str,
    *,
    model: str | None,
    api_key: str | Mapping[str, str] | None,
    base_url: str | Mapping[str, str] | None,
    url: str | None,
    query: Mapping[str, str] | None,
    headers: Mapping[str, str] | None,
    reconnect: RetryPolicy | None,
    replay: bool,
    full_history_retry: bool,
    ping_interval: float | None,
    ping_timeout: float | None,
    connect_timeout: float | None,
    close_timeout: float | None,
    keep_raw: bool,
    strict: bool,
    session_options: Mapping[str, Any] | None,
    websocket_options: Mapping[str, Any] | None,
) -> tuple[SocketLink, Endpoint, SocketOptions]:
    """The decisions, the handshake and the socket options of a connection (the
    arguments of :func:`polystream.realtime.connect`). The largest message read is the
    session's (``max_message_size``, by default 16 MiB): one larger closes the socket
    (1009). A session that holds its URL's query (``xai_tts``, ``xai_stt``: made from
    ``session_options``) has it in the URL, before ``query`` (unless ``url`` gives the
    whole endpoint)."""
    session = {"strict": strict, **(session_options or {})}
    link = SocketLink(
        family,
        model=model,
        reconnect=reconnect,
        replay=replay,
        full_history_retry=full_history_retry,
        keep_raw=keep_raw,
        session_options=session,
    )
    provider = link.spec.provider
    base = base_url.get(provider) if isinstance(base_url, Mapping) else base_url
    # (A family configured by its URL, xAI's speech sockets, has its query made by the
    # session from the session's options; a whole ``url`` is taken as given.)
    stated = getattr(link.session, "query", None) if url is None else None
    target = endpoint(
        family,
        api_key=api_key_for(family, api_key, os.environ),
        model=model,
        base_url=base,
        url=url,
        query={**stated, **(query or {})} if isinstance(stated, Mapping) else query,
        headers=headers,
    )
    options = SocketOptions(
        ping_interval=ping_interval,
        ping_timeout=ping_timeout,
        connect_timeout=connect_timeout,
        close_timeout=close_timeout,
        max_message_size=session.get("max_message_size", DEFAULT_MAX_MESSAGE_SIZE),
        extra=websocket_options,
    )
    return link, target, options


class HandshakeFailed(Exception):
    """Opening a socket failed (raised and caught inside the shells).

    Attributes:
        error: The typed error to raise if no further attempt is made.
        status: The handshake's HTTP status; None for a network failure.
        headers: The handshake response's headers (lowercase names).
        final: No attempt is worth making again (a malformed URL).
    """

    def __init__(
        self, error: PolystreamError, status: int | None, headers: Mapping[str, str]
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.status = status
        self.headers = headers
        self.final = isinstance(error, LocalProtocolError)


def handshake_failure(exc: Exception, endpoint: Endpoint) -> HandshakeFailed:
    """The typed failure of an attempt to open ``endpoint`` that raised ``exc``.

    An HTTP status is an :class:`~polystream.errors.APIStatusError` (``kind`` from the
    status, ``body`` parsed when it is JSON, the request id and ``Retry-After``);
    anything else a :class:`~polystream.errors.TransportError`; a malformed URL a
    :class:`~polystream.errors.LocalProtocolError`.
    """
    if isinstance(exc, InvalidStatus):
        response = exc.response
        headers = {name.lower(): value for name, value in response.headers.raw_items()}
        status = response.status_code
        body = _body(response.body)
        error = APIStatusError(
            _message(body) or response.reason_phrase,
            status_code=status,
            kind=kind_for_status(status),
            body=body,
            request_id=headers.get(endpoint.request_id_header),
            retry_after=parse_retry_after(headers, now=time.time()),
        )
        return HandshakeFailed(error, status, headers)
    if isinstance(exc, InvalidURI):
        return HandshakeFailed(LocalProtocolError(f"bad WebSocket URL: {exc}"), None, {})
    return HandshakeFailed(
        TransportError(f"cannot open {endpoint.url}: {type(exc).__name__}: {exc}"), None, {}
    )


def close_of(exc: ConnectionClosed) -> tuple[int | None, str]:
    """The close code and reason the peer sent (None: no close frame arrived)."""
    if exc.rcvd is None:
        return None, ""
    return exc.rcvd.code, exc.rcvd.reason


def _body(data: bytes | bytearray | None) -> object:
    if not data:
        return None
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        return bytes(data).decode("utf-8", "replace")


def _message(body: object) -> str | None:
    """The provider's error message in a JSON error body (``{"error": {"message"}}``)."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    if isinstance(body, str) and body.strip():
        return body.strip()
    return None
