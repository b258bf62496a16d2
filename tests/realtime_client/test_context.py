"""The records that carry a connection's context to a new one (sans-I/O): exactly what
the Realtime conversation replays, and the Responses full-history retry."""

from __future__ import annotations

import json
from typing import Any

from polystream.dialects._realtime.context import (
    ConversationContext,
    ResponsesContext,
    creatable,
)
from polystream.realtime import open_session
from tests.realtime.helpers import messages, payloads
from tests.realtime_client.scripts import responses_error, responses_reply, user_item


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def item_create(item: dict[str, Any]) -> str:
    return dumps({"type": "conversation.item.create", "item": item})


def test_voice_turn_replays_the_transcripts_as_text() -> None:
    context = ConversationContext()
    for payload in payloads(messages("openai_realtime", "voice_turn")):
        context.received(payload)
    assert context.replay() == [
        item_create(
            {
                "id": "item_C9GkAuser",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hi there"}],
            }
        ),
        item_create(
            {
                "id": "item_C9GkBasst",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello there!"}],
            }
        ),
    ]


def test_truncated_audio_and_deleted_items_are_not_replayed() -> None:
    context = ConversationContext()
    for payload in payloads(messages("openai_realtime", "voice_turn")):
        context.received(payload)
    context.received(
        {
            "type": "conversation.item.truncated",
            "item_id": "item_C9GkBasst",
            "content_index": 0,
            "audio_end_ms": 40,
        }
    )
    assert [json.loads(m)["item"]["id"] for m in context.replay()] == ["item_C9GkAuser"]
    context.received({"type": "conversation.item.deleted", "item_id": "item_C9GkAuser"})
    assert context.replay() == []


def test_session_updates_as_sent_and_items_in_conversation_order() -> None:
    session = open_session("openai_realtime")
    context = ConversationContext()
    sent = [
        *session.configure(instructions="One."),
        *session.send_audio(b"\x00\x01" * 10),
        *session.configure(output_modalities=["text"]),
        *session.send_text("first"),
        *session.send_text("second"),
    ]
    for message in sent:
        context.sent(message)
    # Not reported yet: replayed as sent, after the updates.
    assert context.replay() == [
        sent[0],
        sent[2],
        item_create(_user("first")),
        item_create(_user("second")),
    ]
    for payload in user_item("item_1", "first", None):
        context.received(payload)
    # "late" is put before "item_1" by the server (previous_item_id null: the first).
    for payload in user_item("item_0", "late", None):
        context.received(payload)
    # "middle" after item_0: between the two.
    for payload in user_item("item_m", "middle", "item_0"):
        context.received(payload)
    assert [json.loads(m)["item"].get("id") for m in context.replay()[2:]] == [
        "item_0",
        "item_m",
        "item_1",
        None,  # "second", still not reported
    ]
    for payload in user_item("item_2", "second", "item_1"):
        context.received(payload)
    assert context.items == [
        user_item(key, text, None)[1]["item"]
        for key, text in (
            ("item_0", "late"),
            ("item_m", "middle"),
            ("item_1", "first"),
            ("item_2", "second"),
        )
    ]


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_a_bounded_record_forgets_the_oldest_items() -> None:
    context = ConversationContext(max_items=2, max_updates=1)
    for number in range(3):
        context.sent(dumps({"type": "session.update", "session": {"n": number}}))
    previous = None
    for number in range(3):
        for payload in user_item(f"item_{number}", str(number), previous):
            context.received(payload)
        previous = f"item_{number}"
    assert context.replay() == [
        dumps({"type": "session.update", "session": {"n": 2}}),
        item_create({"id": "item_1", **_user("1")}),
        item_create({"id": "item_2", **_user("2")}),
    ]


