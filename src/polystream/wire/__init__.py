"""Framing, sans-I/O: server-sent events and Gemini's streamed JSON array (and, in
``_http1``, the HTTP/1.1 head rule that the server and the client transport share).

Each decoder has the same shape: ``feed(bytes) -> list[frame]`` and ``close() ->
list[frame]``; each encoder is its exact inverse.
"""

from __future__ import annotations

from polystream.wire.jsonarray import JSONArrayDecoder, JSONArrayEncoder, JSONElement
from polystream.wire.sse import ServerSentEvent, SSEComment, SSEDecoder, SSEEncoder, SSEFrame

__all__ = [
    "JSONArrayDecoder",
    "JSONArrayEncoder",
    "JSONElement",
    "SSEComment",
    "SSEDecoder",
    "SSEEncoder",
    "SSEFrame",
    "ServerSentEvent",
]
