"""The Gemini Interactions SSE wire format: event names, step and delta types, and the
msgspec types used to read payloads.

Framing (spec/streaming.md section 1): ``event: <type>`` + ``data: <json>``; the JSON repeats
the name in ``event_type`` and carries ``event_id`` (the resume cursor, sent back as
``last_event_id``). The stream ends with ``interaction.completed`` then ``event: done`` /
``data: [DONE]``.

Two schemas exist (docs: ai.google.dev/gemini-api/docs/migrate-to-interactions, "Streaming"):

* the current **steps** schema: ``interaction.created``, ``interaction.status_update`` /
  ``interaction.in_progress`` / ``interaction.requires_action``, ``step.start`` /
  ``step.delta`` / ``step.stop``, ``interaction.completed``, ``error``, ``done``;
* the deprecated **legacy** schema: ``interaction.start``, ``content.start`` /
  ``content.delta`` / ``content.stop``, ``interaction.complete`` (final object has
  ``outputs`` instead of ``steps``).

Step and delta type names follow the official SDK unions
(``google/genai/_gaos/types/interactions/step.py`` and ``stepdeltadata.py``; catalog
surfaces ``gemini.interactions.sse`` and ``gemini.interactions.step_delta``).

Payloads are decoded with one module-level decoder. The hot path (a text, thought or
arguments delta with no field beyond the documented ones) is read into small frozen
Structs that forbid unknown fields; anything else falls back to plain JSON values so that
every field the model does not name can be kept for lossless re-encoding.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from polystream.wire.jsondepth import decode_bounded

__all__ = [
    "CALL_MAIN",
    "DEFAULT_DELTA_TYPE",
    "FAST_DELTA",
    "FINAL_EVENTS",
    "LEGACY_EVENTS",
    "NAMED_STEP_TYPES",
    "SERVER_TOOL_FAMILIES",
    "START_EVENTS",
    "STATUS_EVENTS",
    "WHOLE_DELTA_SUFFIXES",
    "FastDelta",
    "FastStepDelta",
    "decode_any",
    "encode_json",
    "kind_of_step",
    "main_field",
    "step_type_of",
]

START_EVENTS: Final = frozenset({"interaction.created", "interaction.start"})
"""Events that open a stream (current / legacy)."""

FINAL_EVENTS: Final = frozenset({"interaction.completed", "interaction.complete"})
"""Events that carry the final interaction (current / legacy)."""

STATUS_EVENTS: Final = frozenset(
    {
        "interaction.status_update",
        "interaction.in_progress",
        "interaction.requires_action",
        "interaction.cancelled",
    }
)
"""Events that report a status change. ``interaction.in_progress`` and
``interaction.requires_action`` replace ``interaction.status_update`` in the current schema
(migration guide); the status is the name's suffix when the payload has no ``status``.
``interaction.cancelled`` is the SDK's ``InteractionCancelledEvent``."""

LEGACY_EVENTS: Final = frozenset(
    {"interaction.start", "interaction.complete", "content.start", "content.delta", "content.stop"}
)
"""Events that exist only in the legacy schema."""

SERVER_TOOL_FAMILIES: Final = frozenset(
    {
        "google_search",
        "code_execution",
        "url_context",
        "file_search",
        "google_maps",
        "retrieval",
        "tool_search",
        "processing",
        "mcp_server_tool",
    }
)
"""Provider-executed tools: each has a ``<family>_call`` and a ``<family>_result`` step."""

NAMED_STEP_TYPES: Final = frozenset(
    {"function_call", "mcp_server_tool_call", "mcp_server_tool_result"}
)
"""Step types whose ``name`` field is the tool name (kept in ``BlockStart.name``)."""

WHOLE_DELTA_SUFFIXES: Final = ("_call", "_result")
"""Delta types ending so carry a whole object (``arguments`` or ``result``), not a fragment."""

CALL_MAIN: Final = "arguments"

DEFAULT_DELTA_TYPE: Final = {
    "text-delta": "text",
    "reasoning-delta": "thought_summary",
    "signature-delta": "thought_signature",
    "tool-input-delta": "arguments_delta",
    "citation": "text_annotation_delta",
}
"""The delta type an encoder writes for each unified delta event by default."""


def main_field(delta_type: str) -> str:
    """The field holding the whole object of a ``*_call`` / ``*_result`` delta or step."""
    return "result" if delta_type.endswith("_result") else CALL_MAIN


def kind_of_step(step_type: str) -> tuple[str, str | None]:
    """The unified block kind and default name for a step (or legacy content) type.

    Returns:
        ``(kind, name)``; ``name`` is the tool family for server tools, the step type for
        ``other`` blocks, and None when the name comes from the step itself.
    """
    if step_type in ("model_output", "text"):
        return "text", None
    if step_type == "thought":
        return "reasoning", None
    if step_type == "image":
        return "image", None
    if step_type == "audio":
        return "audio", None
    if step_type == "function_call":
        return "tool_call", None
    if step_type.endswith("_call") and step_type[:-5] in SERVER_TOOL_FAMILIES:
        return "server_tool_call", step_type[:-5]
    if step_type.endswith("_result") and step_type[:-7] in SERVER_TOOL_FAMILIES:
        return "server_tool_result", step_type[:-7]
    return "other", step_type


def step_type_of(kind: str, name: str | None, legacy: bool) -> str:
    """The step (or legacy content) type an encoder writes for a unified block.

    The inverse of :func:`kind_of_step` for the blocks it produces; decoders store the
    native type in ``extra`` whenever this would not give it back.
    """
    if kind in ("text", "refusal", "code", "code_result"):
        return "text" if legacy else "model_output"
    if kind in ("image", "audio"):
        return kind if legacy else "model_output"
    if kind == "reasoning":
        return "thought"
    if kind == "tool_call":
        return "function_call"
    if kind == "server_tool_call":
        return f"{name or 'tool'}_call"
    if kind == "server_tool_result":
        return f"{name or 'tool'}_result"
    return name or "other"


class FastDelta(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A text / thought-summary-free delta with only its documented fields.

    ``text`` (type ``text``), ``signature`` (``thought_signature``) or ``arguments``
    (``arguments_delta``); any other field makes decoding fall back to plain values.
    """

    type: Literal["text", "thought_signature", "arguments_delta"]
    text: str | None = None
    signature: str | None = None
    arguments: str | None = None


class FastStepDelta(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A ``step.delta`` / ``content.delta`` payload on the hot path."""

    event_type: Literal["step.delta", "content.delta"]
    index: int
    delta: FastDelta
    event_id: str | None = None


FAST_DELTA: Final = msgspec.json.Decoder(FastStepDelta)
"""Decoder for the hot path; raises ValidationError for anything else."""

_ANY: Final = msgspec.json.Decoder()
_ENCODER: Final = msgspec.json.Encoder()


def decode_any(data: str | bytes) -> Any:
    """Decode JSON into plain values (raises ``msgspec.DecodeError``, also for JSON
    nested past the bound of :mod:`polystream.wire.jsondepth`)."""
    return decode_bounded(data, _ANY)


def encode_json(value: Any) -> str:
    """Compact JSON text of ``value`` (used for whole-object deltas and payloads)."""
    return _ENCODER.encode(value).decode()
