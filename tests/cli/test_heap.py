"""The servers' heap settled before they serve (``polystream.cli._heap``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

import polystream.cli._heap as heap
import polystream.server._h1server as h1server
from polystream.cli import main


class _Node:
    other: Any = None


@pytest.fixture
def unfreeze() -> Iterator[None]:
    """Give the objects frozen by a test back to the collector."""
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.mark.usefixtures("unfreeze")
def test_settle_heap_collects_the_garbage_then_freezes_the_rest() -> None:
    cycle = _Node()
    cycle.other = cycle
    dropped = weakref.ref(cycle)
    del cycle  # unreachable, but alive until a collection finds its cycle
    kept = _Node()
    assert dropped() is not None
    assert any(obj is kept for obj in gc.get_objects())
    heap.settle_heap()
    # The garbage was collected, not frozen; what is alive left the generations
    # (gc.get_objects lists the three generations, not the frozen objects).
    assert dropped() is None
    assert gc.get_freeze_count() > 0
    assert not any(obj is kept for obj in gc.get_objects())
    assert gc.get_count()[0] < 50


def _record(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The list the commands' steps are recorded in, in order: settling the heap is
    recorded here, serving by each test's own stand-in."""
    calls: list[Any] = []
    monkeypatch.setattr(heap, "settle_heap", lambda: calls.append("settle"))
    return calls


def test_gateway_settles_its_heap_before_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record(monkeypatch)
    monkeypatch.setattr(h1server, "run", lambda app, sock, **kw: calls.append(("run", len([sock]))))

    def serve(self: uvicorn.Server, sockets: list[Any]) -> None:
        calls.append(("uvicorn", len(sockets)))

    monkeypatch.setattr(uvicorn.Server, "run", serve)
    assert main(["gateway", "--upstream", "openai", "--listen", "127.0.0.1:0"]) == 0
    assert calls == ["settle", ("run", 1)]
    calls.clear()
    command = ["gateway", "--upstream", "openai", "--listen", "127.0.0.1:0", "--server", "uvicorn"]
    assert main(command) == 0
    assert calls == ["settle", ("uvicorn", 1)]


def test_serve_settles_its_heap_before_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record(monkeypatch)

    def serve(self: uvicorn.Server, sockets: list[Any]) -> None:
        calls.append(("serve", len(sockets)))

    monkeypatch.setattr(uvicorn.Server, "run", serve)
    assert main(["serve", "--port", "0"]) == 0
    assert calls == ["settle", ("serve", 1)]
