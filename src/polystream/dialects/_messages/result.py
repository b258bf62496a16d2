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
from typing import Any, Final

import jiter
import msgspec

from polystream.dialects._messages.encode import MessagesEncoder
from polystream.dialects._messages.usage import merge_native
from polystream.dialects._messages.wire import GENERIC_DECODER, TOOL_USE_TYPES
from polystream.events import Event
from polystream.wire.jsondepth import JSONTooDeep, decode_bounded
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
        return decode_bounded(text, GENERIC_DECODER, what="tool input")
    except JSONTooDeep:
        return {}  # (not parsed, as a prefix either: see polystream.wire.jsondepth)
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
    """Fold native Messages stream payloads into the final Message object.

    A block's text fields (``text``, ``thinking``, ``signature``), its tool input and
    its citations are gathered in lists and joined once at the end: joined at each
    delta, a long answer would cost time quadratic in its number of deltas.
    """
    message: dict[str, Any] = {}
    content: list[dict[str, Any]] = []
    position: dict[int, int] = {}  # provider index -> position in content
    # Per block (by identity: a second message_start replaces the list of blocks):
    # the block, then its text fields' pieces, input fragments and citations.
    folds: dict[int, tuple[dict[str, Any], dict[str, list[Any]]]] = {}
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
            if at is None or at >= len(content) or not isinstance(delta, dict):
                continue
            block = content[at]
            dtype = delta.get("type")
            if dtype == "text_delta":
                _piece(folds, block, "text", delta.get("text"))
            elif dtype == "thinking_delta":
                _piece(folds, block, "thinking", delta.get("thinking"))
            elif dtype == "signature_delta":
                # A thinking block's field; on another block it is polystream's carrier
                # (see .encode), which the SDK skips too: not part of the message.
                if block.get("type") == "thinking":
                    _piece(folds, block, "signature", delta.get("signature"))
            elif dtype == "input_json_delta":
                _piece(folds, block, _INPUT, delta.get("partial_json"))
            elif dtype == "citations_delta":
                _piece(folds, block, "citations", delta.get("citation"))
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
    for block, fields in folds.values():
        for field, pieces in fields.items():
            if field == "citations":
                block["citations"] = [*_list(block.get("citations")), *pieces]
            elif field != _INPUT:
                block[field] = _str(block.get(field)) + "".join(pieces)
            else:
                text = "".join(pieces)
                block_type = block.get("type")
                if text.strip() and type(block_type) is str and block_type in TOOL_USE_TYPES:
                    block["input"] = _parse_input(text)
    message["content"] = content
    return message


# The key of a block's tool input fragments among its folded fields (no Message field).
_INPUT: Final = "\x00input"


def _piece(
    folds: dict[int, tuple[dict[str, Any], dict[str, list[Any]]]],
    block: dict[str, Any],
    field: str,
    value: Any,
) -> None:
    """Add a delta's value to a block's field, to be joined at the end (a text value of
    another type, from a malformed stream, adds nothing; a citation is kept as sent)."""
    if field != "citations" and type(value) is not str:
        return
    entry = folds.get(id(block))
    if entry is None:
        entry = folds[id(block)] = (block, {})
    pieces = entry[1].get(field)
    if pieces is None:
        pieces = entry[1][field] = []
        if field != _INPUT and field not in block:
            block[field] = None  # (its place among the keys, as when set at its delta)
    pieces.append(value)
