"""What ``openai_agent_session`` is and where it is served (data only; see
:mod:`polystream.dialects._spec`)."""

from __future__ import annotations

from polystream.dialects._spec import (
    AuthSpec,
    DetectSpec,
    DialectSpec,
    ErrorSpec,
    ReplySpec,
    ResumeSpec,
    RouteSpec,
)

__all__ = ["SPEC"]

SPEC = DialectSpec(
    name="openai_agent_session",
    provider="openai",
    family="agent_session",
    framings=("sse",),
    description="OpenAI Agents API session events (SSE)",
    routes=(
        RouteSpec("POST", "/v1/agents/sessions"),
        RouteSpec("GET", "/v1/agents/sessions/{id}/events", "subscribe", stream=True),
    ),
    # (The Agents API is a beta: every request names it, as the official SDK does.)
    auth=AuthSpec(
        "authorization",
        bearer=True,
        accepts=("bearer", "x-api-key"),
        extra={"openai-beta": "agents=v1"},
    ),
    errors=ErrorSpec("openai", param_field=True),
    resume=ResumeSpec("counter", id_lines=True),
    detect=DetectSpec(3, prefixes=("agent.session.",)),
    reply=ReplySpec("sess_", "call_", item_ids=True, demo_model="gpt-5.4-mini"),
)