def test_creatable_items() -> None:
    assert creatable(
        {
            "id": "fc",
            "type": "function_call",
            "status": "completed",
            "call_id": "c1",
            "name": "f",
            "arguments": "{}",
        }
    ) == {"id": "fc", "type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    assert creatable(
        {"id": "fo", "type": "function_call_output", "call_id": "c1", "output": "42"}
    ) == {"id": "fo", "type": "function_call_output", "call_id": "c1", "output": "42"}
    assert creatable({"id": "m", "type": "mcp_call", "name": "x"}) is None
    image = {"type": "input_image", "image_url": "data:image/png;base64,AA=="}
    assert creatable(
        {
            "id": "u",
            "type": "message",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}, image],
        }
    ) == {"id": "u", "type": "message", "role": "user", "content": [image]}
    # The retired beta part names.
    assert creatable(
        {
            "id": "a",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "audio", "transcript": "Yes."}, {"type": "text", "text": "!"}],
        }
    ) == {
        "id": "a",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Yes."}, {"type": "output_text", "text": "!"}],
    }
    assert creatable({"id": "s", "type": "message", "role": "system", "content": []}) is None


# -- the Responses WebSocket ------------------------------------------------------------


def test_responses_chains_across_lanes() -> None:
    session = open_session("openai_responses_ws")
    context = ResponsesContext()
    for message in [
        *session.create_response(input="hi", lane="a"),
        *session.create_response(input=[{"role": "user", "content": "x"}], lane="b"),
        *session.create_response(input="more", lane="a", previous_response_id="resp_a1"),
    ]:
        context.sent(message)
    lines = messages("openai_responses_ws", "lanes")
    for payload in payloads(lines):
        context.received(payload)
    final = {
        p["response"]["id"]: p["response"]["output"]
        for p in payloads(lines)
        if p["type"] in ("response.completed", "response.incomplete")
    }
    assert context.history("resp_a1") == [{"role": "user", "content": "hi"}, *final["resp_a1"]]
    assert context.history("resp_b1") == [{"role": "user", "content": "x"}, *final["resp_b1"]]
    assert context.history("resp_a2") == [
        {"role": "user", "content": "hi"},
        *final["resp_a1"],
        {"role": "user", "content": "more"},
        *final["resp_a2"],
    ]
    assert context.history("resp_unknown") is None


def test_responses_retry_sends_the_failed_request_with_its_full_history() -> None:
    session = open_session("openai_responses_ws")
    session.configure(model="m", store=False)
    context = ResponsesContext()

    def run(sent: list[str], received: list[dict[str, Any]]) -> None:
        for message in sent:
            context.sent(message)
        for payload in received:
            context.received(payload)
            session.feed(dumps(payload))

    run(session.send_text("One", lane="x"), responses_reply("resp_1", "First", lane="x"))
    first = responses_reply("resp_1", "First")[-1]["response"]["output"]
    failed = {**responses_error("previous_response_not_found", "gone"), "stream_id": "x"}
    run(session.send_text("Two", lane="x", temperature=0.5), [failed])
    assert session.pending("x") == 0
    retried = context.retry(session, "x")
    assert retried == [
        dumps(
            {
                "type": "response.create",
                "model": "m",
                "store": False,
                "input": [
                    {"role": "user", "content": "One"},
                    *first,
                    {"role": "user", "content": "Two"},
                ],
                "temperature": 0.5,
                "stream_id": "x",
            }
        )
    ]
    assert session.pending("x") == 1  # the session waits on the retry
    assert context.retry(session, "x") == []  # once


def test_responses_retry_without_the_whole_chain_is_not_made() -> None:
    session = open_session("openai_responses_ws")
    context = ResponsesContext()
    for message in session.send_text("Two", previous_response_id="resp_forgotten"):
        context.sent(message)
    context.received(responses_error("previous_response_not_found", "gone"))
    assert context.retry(session, None) == []


def test_an_item_reported_out_of_order_is_matched_past_one_never_reported() -> None:
    session = open_session("openai_realtime")
    context = ConversationContext()
    for message in [*session.send_text("rejected"), *session.send_text("kept")]:
        context.sent(message)
    for payload in user_item("item_k", "kept", None):
        context.received(payload)
    # "kept" is replayed once (as reported); "rejected" waits, as sent.
    assert context.replay() == [
        item_create({"id": "item_k", **_user("kept")}),
        item_create(_user("rejected")),
    ]
