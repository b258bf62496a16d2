"""polystream: every streaming dialect of the OpenAI, Anthropic, xAI and Gemini APIs.

Decode any dialect (any chunking) into one unified event model, rebuild the final
reply, re-encode into any dialect, serve provider emulations and call the real
providers. The sans-I/O core (this package minus ``client``, ``server`` and ``cli``)
needs only ``msgspec`` and ``jiter``.
"""

from __future__ import annotations

from polystream import events
from polystream.accumulate import Accumulator, Block, Result, ToolCall
from polystream.accumulate import accumulate as accumulate_events
from polystream.decoding import StreamDecoder, decode, decode_events
from polystream.dialects import DIALECTS, get_dialect
from polystream.errors import (
    BufferLimitExceeded,
    EventOrderError,
    LocalProtocolError,
    PolystreamError,
    ProtocolError,
    RemoteProtocolError,
    StreamTruncated,
    ToolArgumentsError,
)

__version__ = "0.1.0"

_LAZY = {"Client": "polystream.client", "AsyncClient": "polystream.client"}


def __getattr__(name: str) -> object:
    # The HTTP client pulls in httpx; import it only when it is used.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'polystream' has no attribute {name!r}")


__all__ = [
    "DIALECTS",
    "Accumulator",
    "AsyncClient",
    "Block",
    "BufferLimitExceeded",
    "Client",
    "EventOrderError",
    "LocalProtocolError",
    "PolystreamError",
    "ProtocolError",
    "RemoteProtocolError",
    "Result",
    "StreamDecoder",
    "StreamTruncated",
    "ToolArgumentsError",
    "ToolCall",
    "__version__",
    "accumulate_events",
    "decode",
    "decode_events",
    "events",
    "get_dialect",
]
