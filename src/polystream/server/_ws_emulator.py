"""The emulator's WebSocket endpoints: each emulated WebSocket family at the path its
provider's SDK derives from ``base_url``, under the provider's prefix
(``/openai/v1/realtime``, ``/openai/v1/responses``, ``/xai/v1/realtime``,
``/xai/v1/tts``, ...).

Before accepting, the handshake is checked as the provider checks it: a key must be
presented (``Authorization: Bearer``, or a browser's key subprotocol: OpenAI's
``openai-insecure-api-key.<key>`` beside ``realtime``, which is the one accepted; xAI's
``xai-client-secret.<key>``, accepted itself), else the upgrade is refused with a 401 in
the provider's error shape. Then :class:`~polystream.scenario.SocketEmulation`
decides everything; this module only moves messages and sleeps: it waits for the next
client message or until the emulation's next message is due, whichever comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.responses import Response
from starlette.websockets import WebSocket

from polystream.dialects import PROVIDERS
from polystream.realtime import SOCKET_SPECS
from polystream.scenario import Emulator, SocketEmulation, error_answer, provider_of_path

__all__ = ["SOCKET_ENDPOINTS", "TOKEN_ENDPOINTS", "TOKEN_MINTS", "serve_socket"]

logger = logging.getLogger("polystream.server")

SOCKET_ENDPOINTS: Final[dict[str, str]] = {
    PROVIDERS[spec.provider].prefix + path: name
    for name, spec in SOCKET_SPECS.items()
    if spec.emulated
    for path in spec.paths
}
"""Every emulated WebSocket endpoint: path -> family."""

TOKEN_ENDPOINTS: Final[frozenset[str]] = frozenset(
    PROVIDERS[spec.provider].prefix + urlsplit(spec.token_url).path
    for spec in SOCKET_SPECS.values()
    if spec.emulated and spec.token_url is not None
)
"""The emulated WebSocket endpoints that take an ephemeral token instead of a key."""

TOKEN_MINTS: Final[dict[str, str]] = {
    PROVIDERS[spec.provider].prefix + spec.token_path: name
    for name, spec in SOCKET_SPECS.items()
    if spec.emulated and spec.token_path is not None
}
"""The HTTP paths (``POST``) that mint a family's ephemeral tokens: path -> family."""

_NO_KEY: Final = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)


def _token(websocket: WebSocket, family: str) -> str | None:
    """The ephemeral token the client presented at a token endpoint (the descriptor's
    ``token_auth``: ``Authorization: <scheme> <token>``, or a query parameter)."""
    spec = SOCKET_SPECS[family]
    if spec.token_auth is None:
        return None
    headers = {name.lower(): value for name, value in websocket.headers.items()}
    found = spec.token_auth.presented(headers, dict(websocket.query_params))
    if found is None:
        return None
    if found == headers.get(spec.token_auth.header):
        scheme, _, token = found.partition(" ")
        return token.strip() if scheme.lower() == spec.token_scheme.lower() else None
    return found


def _presented(websocket: WebSocket, family: str) -> tuple[str | None, str | None]:
    """The key the client presented, and the subprotocol to accept (a browser's)."""
    spec = SOCKET_SPECS[family]
    key = spec.auth.presented(
        {name.lower(): value for name, value in websocket.headers.items()},
        dict(websocket.query_params),
    )
    if key:
        return key, None
    offered = websocket.scope.get("subprotocols") or []
    for template in spec.browser_subprotocols:
        if "{key}" not in template:
            continue
        head, tail = template.split("{key}", 1)
        for protocol in offered:
            if protocol.startswith(head) and protocol.endswith(tail) and len(protocol) > len(head):
                plain = [p for p in spec.browser_subprotocols if "{key}" not in p]
                accepted = next((p for p in plain if p in offered), None) if plain else protocol
                return protocol[len(head) : len(protocol) - len(tail)], accepted
    return None, None


async def _deny(websocket: WebSocket, status: int, message: str, provider: str | None) -> None:
    """Refuse the upgrade with an HTTP error in the provider's shape."""
    answer = error_answer(provider, status, message)
    await websocket.send_denial_response(
        Response(content=answer.body, status_code=answer.status, headers=answer.headers)
    )


async def serve_socket(websocket: WebSocket, emulator: Emulator, stats: Any) -> None:
    """Serve one WebSocket connection (the app's WebSocket route)."""
    path = websocket.url.path
    family = SOCKET_ENDPOINTS.get(path)
    provider = provider_of_path(path)
    if family is None:
        message = f"Unknown request URL: GET {path}. Please check the URL and the method."
        await _deny(websocket, 404, message, provider)
        return
    token: str | None = None
    if path in TOKEN_ENDPOINTS:
        key = token = _token(websocket, family)
        subprotocol = None
    else:
        key, subprotocol = _presented(websocket, family)
    if not key:
        await _deny(websocket, 401, _NO_KEY, SOCKET_SPECS[family].provider)
        return
    emulation = SocketEmulation(
        emulator,
        family,
        query=dict(websocket.query_params),
        created=int(time.time()),
        token=token,
    )
    await websocket.accept(subprotocol=subprotocol)
    stats.sockets += 1
    loop = asyncio.get_running_loop()
    opened = loop.time()
    inbox: asyncio.Queue[str | bytes | None] = asyncio.Queue()
    reader = asyncio.create_task(_read(websocket, inbox))
    try:
        emulation.start(0.0)
        while True:
            for send in emulation.due(loop.time() - opened):
                if send.text is None:
                    await websocket.close(send.close or 1000, _reason(send.reason))
                    return
                if isinstance(send.text, bytes):
                    await websocket.send_bytes(send.text)
                else:
                    await websocket.send_text(send.text)
                stats.socket_messages += 1
            wake = emulation.wake
            timeout = None if wake is None else max(wake - (loop.time() - opened), 0.0)
            try:
                async with asyncio.timeout(timeout):
                    received = await inbox.get()
            except TimeoutError:
                continue
            if received is None:
                return  # the client left
            emulation.receive(received, loop.time() - opened)
    except (OSError, RuntimeError) as exc:
        # A send after the client left (starlette raises RuntimeError once closed).
        logger.debug("socket %s ended: %r", path, exc)
    finally:
        emulation.end()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


def _reason(text: str) -> str:
    """A close reason within the 123 bytes a close frame holds (cut at a character)."""
    data = text.encode("utf-8")
    return text if len(data) <= 123 else data[:123].decode("utf-8", "ignore")


async def _read(websocket: WebSocket, inbox: asyncio.Queue[str | bytes | None]) -> None:
    """Move the client's messages to ``inbox``; None once it disconnects."""
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            text = message.get("text")
            await inbox.put(text if text is not None else message.get("bytes") or b"")
    finally:
        inbox.put_nowait(None)
