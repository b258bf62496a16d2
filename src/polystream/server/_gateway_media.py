"""The gateway's requests of the media and agent-session dialects, beside the text
path: multipart forms read (and forwarded byte for byte), a session's stream (a ``GET``
with no body and no model), and the requests that ask for no stream, relayed to the
upstream of their own dialect as they are.

What may be served by what is :func:`polystream.gateway_core.family_refusal`'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import httpx
import msgspec

from polystream.call import route_path
from polystream.client._h1 import DirectClient
from polystream.dialects import DIALECTS, PROVIDERS
from polystream.errors import APIStatusError, RequestError
from polystream.request import Request, build_request, error_from_body
from polystream.request.codecs import pass_through_body
from polystream.retry import RetryPolicy, RetryState, parse_retry_after
from polystream.server._gateway_write import Send
from polystream.wire.jsondepth import body_error, decode_body, decode_bounded
from polystream.wire.multipart import FormError, decode_form, encode_form, is_form

__all__ = [
    "Inbound",
    "RelayFailure",
    "read_inbound",
    "relay",
    "relay_body",
    "relayed_headers",
    "upstream_url",
]

_CONNECT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_RELAYED_HEADERS = ("content-type", "accept", "idempotency-key")
"""The client's headers a relayed request carries (besides the upstream's key)."""


class Inbound(NamedTuple):
    """A request's body as the gateway reads it.

    Attributes:
        payload: The body as its request codec reads it: the JSON object, a form's
            fields (files as their metadata), or nothing (a ``GET``).
        files: A form's file parts' bytes, by field.
        form: A form as it came, ``(content type, bytes)``; None for any other body.
    """

    payload: Any
    files: dict[str, bytes]
    form: tuple[str, bytes] | None


def read_inbound(method: str, content_type: str | None, body: bytes, max_bytes: int) -> Inbound:
    """Read a request's body: a ``GET``'s is none, a ``multipart/form-data`` one is a
    form (``content_type``: given for a route that takes forms, None for the others),
    any other is JSON.

    Raises:
        RequestError: A malformed form or JSON body.
    """
    if method == "GET":
        return Inbound({}, {}, None)
    if content_type is not None and is_form(content_type):
        try:
            form = decode_form(content_type, body, max_size=max_bytes)
        except FormError as exc:
            raise RequestError(str(exc)) from None
        return Inbound(form.fields, form.files, (content_type, body))
    try:
        return Inbound(decode_body(body), {}, None)
    except msgspec.DecodeError as exc:
        raise RequestError(body_error(exc)) from None


def upstream_url(dialect: str, base_url: str | None, path: str, query: str) -> str:
    """The URL of the upstream's endpoint for a client's ``path`` under the gateway
    (``/openai/v1/audio/transcriptions``): the path under the provider's prefix, under
    the upstream's base URL (default: the official one), with the client's query."""
    provider = PROVIDERS[DIALECTS[dialect].provider]
    if path.startswith(provider.prefix + "/"):
        path = path[len(provider.prefix) :]
    url = (base_url or provider.base_url).rstrip("/") + route_path(dialect, path)
    return url + "?" + query if query else url


def relay_body(
    dialect: str,
    request: Request,
    model: str,
    inbound: Inbound,
) -> tuple[str, bytes]:
    """The body of a relayed request and its ``Content-Type``: a form byte for byte as
    it came, unless a route rewrote the model (then written again, the files as they
    came); a JSON body as the gateway read it (the model rewritten where the route says).

    Raises:
        RequestError: The request cannot be built again with the rewritten model.
    """
    payload = inbound.payload
    if model != request.model:
        built = build_request(dialect, msgspec.structs.replace(request, model=model))
        payload = pass_through_body(dialect, payload, built.body)
    elif inbound.form is not None:
        return inbound.form
    if inbound.form is not None:
        try:
            return encode_form(payload, inbound.files)
        except FormError as exc:
            raise RequestError(str(exc)) from None
    return "application/json", msgspec.json.encode(payload)


def relayed_headers(headers: Mapping[str, str], content_type: str) -> dict[str, str]:
    """The client's headers a relayed request carries, its body's type among them."""
    out = {name: headers[name] for name in _RELAYED_HEADERS if name in headers}
    out["content-type"] = content_type
    out.setdefault("accept", "*/*")
    return out


def _status_error(status: int, headers: Mapping[str, str], body: bytes) -> APIStatusError:
    parsed: Any
    try:
        parsed = decode_bounded(body, what="the error body") if body else None
    except msgspec.DecodeError:
        parsed = body.decode("utf-8", "replace")
    info = error_from_body(status, parsed)
    return APIStatusError(
        info.message,
        status_code=status,
        kind=info.kind,
        body=parsed,
        retry_after=parse_retry_after(headers, now=time.time()),
    )


class RelayFailure(Exception):
    """A relayed request that got no answer to give the client: why (a 502)."""


async def relay(
    send: Send,
    http: httpx.AsyncClient | DirectClient,
    url: str,
    *,
    method: str,
    headers: Mapping[str, str],
    content: bytes | None,
    retry: RetryPolicy,
    max_reply_bytes: int,
) -> APIStatusError | None:
    """Send a request that asks for no stream to the upstream and give the client its
    answer as it is (status, ``Content-Type``, body), retrying as a call would (a
    connection that fails, a status that says to). An error status is not given as it
    is: it is returned, for the gateway to answer in the client's dialect (its key and
    the upstream's words scrubbed).

    Raises:
        RelayFailure: No answer (the connection failed, or the answer was too long).
    """
    state = RetryState(retry)
    while True:
        try:
            async with http.stream(method, url, headers=headers, content=content) as reply:
                status = reply.status_code
                lower = {k.lower(): v for k, v in reply.headers.items()}
                parts: list[bytes] = []
                size = 0
                async for chunk in reply.aiter_bytes():
                    size += len(chunk)
                    if size > max_reply_bytes:
                        raise RelayFailure(
                            f"the upstream reply exceeded the gateway's limit of "
                            f"{max_reply_bytes} bytes (max_reply_bytes)"
                        )
                    parts.append(chunk)
        except _CONNECT as exc:
            delay = state.after_connection_error()
            if delay is None:
                why = str(exc) or type(exc).__name__
                raise RelayFailure(f"cannot reach the upstream: {why}") from None
            await asyncio.sleep(delay)
            continue
        except httpx.TransportError as exc:
            raise RelayFailure(f"the upstream call failed: {exc or type(exc).__name__}") from None
        body = b"".join(parts)
        if not 200 <= status < 300:
            delay = state.after_status(status, lower, now=time.time())
            if delay is not None:
                await asyncio.sleep(delay)
                continue
            return _status_error(status, lower, body)
        out = [(b"content-length", str(len(body)).encode())]
        if "content-type" in lower:
            out.append((b"content-type", lower["content-type"].encode("latin-1")))
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": body})
        return None
