"""The demo turn (``polystream demo``), sans-I/O: its scenarios and native requests.

One agent turn, the same in every dialect: the user asks for the weather; the model
reasons and calls ``get_weather`` (step 1); the client sends the tool result back; the
model reasons again and answers (step 2). :data:`DEMO_SCENARIOS` make the emulator
answer it; :func:`demo_request` builds each step's request body in the dialect's own
native shape, from one unified request.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.dialects import DIALECTS, PROVIDERS
from polystream.request import (
    Message,
    Request,
    TextPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
    build_request,
)
from polystream.scenario._format import Scenario, parse_scenarios

__all__ = [
    "DEMO_ANSWER",
    "DEMO_ARGUMENTS",
    "DEMO_MODELS",
    "DEMO_QUESTION",
    "DEMO_REASONING",
    "DEMO_SCENARIOS",
    "DEMO_TOOL",
    "DemoRequest",
    "demo_request",
]

DEMO_QUESTION: Final = "What is the weather in Paris right now? Answer in one sentence."
DEMO_TOOL: Final = "get_weather"
DEMO_ARGUMENTS: Final = {"city": "Paris", "unit": "celsius"}
DEMO_RESULT: Final = {"temperature": 18, "unit": "celsius", "conditions": "sunny"}
DEMO_ANSWER: Final = "It is 18 °C and sunny in Paris right now — a fine day for a walk."
"""The final answer's text (non-ASCII on purpose: UTF-8 must survive every hop)."""

DEMO_REASONING: Final = (
    "The user wants the current weather in Paris. I should call get_weather.",
    "The tool says 18 °C and sunny. I can answer in one sentence.",
)
"""The reasoning text of step 1 and of step 2."""

DEMO_MODELS: Final[dict[str, str]] = {
    name: spec.reply.demo_model for name, spec in DIALECTS.items() if spec.reply.demo_model
}
"""The model the demo asks each dialect for (its ``reply.demo_model``)."""

_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
}
_DESCRIPTION: Final = "Current weather for a city."

DEMO_SCENARIOS: Final[list[Scenario]] = parse_scenarios(
    [
        {
            "name": "demo: answer with the tool result",
            "match": {"tool_result": True, "contains": "weather in Paris"},
            "reply": {
                "reasoning": {
                    "text": DEMO_REASONING[1],
                    "signature": "c2lnLWRlbW8tc3RlcC0y",
                },
                "text": DEMO_ANSWER,
            },
            "timing": {"first_event": 0.03, "delay": 0.002},
        },
        {
            "name": "demo: call the weather tool",
            "match": {"tools": True, "contains": "weather in Paris"},
            "reply": {
                "reasoning": {
                    "text": DEMO_REASONING[0],
                    "signature": "c2lnLWRlbW8tc3RlcC0x",
                },
                "tool_calls": [{"name": DEMO_TOOL, "arguments": DEMO_ARGUMENTS}],
            },
            "timing": {"first_event": 0.03, "delay": 0.002},
        },
    ],
    source="<demo>",
)
"""The scenarios of the demo turn (step 2 first: it is the more specific match)."""


class DemoRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One native request of the demo.

    Fields:
        path: The path under the emulator's root (``/openai/v1/responses``...).
        body: The JSON body.
    """

    path: str
    body: dict[str, Any]


def _result_text() -> str:
    return msgspec.json.encode(DEMO_RESULT).decode()


_DEMO_VERSION: Final = "v1beta"
"""The API version of a demo path whose route has a ``{version}`` segment."""


def _demo_path(dialect: str, model: str) -> str:
    """The path of the dialect's streaming create route under its provider's prefix."""
    spec = DIALECTS[dialect]
    route = next(r for r in spec.routes if r.action != "resume" and r.stream is not False)
    path = PROVIDERS[spec.provider].prefix + route.path
    path = path.replace("{version}", _DEMO_VERSION).replace("{model}", model)
    # A route that always streams (Gemini's streamGenerateContent) is asked for SSE.
    return path + "?alt=sse" if route.stream else path


def demo_request(dialect: str, step: int, call_id: str | None = None) -> DemoRequest:
    """The native streaming request of a demo step.

    One unified :class:`~polystream.request.Request` of the turn, built for the dialect
    by :func:`~polystream.request.build_request` (the same request codecs the gateway
    and the client use).

    Args:
        dialect: The dialect.
        step: 1 (ask; the model calls the tool) or 2 (send the tool result back).
        call_id: The tool call id the model gave in step 1 (step 2).
    """
    model = DEMO_MODELS[dialect]
    call = call_id or "call_demo"
    messages = [Message(role="user", content=[TextPart(text=DEMO_QUESTION)])]
    if step == 2:
        messages += [
            Message(
                role="assistant",
                content=[ToolCallPart(id=call, name=DEMO_TOOL, arguments=DEMO_ARGUMENTS)],
            ),
            Message(
                role="tool",
                content=[ToolResultPart(call_id=call, name=DEMO_TOOL, content=_result_text())],
            ),
        ]
    request = Request(
        model=model,
        messages=messages,
        tools=[Tool(name=DEMO_TOOL, description=_DESCRIPTION, parameters=_SCHEMA)],
        max_tokens=1024,
    )
    native = build_request(dialect, request)
    return DemoRequest(path=_demo_path(dialect, model), body=native.body)
