"""An emulator upstream and a gateway in front of it, both on loopback."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn

from polystream.gateway_core import GatewayConfig, Limits, Route, Upstream
from polystream.journal import Journal
from polystream.retry import RetryPolicy
from polystream.scenario import Emulator, parse_scenarios
from polystream.server import ServerThread, TLSFiles
from polystream.server._h1server import H1Server, ServerLimits
from polystream.server.gateway import create_gateway

GATEWAY_KEY = "gw-test-key-123456"
CANARY = "sk-canary-9f8e7d6c5b4a3f2e1d0c"
UPSTREAM_MODEL = {
    "openai": "gpt-5.4-nano",
    "xai": "grok-4.3",
    "anthropic": "claude-haiku-4-5",
    "gemini": "gemini-3.5-flash-lite",
}
PREFIX = {"openai": "/openai/v1", "xai": "/xai/v1", "anthropic": "/anthropic", "gemini": "/gemini"}


class AppThread:
    """Any ASGI app served on a free loopback port, in a thread: by polystream's own
    HTTP/1.1 server (what ``polystream gateway`` runs) or by uvicorn; over TLS with
    ``tls``."""

    def __init__(self, app: Any, server: str = "polystream", tls: TLSFiles | None = None) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.app = app
        self.server = server
        self.tls = tls
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if server == "uvicorn":
            config = uvicorn.Config(
                app,
                log_level="warning",
                lifespan="off",
                access_log=False,
                timeout_graceful_shutdown=1,
                ssl_certfile=tls.cert_file if tls is not None else None,
                ssl_keyfile=tls.key_file if tls is not None else None,
            )
            self._uvicorn = uvicorn.Server(config)
            target: Callable[[], None] = lambda: self._uvicorn.run(sockets=[self._socket])  # noqa: E731
        else:
            target = lambda: asyncio.run(self._serve())  # noqa: E731
        self._thread = threading.Thread(target=target, daemon=True)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._socket.listen(1024)
        server = H1Server(self.app, limits=ServerLimits(shutdown_timeout=1.0))
        await server.start(
            sock=self._socket, ssl=self.tls.server_context() if self.tls is not None else None
        )
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await server.shutdown()

    @property
    def base_url(self) -> str:
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> AppThread:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._running() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self._running()
        return self

    def _running(self) -> bool:
        if self.server == "uvicorn":
            return bool(self._uvicorn.started)
        return self._started.is_set()

    def stop(self) -> None:
        if self.server == "uvicorn":
            self._uvicorn.should_exit = True
        elif self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)
        self._socket.close()


@pytest.fixture(params=["polystream", "uvicorn"])
def stack(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., tuple[ServerThread, AppThread]]]:
    """``stack(upstream_dialect, scenarios, **limits)`` -> (emulator, gateway), the
    gateway served by polystream's own server and by uvicorn (the app is an ASGI app:
    it must behave the same under any server)."""
    running: list[Any] = []

    def start(
        upstream_dialect: str,
        scenarios: list[dict[str, Any]] | None = None,
        *,
        journal: Journal | None = None,
        api_key: str | None = GATEWAY_KEY,
        emulator: ServerThread | None = None,
        background: bool = False,
        **limits: Any,
    ) -> tuple[ServerThread, AppThread]:
        if emulator is None:
            emulator = ServerThread(Emulator(parse_scenarios(scenarios or []))).start()
            running.append(emulator)
        provider = upstream_dialect.split("_", maxsplit=1)[0]
        upstream = Upstream(
            name=provider,
            dialect=upstream_dialect,
            base_url=emulator.base_url + PREFIX[provider],
            api_key=CANARY,
            background=background,
        )
        # Every inbound model is rewritten to one the upstream knows.
        route = Route(model="*", upstream=provider, rewrite=UPSTREAM_MODEL[provider])
        config = GatewayConfig(
            upstreams={provider: upstream}, routes=[route], api_key=api_key, limits=Limits(**limits)
        )
        gateway = AppThread(
            create_gateway(
                config,
                journal=journal,
                retry=RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02),
            ),
            server=request.param,
        ).start()
        running.append(gateway)
        return emulator, gateway

    yield start
    for server in reversed(running):
        server.stop()
