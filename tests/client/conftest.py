"""An emulator on a free loopback port, and a polystream Client pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polystream.client import Client
from polystream.retry import RetryPolicy
from polystream.scenario import Emulator, parse_scenarios
from polystream.server import ServerThread

PREFIX = {"openai": "/openai/v1", "xai": "/xai/v1", "anthropic": "/anthropic", "gemini": "/gemini"}
MODEL = {
    "openai_responses": "gpt-5.4-nano",
    "openai_chat": "gpt-5.4-nano",
    "anthropic_messages": "claude-haiku-4-5",
    "xai_responses": "grok-4.3",
    "xai_chat": "grok-4.3",
    "xai_messages": "grok-4.3",
    "gemini_generate": "gemini-3.5-flash-lite",
    "gemini_interactions": "gemini-3.5-flash-lite",
}
FAST = RetryPolicy(max_retries=3, initial_delay=0.01, max_delay=0.05)


def base_urls(server: ServerThread) -> dict[str, str]:
    return {provider: server.base_url + path for provider, path in PREFIX.items()}


@pytest.fixture
def serve() -> Iterator[Callable[..., ServerThread]]:
    started: list[ServerThread] = []

    def start(scenarios: list[dict[str, Any]] | None = None) -> ServerThread:
        server = ServerThread(Emulator(parse_scenarios(scenarios or []))).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def client_for(serve: Callable[..., ServerThread]) -> Iterator[Callable[..., Client]]:
    clients: list[Client] = []

    def make(scenarios: list[dict[str, Any]] | None = None, **options: Any) -> Client:
        server = serve(scenarios)
        options.setdefault("retry", FAST)
        client = Client(api_key="test-key", base_url=base_urls(server), **options)
        client.server = server  # type: ignore[attr-defined]
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
