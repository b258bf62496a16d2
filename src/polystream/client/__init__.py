"""The streaming client: thin sync and async shells over :mod:`polystream.call`."""

from __future__ import annotations

from polystream.client._http import (
    AsyncClient,
    AsyncEventStream,
    Client,
    EventStream,
    FileInput,
    Shortcuts,
)

__all__ = ["AsyncClient", "AsyncEventStream", "Client", "EventStream", "FileInput", "Shortcuts"]
