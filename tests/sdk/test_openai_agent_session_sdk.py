"""The official ``openai`` SDK on the same bytes as polystream (Agents API session
events).

``client.beta.agents.sessions.events.stream(session_id)`` and
``client.beta.agents.sessions.create(..., stream=True)`` run over an
``httpx2.MockTransport`` serving each fixture's exact bytes. The SDK's typed events must
be the native events polystream decoded (same types, same ``event_id``s, in order); its
``get_final_result()`` must agree with polystream's Result on the turn's text, status and
usage, and the final ``AgentSession`` polystream rebuilds must parse as the SDK's model
with the SDK's last snapshot.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from openai.lib.beta.agents import AgentTurnResultError
from openai.types.beta.agent_session import AgentSession

from polystream import StreamDecoder
from polystream.accumulate import accumulate
from polystream.dialects.openai_agent_session import rebuild
from polystream.events import Event, Unknown
from tests.helpers import FIXTURES

DIALECT = "openai_agent_session"
FILES = sorted((FIXTURES / DIALECT).glob("*.sse"))
SID = "sess_68e1c0a4d2f48190a7b3"
_SERVED: list[bytes] = [b""]


def _handler(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=_SERVED[0])


@functools.cache
def _client() -> openai.OpenAI:
    http = httpx2.Client(transport=httpx2.MockTransport(_handler))
    return openai.OpenAI(api_key="x", base_url="http://test/v1", http_client=http, max_retries=0)


def _decode(data: bytes) -> list[Event]:
    decoder = StreamDecoder(DIALECT)
    return decoder.feed(data) + decoder.close()


def _native(events: list[Event]) -> list[tuple[str, str]]:
    """(type, event_id) of each native event, as polystream's events carry them."""
    out: list[tuple[str, str]] = []
    for event in events:
        payload: Any = event.extra
        if isinstance(event, Unknown):
            payload = json.loads(event.data)
        if isinstance(payload, dict) and "type" in payload and "event_id" in payload:
            out.append((payload["type"], payload["event_id"]))
    return out


@pytest.mark.parametrize(
    "path", [p for p in FILES if p.name != "truncated.sse"], ids=lambda p: p.name
)
def test_sdk_events_are_the_decoded_native_events(path: Path) -> None:
    data = _SERVED[0] = path.read_bytes()
    with _client().beta.agents.sessions.events.stream(SID) as stream:
        seen = [(event.type, event.event_id) for event in stream]
    assert seen == _native(_decode(data))


def test_sdk_final_result_agrees_with_the_result_and_rebuild() -> None:
    data = _SERVED[0] = (FIXTURES / DIALECT / "session.sse").read_bytes()
    events = _decode(data)
    result = accumulate(events)
    with _client().beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5.4-mini"}, input="Hi", stream=True
    ) as stream:
        snapshots = [e.session for e in stream if hasattr(e, "session")]

    def get_weather(arguments: dict[str, Any]) -> str:
        return "18°C, light rain"

    final = (
        _client()
        .beta.agents.sessions.create(
            environment={"type": "none"},
            agent={"model": "gpt-5.4-mini"},
            input="Hi",
            stream=True,
            tool_handlers={"get_weather": get_weather},
        )
        .get_final_result()
    )
    # (without a handler for the session's required function call the SDK refuses the
    # result as ``requires_action``)
    assert final.turn.status == "completed"
    assert "".join(m.output_text for m in final.messages) == result.text
    assert final.turn.usage is not None
    assert final.turn.usage.input_tokens == result.usage.input_tokens
    assert final.turn.usage.output_tokens == result.usage.output_tokens
    assert final.turn.usage.total_tokens == result.usage.total_tokens
    assert final.turn.usage.input_tokens_details.cached_tokens == result.usage.cache_read_tokens
    rebuilt = AgentSession.model_validate(rebuild(events))
    assert rebuilt == snapshots[-1]
    assert rebuilt.status == "idle"


def test_sdk_final_result_raises_for_the_failed_session() -> None:
    data = _SERVED[0] = (FIXTURES / DIALECT / "error.sse").read_bytes()
    assert accumulate(_decode(data)).status == "failed"
    with pytest.raises(AgentTurnResultError):
        _client().beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5.4-mini"}, input="Hi", stream=True
        ).get_final_result()
