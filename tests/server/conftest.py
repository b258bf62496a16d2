"""Fixtures for the emulator tests: a uvicorn server on a free loopback port, run in a
background thread and stopped cleanly after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polystream.scenario import Emulator, parse_scenarios
from polystream.server import ServerThread
from tests.server.support import close_tracked


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """Close the SDK clients a test made (their pooled sockets), whatever the outcome."""
    yield
    close_tracked()


@pytest.fixture
def serve() -> Iterator[Callable[..., ServerThread]]:
    """Start an emulator with the given scenarios; stopped at the end of the test."""
    started: list[ServerThread] = []

    def start(scenarios: list[dict[str, Any]] | None = None, **options: Any) -> ServerThread:
        parsed = parse_scenarios(scenarios or [])
        server = ServerThread(Emulator(parsed, **options)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(serve: Callable[..., ServerThread]) -> ServerThread:
    """An emulator with no scenarios (default replies)."""
    return serve()
