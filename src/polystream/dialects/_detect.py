"""Detect a stream's dialect from its first bytes (``dialect="auto"``).

The rules, in order (documented in the README):

1. The first non-blank byte is ``[``: ``gemini_generate`` in the JSON-array framing.
   A ``{`` is a single JSON document, not a stream: an error.
2. Otherwise the input is read as SSE, and the first event whose data is a JSON object
   decides (``ping``, ``[DONE]`` and bare ``error`` events are skipped):

   * an event name or ``type`` starting with ``response.``: ``openai_responses``, or
     ``xai_responses`` when ``response.model`` starts with ``grok``;
   * ``message_start``: ``anthropic_messages``, or ``xai_messages`` for a ``grok`` model;
   * an ``event_type`` key, or an event name starting with ``interaction.``, ``step.``
     or ``content.``: ``gemini_interactions``;
   * ``object: chat.completion.chunk`` or a ``choices`` key: ``openai_chat``, or
     ``xai_chat`` for a ``grok`` model;
   * ``candidates``, ``usageMetadata``, ``promptFeedback`` or ``modelVersion`` keys:
     ``gemini_generate`` in the SSE framing.

Detection needs at most :data:`MAX_DETECT_BYTES` of input.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.errors import RemoteProtocolError
from polystream.wire.sse import ServerSentEvent, SSEDecoder

__all__ = ["MAX_DETECT_BYTES", "detect"]

MAX_DETECT_BYTES: Final = 1024 * 1024
"""Input read before giving up on detection (1 MiB)."""

_BLANK: Final = b" \t\r\n\xef\xbb\xbf"


def _model_of(obj: dict[str, Any], *path: str) -> str:
    node: Any = obj
    for key in path:
        if not isinstance(node, dict):
            return ""
        node = node.get(key)
    return node if isinstance(node, str) else ""


def _classify(event: ServerSentEvent) -> str | None:
    if event.data.strip() == "[DONE]":
        return None
    try:
        obj = msgspec.json.decode(event.data)
    except msgspec.DecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    name: str = event.event or ""
    raw_kind = obj.get("type")
    kind: str = raw_kind if isinstance(raw_kind, str) else ""
    tag: str = name or kind
    if "event_type" in obj or tag.startswith(("interaction.", "step.", "content.")):
        return "gemini_interactions"
    if tag.startswith("response.") or kind.startswith("response."):
        grok = _model_of(obj, "response", "model").startswith("grok")
        return "xai_responses" if grok else "openai_responses"
    if tag == "message_start" or kind == "message_start":
        grok = _model_of(obj, "message", "model").startswith("grok")
        return "xai_messages" if grok else "anthropic_messages"
    if obj.get("object") == "chat.completion.chunk" or "choices" in obj:
        return "xai_chat" if _model_of(obj, "model").startswith("grok") else "openai_chat"
    if any(k in obj for k in ("candidates", "usageMetadata", "promptFeedback", "modelVersion")):
        return "gemini_generate"
    return None


def detect(prefix: bytes) -> tuple[str, str] | None:
    """Detect the dialect and framing of a stream from its beginning.

    Args:
        prefix: The first bytes of the stream (all that has arrived so far).

    Returns:
        ``(dialect, framing)``, or None when more input is needed.

    Raises:
        RemoteProtocolError: The input cannot be a stream of any dialect, or nothing
            was recognised within :data:`MAX_DETECT_BYTES`.
    """
    stripped = prefix.lstrip(_BLANK)
    if not stripped:
        return None
    first = stripped[:1]
    if first == b"[":
        return ("gemini_generate", "json_array")
    if first == b"{":
        raise RemoteProtocolError(
            "input is a single JSON document, not a stream (a non-streaming response?)",
            byte_offset=len(prefix) - len(stripped),
        )
    decoder = SSEDecoder(max_line_size=MAX_DETECT_BYTES, max_event_size=MAX_DETECT_BYTES)
    try:
        frames = decoder.feed(prefix[:MAX_DETECT_BYTES])
    except RemoteProtocolError:
        frames = []
    for frame in frames:
        if isinstance(frame, ServerSentEvent):
            dialect = _classify(frame)
            if dialect is not None:
                return (dialect, "sse")
    if len(prefix) >= MAX_DETECT_BYTES:
        raise RemoteProtocolError(
            f"could not detect the dialect in the first {MAX_DETECT_BYTES} bytes",
            byte_offset=0,
        )
    return None
