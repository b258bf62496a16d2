"""Rebuild the native ``Message`` (as ``POST /v1/messages`` without streaming returns it).

The unified events are first encoded back to Messages SSE (the same encoder, so the
same rules), then the native events are folded the way the Anthropic docs describe
("Streaming Messages": ``message_start`` holds the skeleton, blocks are appended at
``content_block_start`` and extended by their deltas, ``message_delta`` sets the stop
reason and the cumulative usage). The result has ``id``, ``type``, ``role``, ``model``,
``content`` (text with ``citations``, thinking with ``signature``, ``redacted_thinking``,
``tool_use`` with parsed ``input``, server tool blocks as sent), ``stop_reason``,
``stop_sequence``, ``usage`` and any other field the stream carried (``stop_details``,
``container``).

Tool input: the concatenated ``input_json_delta`` fragments parsed once. Input cut off
before the end (``max_tokens``) is parsed leniently, as the SDK does (``jiter`` partial
mode), so the object holds what arrived; the unified Result reports it as incomplete.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jiter
import msgspec

from polystream.dialects._messages.encode import MessagesEncoder
from polystream.dialects._messages.usage import merge_native
from polystream.dialects._messages.wire import GENERIC_DECODER, TOOL_USE_TYPES
from polystream.events import Event
from polystream.wire.sse import ServerSentEvent, SSEDecoder

__all__ = ["fold_native", "rebuild_with"]


def rebuild_with(encoder: MessagesEncoder, events: Iterable[Event]) -> dict[str, Any]:
    """The native Message for ``events``, encoded with ``encoder`` then folded."""
    data = encoder.encode_all(events)
    frames = SSEDecoder().feed(data)
    payloads = []
    for frame in frames:
        if type(frame) is ServerSentEvent:
            try:
                payloads.append(GENERIC_DECODER.decode(frame.data))
            except msgspec.DecodeError:
                continue
    return fold_native(payloads)


def _parse_input(text: str) -> Any:
    try:
        return GENERIC_DECODER.decode(text)
    except msgspec.DecodeError:
        try:
            return jiter.from_json(text.encode(), partial_mode=True)
        except ValueError:
            return {}


def _str(value: Any) -> str:
    """A text field's value; one of another type (a malformed stream's) adds nothing."""
    return value if type(value) is str else ""


def _list(value: Any) -> list[Any]:
    """A list field's value; one of another type (a malformed stream's) holds nothing."""
    return value if type(value) is list else []


def fold_native(payloads: Iterable[Any]) -> dict[str, Any]:
    """Fold native Messages stream payloads into the final Message object."""
    message: dict[str, Any] = {}
    content: list[dict[str, Any]] = []
    position: dict[int, int] = {}  # provider index -> position in content
    inputs: dict[int, list[str]] = {}  # content position -> input fragments
    for payload in payloads:
        if not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        if kind == "message_start" and isinstance(payload.get("message"), dict):
            message = dict(payload["message"])
            content = [dict(b) for b in _list(message.get("content")) if isinstance(b, dict)]
            message["content"] = content
            if isinstance(message.get("usage"), dict):
                message["usage"] = dict(message["usage"])
        elif kind == "content_block_start" and isinstance(payload.get("content_block"), dict):
            index = payload.get("index", len(content))
            if type(index) is not int:
                continue
            position[index] = len(content)
            content.append(dict(payload["content_block"]))
        elif kind == "content_block_delta":
            index = payload.get("index")
            at = position.get(index) if type(index) is int else None
            delta = payload.get("delta")
            if at is None or not isinstance(delta, dict):
                continue
            block = content[at]
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = _str(block.get("text")) + _str(delta.get("text"))
            elif dtype == "thinking_delta":
                block["thinking"] = _str(block.get("thinking")) + _str(delta.get("thinking"))
            elif dtype == "signature_delta":
                # A thinking block's field; on another block it is polystream's carrier
                # (see .encode), which the SDK skips too: not part of the message.
                if block.get("type") == "thinking":
                    signature = _str(delta.get("signature"))
                    block["signature"] = _str(block.get("signature")) + signature
            elif dtype == "input_json_delta":
                inputs.setdefault(at, []).append(_str(delta.get("partial_json")))
            elif dtype == "citations_delta":
                block["citations"] = [*_list(block.get("citations")), delta.get("citation")]
            elif dtype == "compaction_delta":
                # Each compaction delta replaces both fields (SDK BetaMessageStream).
                block["content"] = delta.get("content")
                block["encrypted_content"] = delta.get("encrypted_content")
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict):
                message.update(delta)
            usage = payload.get("usage")
            if isinstance(usage, dict):
                before = message.get("usage")
                message["usage"] = merge_native(before if isinstance(before, dict) else {}, usage)
    for at, fragments in inputs.items():
        text = "".join(fragments)
        block_type = content[at].get("type")
        if text.strip() and type(block_type) is str and block_type in TOOL_USE_TYPES:
            content[at]["input"] = _parse_input(text)
    message["content"] = content
    return message
