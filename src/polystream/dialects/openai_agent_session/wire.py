"""The OpenAI Agents API session stream's wire format: event types, item types, and the
JSON reader and writer.

Framing: data-only SSE (``data: <compact JSON>`` and a blank line, no ``event:`` line),
opened by the comment ``: connected``. Every payload names itself in ``type``
(``agent.session.*``, ``agent.output.command_execution_output.delta`` and ``error``) and
carries a unique ``event_id``. The event union is the official SDK's
(``openai/types/beta/agent_session_event.py``, ``AgentSessionEvent``).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

__all__ = [
    "COMMAND_OUTPUT_DELTA",
    "ENVIRONMENT_EVENTS",
    "ERROR",
    "FOLLOW",
    "HOSTED_ITEM_TYPES",
    "KNOWN_EVENTS",
    "PREFIX",
    "SESSION_STATUS_EVENTS",
    "SUBAGENT_EVENTS",
    "TURN_END_EVENTS",
    "TURN_START_EVENTS",
    "encode_json",
]

PREFIX: Final = "agent.session."
"""The prefix of every session event's type."""

ERROR: Final = "error"
COMMAND_OUTPUT_DELTA: Final = "agent.output.command_execution_output.delta"

SESSION_STATUS_EVENTS: Final = frozenset(
    {
        "agent.session.in_progress",
        "agent.session.idle",
        "agent.session.requires_action",
        "agent.session.failed",
        "agent.session.budget_reached",
    }
)
"""Events carrying the whole session snapshot with its new ``status``."""

ENVIRONMENT_EVENTS: Final = frozenset(
    {
        "agent.session.environment.pending",
        "agent.session.environment.ready",
        "agent.session.environment.connected",
        "agent.session.environment.disconnected",
        "agent.session.environment.suspended",
        "agent.session.environment.expired",
        "agent.session.environment.failed",
        "agent.session.environment.reset",
    }
)

SUBAGENT_EVENTS: Final = frozenset(
    {
        "agent.session.subagent.created",
        "agent.session.subagent.active",
        "agent.session.subagent.closed",
    }
)

TURN_START_EVENTS: Final = frozenset(
    {"agent.session.turn.created", "agent.session.turn.in_progress"}
)

TURN_END_EVENTS: Final = frozenset(
    {
        "agent.session.turn.completed",
        "agent.session.turn.failed",
        "agent.session.turn.cancelled",
    }
)

KNOWN_EVENTS: Final = (
    frozenset(
        {
            ERROR,
            COMMAND_OUTPUT_DELTA,
            "agent.session.created",
            "agent.session.turn.item.added",
            "agent.session.turn.item.done",
            "agent.session.turn.content_part.added",
            "agent.session.turn.content_part.done",
            "agent.session.turn.output_text.delta",
            "agent.session.turn.output_text.done",
            "agent.session.turn.reasoning_summary_part.added",
            "agent.session.turn.reasoning_summary_part.done",
            "agent.session.turn.reasoning_summary_text.delta",
            "agent.session.turn.reasoning_summary_text.done",
        }
    )
    | SESSION_STATUS_EVENTS
    | ENVIRONMENT_EVENTS
    | SUBAGENT_EVENTS
    | TURN_START_EVENTS
    | TURN_END_EVENTS
)
"""The 34 event types of the SDK's ``AgentSessionEvent`` union."""

HOSTED_ITEM_TYPES: Final = frozenset(
    {
        "web_search_call",
        "mcp_call",
        "command_execution",
        "computer_use_call",
        "computer_use_approval_request",
        "create_subagent_call",
        "send_subagent_input_call",
        "resume_subagent_call",
        "wait_for_subagents_call",
        "interrupt_subagent_call",
        "close_subagent_call",
    }
)
"""Output items the platform runs itself: ``server_tool_call`` blocks."""

FOLLOW: Final = "agent_session_event"
"""The ``extra`` key of a unified event that is not the first one made from its native
event: it holds that event's ``event_id`` (the first one carries the whole payload and
writes it back)."""

_ENCODER: Final = msgspec.json.Encoder()


def encode_json(value: Any) -> bytes:
    """Compact JSON, keys in their order (as the API writes them)."""
    return _ENCODER.encode(value)
