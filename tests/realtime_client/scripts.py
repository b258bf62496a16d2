"""Server messages for the scripted servers, hand-written in the shapes of the fixtures
under ``tests/fixtures/openai_realtime/`` and ``tests/fixtures/openai_responses_ws/``
(the GA Realtime messages of a text reply; the Responses stream events of a text reply
with the socket's ``stream_id`` echo)."""

from __future__ import annotations

from typing import Any

MESSAGE = dict[str, Any]


def user_item(item_id: str, text: str, previous: str | None) -> list[MESSAGE]:
    """The server's report of a user text item the client created."""
    item = {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    }
    return [
        {"type": "conversation.item.added", "previous_item_id": previous, "item": item},
        {"type": "conversation.item.done", "previous_item_id": previous, "item": item},
    ]


def _response(rid: str, status: str, output: list[Any]) -> MESSAGE:
    return {
        "object": "realtime.response",
        "id": rid,
        "status": status,
        "status_details": None,
        "output": output,
        "conversation_id": "conv_1",
        "output_modalities": ["text"],
        "usage": None,
    }


def reply_start(rid: str, item_id: str, previous: str | None) -> list[MESSAGE]:
    """A text reply's opening: the response, its item (in the conversation), its part."""
    added = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant"}
    return [
        {"type": "response.created", "response": _response(rid, "in_progress", [])},
        {
            "type": "response.output_item.added",
            "response_id": rid,
            "output_index": 0,
            "item": {**added, "content": []},
        },
        {
            "type": "conversation.item.added",
            "previous_item_id": previous,
            "item": {**added, "content": []},
        },
        {
            "type": "response.content_part.added",
            "response_id": rid,
            "item_id": item_id,
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "text", "text": ""},
        },
    ]


def text_delta(rid: str, item_id: str, delta: str) -> MESSAGE:
    return {
        "type": "response.output_text.delta",
        "response_id": rid,
        "item_id": item_id,
        "output_index": 0,
        "content_index": 0,
        "delta": delta,
    }


def reply_end(rid: str, item_id: str, text: str, previous: str | None) -> list[MESSAGE]:
    """A text reply's end."""
    part = {"type": "output_text", "text": text}
    item = {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }
    where = {"response_id": rid, "item_id": item_id, "output_index": 0, "content_index": 0}
    return [
        {"type": "response.output_text.done", **where, "text": text},
        {"type": "response.content_part.done", **where, "part": {"type": "text", "text": text}},
        {"type": "response.output_item.done", "response_id": rid, "output_index": 0, "item": item},
        {"type": "conversation.item.done", "previous_item_id": previous, "item": item},
        {"type": "response.done", "response": _response(rid, "completed", [item])},
    ]


def text_reply(rid: str, item_id: str, text: str, previous: str | None) -> list[MESSAGE]:
    """A whole text reply in the Realtime API."""
    return [
        *reply_start(rid, item_id, previous),
        text_delta(rid, item_id, text),
        *reply_end(rid, item_id, text, previous),
    ]


# -- the Responses WebSocket ------------------------------------------------------------


def _responses_object(rid: str, status: str, output: list[Any], previous: str | None) -> MESSAGE:
    return {
        "id": rid,
        "object": "response",
        "created_at": 1760000000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5.4-mini",
        "output": output,
        "previous_response_id": previous,
        "store": False,
        "usage": None,
    }


def responses_reply(
    rid: str, text: str, *, previous: str | None = None, lane: str | None = None
) -> list[MESSAGE]:
    """A whole text reply of the Responses WebSocket."""
    msg_id = "msg_" + rid.removeprefix("resp_")
    item = {
        "id": msg_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": text}],
    }
    opened = {**item, "status": "in_progress", "content": []}
    where = {"item_id": msg_id, "output_index": 0, "content_index": 0}
    events: list[MESSAGE] = [
        {
            "type": "response.created",
            "response": _responses_object(rid, "in_progress", [], previous),
        },
        {"type": "response.output_item.added", "output_index": 0, "item": opened},
        {
            "type": "response.content_part.added",
            **where,
            "part": {"type": "output_text", "annotations": [], "text": ""},
        },
        {"type": "response.output_text.delta", **where, "delta": text},
        {"type": "response.output_text.done", **where, "text": text},
        {
            "type": "response.content_part.done",
            **where,
            "part": {"type": "output_text", "annotations": [], "text": text},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {
            "type": "response.completed",
            "response": _responses_object(rid, "completed", [item], previous),
        },
    ]
    out = []
    for number, event in enumerate(events):
        event = {**event, "sequence_number": number}
        if lane is not None:
            event["stream_id"] = lane
        out.append(event)
    return out


def responses_error(code: str, message: str, *, status: int = 400) -> MESSAGE:
    """The socket's wrapped ``error``."""
    return {
        "type": "error",
        "status": status,
        "error": {"type": "invalid_request_error", "code": code, "message": message},
    }
