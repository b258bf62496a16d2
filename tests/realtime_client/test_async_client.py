"""The async socket client against a scripted loopback server: exactly what it sends
(handshake and messages), what it gives, when it reconnects and what it replays."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from polystream.errors import APIStatusError, IdleTimeout, SocketClosed
from polystream.events import (
    ErrorEvent,
    Finish,
    RetryAdvice,
    StreamStart,
    StreamWarning,
    TextDelta,
)
from polystream.realtime import Routed, connect, text_turn
from polystream.retry import RetryPolicy
from tests.realtime_client.loopback import Loopback, Peer, Refuse
from tests.realtime_client.scripts import (
    reply_start,
    responses_error,
    responses_reply,
    text_delta,
    text_reply,
    user_item,
)

FAST = RetryPolicy(max_retries=2, initial_delay=0.01, jitter=0.0)
KEY = "sk-test"

UPDATE = (
    '{"type":"session.update","session":{"type":"realtime",'
    '"instructions":"Be brief.","output_modalities":["text"]}}'
)
CREATE = '{"type":"response.create"}'


def user_create(text: str, item_id: str | None = None) -> str:
    item: dict[str, Any] = {} if item_id is None else {"id": item_id}
    item.update(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    )
    return json.dumps({"type": "conversation.item.create", "item": item}, separators=(",", ":"))


def assistant_create(text: str, item_id: str) -> str:
    item = {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    return json.dumps({"type": "conversation.item.create", "item": item}, separators=(",", ":"))


def summary(seen: list[Routed]) -> list[tuple[Any, ...]]:
    """What matters of each event: its stream and what it says."""
    out: list[tuple[Any, ...]] = []
    for routed in seen:
        event = routed.event
        if type(event) is StreamStart:
            out.append((routed.stream, "start", event.id))
        elif type(event) is TextDelta:
            out.append((routed.stream, "text", event.delta))
        elif type(event) is Finish:
            message = event.error.message if event.error is not None else None
            out.append((routed.stream, "finish", event.status, message))
        elif type(event) is StreamWarning:
            out.append((routed.stream, "warning", event.code, event.message))
        elif type(event) is RetryAdvice:
            out.append((routed.stream, "advice", event.code, event.safe))
        elif type(event) is ErrorEvent:
            out.append((routed.stream, "error", event.error.kind, event.error.code))
    return out


def test_realtime_reconnects_after_1011_replays_the_conversation_then_flushes_the_queue() -> None:
    async def first(peer: Peer) -> None:
        await peer.expect(3)
        await peer.send(
            *user_item("item_u1", "Hello", None), *text_reply("resp_1", "item_a1", "Hi!", "item_u1")
        )
        await peer.expect(2)
        await peer.send(
            *user_item("item_u2", "Again", "item_a1"),
            *reply_start("resp_2", "item_a2", "item_u2"),
            text_delta("resp_2", "item_a2", "Par"),
        )
        await peer.close(1011, "internal error")

    async def second(peer: Peer) -> None:
        await peer.expect(6)
        await peer.send(
            *user_item("item_u3", "Queued", "item_u2"),
            *text_reply("resp_3", "item_a3", "Done.", "item_u3"),
        )
        await peer.close(1000)

    async def main(server: Loopback) -> list[Routed]:
        seen: list[Routed] = []
        async with connect(
            "openai_realtime",
            model="gpt-realtime",
            api_key=KEY,
            base_url=server.base_url,
            reconnect=FAST,
        ) as conn:
            await conn.configure(instructions="Be brief.", output_modalities=["text"])
            await conn.send_text("Hello")
            async for routed in conn:
                seen.append(routed)
                event = routed.event
                if type(event) is Finish and routed.stream == 1:
                    await conn.send_text("Again")
                if type(event) is StreamWarning:
                    assert conn.link.state == "reconnecting"
                    await conn.send_text("Queued")
                    assert conn.link.queued == [user_create("Queued"), CREATE]
            assert conn.link.state == "closed"
            assert conn.link.connections == 2
        return seen

    with Loopback(first, second) as server:
        seen = asyncio.run(main(server))
    assert server.attempts == ["/v1/realtime?model=gpt-realtime"] * 2
    assert [peer.headers["authorization"] for peer in server.peers] == [f"Bearer {KEY}"] * 2
    assert server.peers[0].received == [
        UPDATE,
        user_create("Hello"),
        CREATE,
        user_create("Again"),
        CREATE,
    ]
    # The new socket: the session update and the conversation as the server reported it
    # (the reply cut short had no text yet: not replayed), then the queue.
    assert server.peers[1].received == [
        UPDATE,
        user_create("Hello", "item_u1"),
        assistant_create("Hi!", "item_a1"),
        user_create("Again", "item_u2"),
        user_create("Queued"),
        CREATE,
    ]
    assert summary(seen) == [
        (1, "start", "resp_1"),
        (1, "text", "Hi!"),
        (1, "finish", "completed", None),
        (2, "start", "resp_2"),
        (2, "text", "Par"),
        (2, "finish", "truncated", "the connection closed before response resp_2 was done"),
        (
            0,
            "warning",
            "reconnect",
            "the connection closed (1011 internal error); reconnecting in 0.01 s (attempt 1 of 2)",
        ),
        (3, "start", "resp_3"),
        (3, "text", "Done."),
        (3, "finish", "completed", None),
    ]


def test_no_reconnect_after_a_close_code_that_does_not_allow_it() -> None:
    async def only(peer: Peer) -> None:
        await peer.expect(2)
        await peer.send(
            *reply_start("resp_1", "item_a1", None), text_delta("resp_1", "item_a1", "P")
        )
        await peer.close(1008, "policy violation")

    async def main(server: Loopback) -> tuple[list[Routed], SocketClosed]:
        seen: list[Routed] = []
        async with connect(
            "openai_realtime", api_key=KEY, base_url=server.base_url, reconnect=FAST
        ) as conn:
            await conn.send_text("Hi")
            with pytest.raises(SocketClosed) as caught:
                async for routed in conn:
                    seen.append(routed)
        return seen, caught.value

    with Loopback(only) as server:
        seen, error = asyncio.run(main(server))
    assert server.attempts == ["/v1/realtime"]
    assert (error.code, error.reason, error.unsent) == (1008, "policy violation", [])
    assert str(error) == "the connection closed (close 1008 policy violation)"
    assert summary(seen)[-1] == (
        1,
        "finish",
        "truncated",
        "the connection closed before response resp_1 was done",
    )


def test_handshake_401_is_a_typed_authentication_error_and_is_not_retried() -> None:
    body = {
        "error": {
            "message": "Incorrect API key provided: sk-bad.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }

    async def main(server: Loopback) -> None:
        async with connect(
            "openai_realtime",
            model="gpt-realtime",
            api_key="sk-bad",
            base_url=server.base_url,
            reconnect=FAST,
        ):
            pass

    with (
        Loopback(Refuse(401, body, {"x-request-id": "req_123"})) as server,
        pytest.raises(APIStatusError) as caught,
    ):
        asyncio.run(main(server))
    error = caught.value
    assert (error.status_code, error.kind, error.body, error.request_id) == (
        401,
        "authentication",
        body,
        "req_123",
    )
    assert str(error) == "HTTP 401 authentication: Incorrect API key provided: sk-bad."
    assert server.attempts == ["/v1/realtime?model=gpt-realtime"]


def test_a_handshake_refused_with_a_retryable_status_is_tried_again() -> None:
    async def ok(peer: Peer) -> None:
        await peer.expect(2)
        await peer.send(*text_reply("resp_1", "item_a1", "Hi!", None))
        await peer.close(1000)

    async def main(server: Loopback) -> list[Routed]:
        async with connect(
            "openai_realtime", api_key=KEY, base_url=server.base_url, reconnect=FAST
        ) as conn:
            await conn.send_text("Hi")
            return [routed async for routed in conn]

    with Loopback(Refuse(503, {"error": {"message": "busy"}}), ok) as server:
        seen = asyncio.run(main(server))
    assert server.attempts == ["/v1/realtime"] * 2
    assert server.peers[0].received == [user_create("Hi"), CREATE]
    assert summary(seen)[-1] == (1, "finish", "completed", None)


def test_reconnection_attempts_used_up_raise_socket_closed_with_the_unsent_messages() -> None:
    async def first(peer: Peer) -> None:
        await peer.close(1012, "service restart")

    async def main(server: Loopback) -> SocketClosed:
        async with connect(
            "openai_realtime", api_key=KEY, base_url=server.base_url, reconnect=FAST
        ) as conn:
            with pytest.raises(SocketClosed) as caught:
                async for routed in conn:
                    assert type(routed.event) is StreamWarning
                    await conn.send_text("Lost")
        return caught.value

    refused = Refuse(503, {"error": {"message": "restarting"}})
    with Loopback(first, refused, refused) as server:
        error = asyncio.run(main(server))
    assert server.attempts == ["/v1/realtime"] * 3
    assert (error.code, error.reason) == (1012, "service restart")
    assert error.unsent == [user_create("Lost"), CREATE]
    assert isinstance(error.__cause__, APIStatusError)
    assert (error.__cause__.status_code, error.__cause__.kind) == (503, "overloaded")


def test_idle_timeout_ends_the_connection_with_a_typed_error() -> None:
    async def silent(peer: Peer) -> None:
        await peer.expect(2)
        await peer.send(*reply_start("resp_1", "item_a1", None))
        await peer.drain()

    async def main(server: Loopback) -> tuple[list[Routed], IdleTimeout]:
        seen: list[Routed] = []
        async with connect(
            "openai_realtime", api_key=KEY, base_url=server.base_url, idle_timeout=0.2
        ) as conn:
            await conn.send_text("Hi")
            with pytest.raises(IdleTimeout) as caught:
                async for routed in conn:
                    seen.append(routed)
        return seen, caught.value

    with Loopback(silent) as server:
        seen, error = asyncio.run(main(server))
    assert (str(error), error.seconds) == ("no message for 0.2 s", 0.2)
    assert summary(seen) == [
        (1, "start", "resp_1"),
        (1, "finish", "truncated", "the connection closed before response resp_1 was done"),
    ]
    assert server.peers[0].closed_by_client == 1000


def test_keepalive_pings_detect_a_peer_that_stopped_answering_and_reconnect() -> None:
    reconnected = threading.Event()

    async def deaf(peer: Peer) -> None:
        peer.ws.transport.pause_reading()  # no pong will be sent
        # The client gives up on this socket by itself (its pings go unanswered).
        assert await asyncio.to_thread(reconnected.wait, 5.0)
        peer.ws.transport.abort()

    async def second(peer: Peer) -> None:
        reconnected.set()
        await peer.send(*text_reply("resp_1", "item_a1", "Back.", None))
        await peer.close(1000)

    async def main(server: Loopback) -> list[Routed]:
        async with connect(
            "openai_realtime",
            api_key=KEY,
            base_url=server.base_url,
            reconnect=FAST,
            ping_interval=0.05,
            ping_timeout=0.05,
            close_timeout=0.05,
        ) as conn:
            return [routed async for routed in conn]

    with Loopback(deaf, second) as server:
        seen = asyncio.run(main(server))
    assert summary(seen) == [
        (
            0,
            "warning",
            "reconnect",
            "the connection closed (1006); reconnecting in 0.01 s (attempt 1 of 2)",
        ),
        (1, "start", "resp_1"),
        (1, "text", "Back."),
        (1, "finish", "completed", None),
    ]
    assert server.peers[1].received == []  # nothing was sent, nothing to replay


# -- the Responses WebSocket ------------------------------------------------------------

MODEL = "gpt-5.4-mini"


def create(**fields: Any) -> str:
    return json.dumps({"type": "response.create", **fields}, separators=(",", ":"))


def test_responses_full_history_retry_on_a_new_connection_when_opted_in() -> None:
    first_output = responses_reply("resp_1", "First")[-1]["response"]["output"]

    async def first(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(*responses_reply("resp_1", "First"))
        await peer.expect(1)
        await peer.send(
            responses_error(
                "previous_response_not_found", "Previous response with id 'resp_1' not found."
            )
        )
        await peer.drain()

    async def second(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(*responses_reply("resp_2", "Second"))
        await peer.close(1000)

    async def main(server: Loopback) -> list[Routed]:
        seen: list[Routed] = []
        async with connect(
            "openai_responses_ws",
            model=MODEL,
            api_key=KEY,
            base_url=server.base_url,
            reconnect=FAST,
            full_history_retry=True,
        ) as conn:
            await conn.send_text("One")
            async for routed in conn:
                seen.append(routed)
                if type(routed.event) is Finish and routed.stream == 1:
                    await conn.send_text("Two")
            assert conn.session.last_response_id() == "resp_2"
        return seen

    with Loopback(first, second) as server:
        seen = asyncio.run(main(server))
    assert server.attempts == ["/v1/responses"] * 2
    assert server.peers[0].received == [
        create(model=MODEL, input="One"),
        create(model=MODEL, input="Two", previous_response_id="resp_1"),
    ]
    assert server.peers[0].closed_by_client == 1000
    assert server.peers[1].received == [
        create(
            model=MODEL,
            input=[
                {"role": "user", "content": "One"},
                *first_output,
                {"role": "user", "content": "Two"},
            ],
        )
    ]
    assert summary(seen) == [
        (1, "start", "resp_1"),
        (1, "text", "First"),
        (1, "finish", "completed", None),
        (2, "error", "not_found", "previous_response_not_found"),
        (2, "advice", "previous_response_not_found", True),
        (
            2,
            "warning",
            "retry",
            "previous_response_not_found: the request is sent again with its full history"
            " on a new connection",
        ),
        (2, "finish", "failed", "Previous response with id 'resp_1' not found."),
        (0, "warning", "reconnect", "renewing the connection; reconnecting in 0.00 s"),
        (3, "start", "resp_2"),
        (3, "text", "Second"),
        (3, "finish", "completed", None),
    ]


def test_responses_retry_advice_is_only_delivered_without_the_opt_in() -> None:
    async def only(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(
            responses_error(
                "websocket_connection_limit_reached",
                "Responses websocket connection limit reached (60 minutes).",
            )
        )
        await peer.close(1000)

    async def main(server: Loopback) -> list[Routed]:
        async with connect(
            "openai_responses_ws", model=MODEL, api_key=KEY, base_url=server.base_url
        ) as conn:
            await conn.send_text("One")
            return [routed async for routed in conn]

    with Loopback(only) as server:
        seen = asyncio.run(main(server))
    assert server.attempts == ["/v1/responses"]
    assert [(r.stream, type(r.event).__name__) for r in seen] == [
        (0, "Lifetime"),
        (1, "ErrorEvent"),
        (1, "RetryAdvice"),
        (1, "Finish"),
    ]


def test_responses_reconnect_replays_nothing_and_the_chain_goes_on() -> None:
    async def first(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(*responses_reply("resp_1", "First"))
        await peer.close(1001, "going away")

    async def second(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(*responses_reply("resp_2", "Second", previous="resp_1"))
        await peer.close(1000)

    async def main(server: Loopback) -> list[Routed]:
        seen: list[Routed] = []
        async with connect(
            "openai_responses_ws",
            model=MODEL,
            api_key=KEY,
            base_url=server.base_url,
            reconnect=FAST,
        ) as conn:
            await conn.send_text("One")
            async for routed in conn:
                seen.append(routed)
                if type(routed.event) is StreamWarning:
                    await conn.send_text("Two")
        return seen

    with Loopback(first, second) as server:
        seen = asyncio.run(main(server))
    assert server.peers[1].received == [
        create(model=MODEL, input="Two", previous_response_id="resp_1")
    ]
    assert [s for s in summary(seen) if s[1] in ("finish", "warning")] == [
        (1, "finish", "completed", None),
        (
            0,
            "warning",
            "reconnect",
            "the connection closed (1001 going away); reconnecting in 0.01 s (attempt 1 of 2)",
        ),
        (2, "finish", "completed", None),
    ]


# -- one text turn ----------------------------------------------------------------------


def test_text_turn_configures_text_replies_and_returns_the_reply() -> None:
    async def only(peer: Peer) -> None:
        await peer.expect(3)
        await peer.send(
            *user_item("item_u1", "Hello", None), *text_reply("resp_1", "item_a1", "Hi!", "item_u1")
        )
        await peer.drain()

    with Loopback(only) as server:
        seen: list[Routed] = []
        result = asyncio.run(
            text_turn(
                "openai_realtime",
                "Hello",
                instructions="Be brief.",
                model="gpt-realtime",
                api_key=KEY,
                base_url=server.base_url,
                on_event=seen.append,
            )
        )
    assert server.peers[0].received == [
        '{"type":"session.update","session":{"type":"realtime",'
        '"output_modalities":["text"],"instructions":"Be brief."}}',
        user_create("Hello"),
        CREATE,
    ]
    assert (result.text, result.status, result.id) == ("Hi!", "completed", "resp_1")
    assert summary(seen) == [
        (1, "start", "resp_1"),
        (1, "text", "Hi!"),
        (1, "finish", "completed", None),
    ]
    assert server.peers[0].closed_by_client == 1000


def test_text_turn_follows_a_full_history_retry() -> None:
    async def first(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(
            responses_error(
                "websocket_connection_limit_reached",
                "Responses websocket connection limit reached (60 minutes).",
            )
        )
        await peer.drain()

    async def second(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(*responses_reply("resp_1", "Hi"))
        await peer.drain()

    with Loopback(first, second) as server:
        result = asyncio.run(
            text_turn(
                "openai_responses_ws",
                "One",
                model=MODEL,
                api_key=KEY,
                base_url=server.base_url,
                reconnect=FAST,
                full_history_retry=True,
            )
        )
    assert [peer.received for peer in server.peers] == [
        [create(model=MODEL, input="One")],
        [create(model=MODEL, input=[{"role": "user", "content": "One"}])],
    ]
    assert (result.text, result.status, result.id) == ("Hi", "completed", "resp_1")
