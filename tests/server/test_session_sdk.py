"""The official SDKs against the emulator's agent-session endpoints, over loopback:
Anthropic's session stream and its input (either order), OpenAI's session create
(streamed, or unary then followed on its events stream), and a fault each."""

from __future__ import annotations

from collections.abc import Callable

import anthropic
import httpx2
import openai
import pytest

from polystream.server import ServerThread
from tests.server.support import track

HELLO = [{"type": "user.message", "content": [{"type": "text", "text": "Hi agent"}]}]
AGENT = {"model": "gpt-5.4-mini"}


def claude(server: ServerThread) -> anthropic.Anthropic:
    return track(
        anthropic.Anthropic(api_key="x", base_url=server.base_url + "/anthropic", max_retries=0)
    )


def oai(server: ServerThread) -> openai.OpenAI:
    return track(openai.OpenAI(api_key="x", base_url=server.base_url + "/openai/v1", max_retries=0))


def test_anthropic_stream_opened_before_the_input_delivers_the_turn(server: ServerThread) -> None:
    sdk = claude(server)
    with sdk.beta.sessions.events.stream("sesn_1") as stream:
        sent = sdk.beta.sessions.events.send("sesn_1", events=HELLO)  # type: ignore[arg-type]
        events = list(stream)
    assert sent.data is not None and len(sent.data) == 1
    echoed = sent.data[0]
    assert echoed.type == "user.message" and echoed.id.startswith("sevt_")
    assert [e.type for e in events] == ["agent.message", "session.usage", "session.status_idle"]
    message = events[0]
    assert message.type == "agent.message"
    assert [block.text for block in message.content] == [
        "Emulated reply from the agent. You said: Hi agent"
    ]
    idle = events[2]
    assert idle.type == "session.status_idle" and idle.stop_reason.type == "end_turn"


def test_anthropic_input_sent_first_waits_for_the_stream(
    serve: Callable[..., ServerThread],
) -> None:
    server = serve([{"match": {"contains": "weather"}, "reply": {"text": "Sunny."}}])
    sdk = claude(server)
    sdk.beta.sessions.events.send(
        "sesn_2",
        events=[{"type": "user.message", "content": [{"type": "text", "text": "weather?"}]}],
    )
    sdk.beta.sessions.events.send("sesn_2", events=HELLO)  # type: ignore[arg-type]
    with sdk.beta.sessions.events.stream("sesn_2") as stream:
        first = [e for e in stream if e.type == "agent.message"]
    with sdk.beta.sessions.events.stream("sesn_2") as stream:
        second = [e for e in stream if e.type == "agent.message"]
    # Each turn once, in the order the input came.
    assert [b.text for e in first for b in e.content] == ["Sunny."]
    assert [b.text for e in second for b in e.content] == [
        "Emulated reply from the agent. You said: Hi agent"
    ]


def test_anthropic_session_in_band_error_fault(serve: Callable[..., ServerThread]) -> None:
    error = {"kind": "overloaded", "code": "model_overloaded_error", "message": "busy"}
    server = serve([{"faults": {"error": error}}])
    sdk = claude(server)
    sdk.beta.sessions.events.send("sesn_3", events=HELLO)  # type: ignore[arg-type]
    with sdk.beta.sessions.events.stream("sesn_3") as stream:
        events = list(stream)
    assert [e.type for e in events] == ["session.error", "session.status_terminated"]
    error = events[0]
    assert error.type == "session.error"
    assert error.error.type == "model_overloaded_error" and error.error.message == "busy"


def test_anthropic_send_http_error_fault_queues_no_turn(
    serve: Callable[..., ServerThread],
) -> None:
    server = serve([{"faults": {"http_error": {"status": 529, "times": 1}}}])
    sdk = claude(server)
    with pytest.raises(anthropic.APIStatusError) as failed:
        sdk.beta.sessions.events.send("sesn_4", events=HELLO)  # type: ignore[arg-type]
    assert failed.value.status_code == 529
    sdk.beta.sessions.events.send("sesn_4", events=HELLO)  # type: ignore[arg-type]
    with sdk.beta.sessions.events.stream("sesn_4") as stream:
        assert [e.type for e in stream][-1] == "session.status_idle"


def test_openai_session_create_streams_the_turn(server: ServerThread) -> None:
    stream = oai(server).beta.agents.sessions.create(
        environment={"type": "none"}, agent=AGENT, input="Hello agent", stream=True
    )
    events = list(stream)
    assert events[0].type == "agent.session.created" and events[-1].type == "agent.session.idle"
    text = "".join(e.delta for e in events if e.type == "agent.session.turn.output_text.delta")
    assert text == "Emulated reply from gpt-5.4-mini. You said: Hello agent"
    session_id = events[0].session.id
    assert session_id.startswith("sess_") and events[-1].session.id == session_id


def test_openai_session_created_unary_runs_on_its_events_stream(server: ServerThread) -> None:
    sdk = oai(server)
    session = sdk.beta.agents.sessions.create(
        environment={"type": "none"}, agent=AGENT, input="Follow me"
    )
    assert session.id.startswith("sess_") and session.status == "idle"
    events = list(sdk.beta.agents.sessions.events.stream(session.id))
    assert events[0].type == "agent.session.created" and events[0].session.id == session.id
    text = "".join(e.delta for e in events if e.type == "agent.session.turn.output_text.delta")
    assert text == "Emulated reply from gpt-5.4-mini. You said: Follow me"
    assert events[-1].type == "agent.session.idle"


def test_openai_events_of_an_unknown_session_are_a_404(server: ServerThread) -> None:
    with pytest.raises(openai.NotFoundError) as failed:
        list(oai(server).beta.agents.sessions.events.stream("sess_nope"))
    assert failed.value.body == {
        "message": "Session with id 'sess_nope' not found.",
        "type": "invalid_request_error",
        "param": None,
        "code": "not_found",
    }


def test_openai_session_dropped_fault(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"faults": {"drop_at_event": 3}}])
    stream = oai(server).beta.agents.sessions.create(
        environment={"type": "none"}, agent=AGENT, input="Hello agent", stream=True
    )
    seen: list[str] = []
    with pytest.raises((openai.APIConnectionError, httpx2.RemoteProtocolError)):
        for event in stream:
            seen.append(event.type)
    assert seen == [
        "agent.session.created",
        "agent.session.turn.created",
        "agent.session.turn.item.added",
    ]
