"""Wire shapes of the Messages streaming protocol (Anthropic, and xAI's ``/v1/messages``).

Two kinds of decoding, chosen per event:

* The **fast path**: the four events that make up almost every byte of a stream
  (``content_block_delta`` with a known delta type, ``content_block_stop``, ``ping``,
  ``message_stop``) decode into small msgspec Structs with ``forbid_unknown_fields``.
  A payload with a field we do not model fails validation on purpose and goes to the
  general path, so the fast path can never drop a field.
* The **general path**: the payload decodes to plain Python values and the decoder
  keeps every field it does not model in the unified event's ``extra``.

The module also holds the *block skeletons*: the ``content_block`` object Anthropic sends
in ``content_block_start`` for each block type (Anthropic docs, "Streaming Messages",
event types). The decoder records only how a native block differs from its skeleton,
and the encoder rebuilds the block as skeleton + difference, so that same-dialect
re-encoding is exact without keeping the native event.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.dialects._carrier import CARRIER_PREFIX as _CARRIER_PREFIX

__all__ = [
    "CARRIER_PREFIX",
    "CONTENT_BLOCK_FAST",
    "FAST_DECODER",
    "GENERIC_DECODER",
    "RESULT_BLOCK_TYPES",
    "TOOL_USE_TYPES",
    "CitationsDeltaW",
    "ContentBlockDeltaW",
    "ContentBlockStopW",
    "InputJsonDeltaW",
    "MessageStopW",
    "PingW",
    "SignatureDeltaW",
    "TextDeltaW",
    "ThinkingDeltaW",
    "apply_diff",
    "diff_from",
    "skeleton",
]


CARRIER_PREFIX: Final = _CARRIER_PREFIX
"""Prefix of a thinking ``signature`` that carries another dialect's opaque state:
``polystream:v1:<origin dialect>:<the original bytes>`` (see :mod:`.encode`)."""


class TextDeltaW(msgspec.Struct, tag="text_delta", tag_field="type", forbid_unknown_fields=True):
    """``{"type": "text_delta", "text": ...}``."""

    text: str


class ThinkingDeltaW(
    msgspec.Struct, tag="thinking_delta", tag_field="type", forbid_unknown_fields=True
):
    """``{"type": "thinking_delta", "thinking": ...}``."""

    thinking: str


class InputJsonDeltaW(
    msgspec.Struct, tag="input_json_delta", tag_field="type", forbid_unknown_fields=True
):
    """``{"type": "input_json_delta", "partial_json": ...}`` (the first may be ``""``)."""

    partial_json: str


class SignatureDeltaW(
    msgspec.Struct, tag="signature_delta", tag_field="type", forbid_unknown_fields=True
):
    """``{"type": "signature_delta", "signature": ...}``: opaque, kept byte for byte."""

    signature: str


class CitationsDeltaW(
    msgspec.Struct, tag="citations_delta", tag_field="type", forbid_unknown_fields=True
):
    """``{"type": "citations_delta", "citation": {...}}``; the citation is kept as sent."""

    citation: dict[str, Any]


DeltaW = TextDeltaW | ThinkingDeltaW | InputJsonDeltaW | SignatureDeltaW | CitationsDeltaW


class ContentBlockDeltaW(
    msgspec.Struct, tag="content_block_delta", tag_field="type", forbid_unknown_fields=True
):
    """``content_block_delta`` with a delta type the fast path knows."""

    index: int
    delta: DeltaW


class ContentBlockStopW(
    msgspec.Struct, tag="content_block_stop", tag_field="type", forbid_unknown_fields=True
):
    """``content_block_stop``."""

    index: int


class PingW(msgspec.Struct, tag="ping", tag_field="type", forbid_unknown_fields=True):
    """``ping``: a keep-alive (Anthropic docs: "Ping events")."""


class MessageStopW(
    msgspec.Struct, tag="message_stop", tag_field="type", forbid_unknown_fields=True
):
    """``message_stop``: the terminal event."""


FAST_DECODER: Final = msgspec.json.Decoder(
    ContentBlockDeltaW | ContentBlockStopW | PingW | MessageStopW
)
"""Decoder of the fast-path events (one instance, reused)."""

GENERIC_DECODER: Final = msgspec.json.Decoder()
"""Decoder to plain Python values for the general path (one instance, reused)."""

CONTENT_BLOCK_FAST: Final = frozenset(
    {"content_block_delta", "content_block_stop", "ping", "message_stop"}
)
"""SSE event names worth trying on the fast path."""

TOOL_USE_TYPES: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
"""Block types whose input streams as ``input_json_delta``."""

RESULT_BLOCK_TYPES: Final = frozenset(
    {
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_result",
        "advisor_tool_result",
    }
)
"""Server tool result block types (event catalog, ``content_block_start`` block types).

Each arrives whole in ``content_block_start`` and is followed directly by its
``content_block_stop``."""


def skeleton(block_type: str, id: str | None = None, name: str | None = None) -> dict[str, Any]:
    """The ``content_block`` Anthropic sends at ``content_block_start`` for a block type.

    Shapes from the Anthropic docs "Streaming Messages" (text, tool use, extended
    thinking examples) and "Context editing / compaction". Live thinking blocks start
    with an empty ``signature`` too (``{"type": "thinking", "thinking": "",
    "signature": ""}``), so it is part of the skeleton.
    """
    if block_type == "text":
        return {"type": "text", "text": ""}
    if block_type == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if block_type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": ""}
    if block_type in TOOL_USE_TYPES:
        return {"type": block_type, "id": id, "name": name, "input": {}}
    if block_type == "compaction":
        return {"type": "compaction"}
    return {"type": block_type}


def diff_from(native: dict[str, Any], base: dict[str, Any]) -> dict[str, Any] | None:
    """The difference between ``native`` and ``base`` as a small JSON-able mapping.

    Returns None when they are equal, else ``{"set": {...}, "absent": [...]}`` (either
    key omitted when empty).
    """
    changed = {key: value for key, value in native.items() if key not in base or base[key] != value}
    missing = [key for key in base if key not in native]
    if not changed and not missing:
        return None
    out: dict[str, Any] = {}
    if changed:
        out["set"] = changed
    if missing:
        out["absent"] = missing
    return out


def apply_diff(base: dict[str, Any], diff: Any) -> dict[str, Any]:
    """Rebuild a native object: ``base`` updated by a :func:`diff_from` result."""
    if isinstance(diff, dict):
        changed = diff.get("set")
        if isinstance(changed, dict):
            base.update(changed)
        missing = diff.get("absent")
        if isinstance(missing, list):
            for key in missing:
                base.pop(key, None)
    return base
