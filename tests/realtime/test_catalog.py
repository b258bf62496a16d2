"""Every message name the event catalog lists for the two OpenAI socket families maps
to a typed unified event (or, from the client, is a command's message); none falls
through as an unknown pass-through or an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.dialects._realtime_api import wire as realtime_wire
from polystream.dialects._realtime_api.finish_reason import FINISH_REASONS
from polystream.dialects._responses_ws import wire as responses_wire
from polystream.dialects.openai_realtime.binding import Session as RealtimeSessionOpenAI
from polystream.dialects.openai_responses_ws.binding import Session as ResponsesSession
from polystream.events import ErrorEvent, StreamWarning, Unknown

from .helpers import FIXTURES

COPY = FIXTURES / "openai_realtime" / "catalog_surfaces.json"
SHARED = Path("/work/shared/reference/event-catalog.json")
SURFACES: dict[str, list[str]] = json.loads(COPY.read_text())["surfaces"]


def names(*surfaces: str) -> list[str]:
    return sorted({name for surface in surfaces for name in SURFACES[surface]})


def test_the_copy_is_the_catalog_s() -> None:
    if not SHARED.exists():
        pytest.skip("the shared reference catalog is not beside this checkout")
    catalog = json.loads(SHARED.read_text())
    for surface, listed in SURFACES.items():
        assert sorted(e["name"] for e in catalog["events"] if e["surface"] == surface) == listed


def typed(out: list[Routed]) -> bool:
    """The message gave events, none an unknown pass-through, a warning or a protocol
    error."""
    return bool(out) and not any(
        isinstance(r.event, Unknown | StreamWarning)
        or (isinstance(r.event, ErrorEvent) and r.event.error.kind == "protocol")
        for r in out
    )


# -- Responses WebSocket ---------------------------------------------------------------------

ITEM_FOR: list[tuple[str, dict[str, Any]]] = [
    ("reasoning_", {"type": "reasoning", "summary": []}),
    ("function_call_arguments", {"type": "function_call", "name": "f", "call_id": "c"}),
    ("custom_tool_call_input", {"type": "custom_tool_call", "name": "f", "call_id": "c"}),
    ("mcp_call", {"type": "mcp_call", "name": "f"}),
    ("mcp_list_tools", {"type": "mcp_list_tools"}),
    ("web_search_call", {"type": "web_search_call"}),
    ("file_search_call", {"type": "file_search_call"}),
    ("code_interpreter_call", {"type": "code_interpreter_call"}),
    ("image_generation_call", {"type": "image_generation_call"}),
    ("shell_call", {"type": "shell_call"}),
    ("apply_patch", {"type": "apply_patch_call"}),
]
RESPONSE = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}


def responses_message(name: str, seq: int) -> dict[str, Any]:
    return {
        "type": name,
        "sequence_number": seq,
        "item_id": "it",
        "output_index": 0,
        "content_index": 0,
        "summary_index": 0,
        "delta": "x",
        "part": {"type": "output_text", "text": ""},
        "item": {"id": "it", "type": "message", "status": "completed", "content": []},
        "annotation": {"type": "url_citation", "url": "https://example.com"},
        "partial_image_b64": "AA==",
        "partial_image_index": 0,
        "response": RESPONSE,
        "error": {"type": "invalid_request_error", "code": "x", "message": "m"},
        "steer": {"id": "s", "previous_response_id": "resp_1", "input": "hi"},
        "input": [],
        "required_input": [],
        "reason": "waiting_for_required_input",
        "response_id": "resp_1",
    }


def feed(session: RealtimeSession, *messages: dict[str, Any]) -> list[Routed]:
    out: list[Routed] = []
    for message in messages:
        out = session.feed(json.dumps(message))
    return out


@pytest.mark.parametrize(
    "name", names("openai.responses.ws.server", "openai.responses.beta.ws.server")
)
def test_every_responses_ws_server_message_is_typed(name: str) -> None:
    assert name in responses_wire.REPLY_EVENTS or name in responses_wire.STEERING or name == "error"
    session = ResponsesSession()
    session.create_response(input="hi")
    if name in responses_wire.STEERING or name in ("error", "response.created"):
        out = feed(session, responses_message(name, 0))
    else:
        item: dict[str, Any] = {
            "id": "it",
            "type": "message",
            "status": "in_progress",
            "content": [],
        }
        for marker, kind in ITEM_FOR:
            if marker in name:
                item = {"id": "it", "status": "in_progress", **kind}
        prepare = [
            {"type": "response.created", "sequence_number": 0, "response": RESPONSE},
            {
                "type": "response.output_item.added",
                "sequence_number": 1,
                "output_index": 0,
                "item": item,
            },
        ]
        if item["type"] == "message" and name != "response.content_part.added":
            prepare.append(responses_message("response.content_part.added", 2))
        if name == "response.output_item.added":
            prepare = prepare[:1]
        message = responses_message(name, len(prepare))
        if name == "response.output_item.added":
            message["item"] = item
        out = feed(session, *prepare, message)
    assert typed(out), [r.event for r in out]


@pytest.mark.parametrize(
    "name", names("openai.responses.ws.client", "openai.responses.beta.ws.client")
)
def test_every_responses_ws_client_message_is_a_command(name: str) -> None:
    session = ResponsesSession()
    made = [
        *session.create_response(input="hi"),
        *session.steer("hi", previous_response_id="resp_1"),
        *session.inject([], response_id="resp_1"),
    ]
    assert name in {json.loads(m)["type"] for m in made}
    assert name in responses_wire.CLIENT_MESSAGES


# -- Realtime ---------------------------------------------------------------------------------


def realtime_message(name: str) -> dict[str, Any]:
    return {
        "type": name,
        "event_id": "ev",
        "response_id": "r",
        "item_id": "it",
        "output_index": 0,
        "content_index": 0,
        "delta": "AAAA",
        "part": {"type": "audio", "transcript": ""},
        "item": {"id": "it", "type": "message", "status": "completed", "content": []},
        "response": {"id": "r", "status": "completed", "output": []},
        "session": {"type": "realtime", "id": "sess"},
        "conversation": {"id": "conv", "object": "realtime.conversation"},
        "rate_limits": [{"name": "requests", "limit": 1, "remaining": 1, "reset_seconds": 1.0}],
        "error": {"type": "invalid_request_error", "code": "x", "message": "m"},
        "audio_start_ms": 0,
        "audio_end_ms": 10,
        "transcript": "t",
        "text": "t",
        "arguments": "{}",
        "event": "5",
        "received_at": 1,
        "usage": {"type": "duration", "seconds": 1.0},
        "id": "seg",
        "speaker": "A",
        "start": 0.0,
        "end": 1.0,
    }


def realtime_prepare(name: str) -> list[dict[str, Any]]:
    """What must come before ``name`` for it to make sense: a running response, and an
    item (and content part) of the kind it refers to."""
    ga = realtime_wire.BETA_SERVER.get(name, name)
    if not (ga.startswith(("response.", "output_audio_buffer.", "mcp_list_tools."))):
        return []
    created = {"type": "response.created", "event_id": "e0", "response": {"id": "r"}}
    if ga in ("response.created", "response.done") or ga.startswith("output_audio_buffer."):
        return [] if ga == "response.created" else [created]
    kind = "message"
    if "function_call" in ga:
        kind = "function_call"
    elif "mcp_call" in ga:
        kind = "mcp_call"
    elif ga.startswith("mcp_list_tools."):
        kind = "mcp_list_tools"
    item = {"id": "it", "type": kind, "status": "in_progress", "name": "f", "call_id": "c"}
    added = {
        "type": "response.output_item.added",
        "event_id": "e1",
        "response_id": "r",
        "output_index": 0,
        "item": item,
    }
    if ga == "response.output_item.added":
        return [created]
    part = {"type": "text" if "text" in ga else "audio", "transcript": "", "text": ""}
    steps = [created, added]
    if kind == "message" and ga != "response.content_part.added":
        steps.append({**realtime_message("response.content_part.added"), "part": part})
    return steps


@pytest.mark.parametrize(
    "name", names("openai.realtime.server", "openai.realtime_beta_legacy.server")
)
def test_every_realtime_server_message_is_typed(name: str) -> None:
    ga = realtime_wire.BETA_SERVER.get(name, name)
    assert ga in realtime_wire.SERVER_MESSAGES
    session = RealtimeSessionOpenAI()
    message = realtime_message(name)
    if name == "response.output_item.added":
        message["item"] = {"id": "it", "type": "message", "status": "in_progress", "content": []}
    if "text" in ga and "part" in message and ga.startswith("response.content_part"):
        message["part"] = {"type": "text", "text": ""}
    out = feed(session, *realtime_prepare(name), message)
    assert typed(out), [r.event for r in out]
    if name in realtime_wire.BETA_SERVER:
        carriers = [r.event for r in out if r.event.extra and "retired_beta" in r.event.extra]
        assert len(carriers) == 1 and carriers[0].extra["retired_beta"] == ga  # type: ignore[index]


@pytest.mark.parametrize(
    "name", names("openai.realtime.client", "openai.realtime_beta_legacy.client")
)
def test_every_realtime_client_message_is_a_command(name: str) -> None:
    s = RealtimeSessionOpenAI()
    made = [
        *s.configure(),
        *s.send_text("hi"),
        *s.send_audio(b"\x00\x00"),
        *s.commit_audio(),
        *s.clear_audio(),
        *s.retrieve_item("i"),
        *s.delete_item("i"),
        *s.truncate("i", 0),
        *s.cancel(),
        *s.clear_output_audio(),
    ]
    ga = realtime_wire.BETA_CLIENT.get(name, name)
    assert ga in realtime_wire.CLIENT_MESSAGES
    assert ga in {json.loads(m)["type"] for m in made}


def test_every_response_status_and_reason_is_in_the_finish_table() -> None:
    for value in names("openai.realtime.response_status", "openai.realtime.status_reason"):
        assert value in FINISH_REASONS
