"""The sync socket client: the same decisions as the async one, over the threaded
``websockets`` client (read in one thread, sent on from another)."""

from __future__ import annotations

import threading

import pytest

from polystream.errors import APIStatusError, IdleTimeout, SocketClosed
from polystream.events import Finish, StreamWarning
from polystream.realtime import Routed, connect_sync, text_turn_sync
from tests.realtime_client.loopback import Loopback, Peer, Refuse
from tests.realtime_client.scripts import (
    reply_start,
    responses_reply,
    text_delta,
    text_reply,
    user_item,
)
from tests.realtime_client.test_async_client import (
    CREATE,
    FAST,
    KEY,
    MODEL,
    UPDATE,
    assistant_create,
    create,
    summary,
    user_create,
)


def test_sync_realtime_reconnects_replays_and_flushes_the_queue() -> None:
    async def first(peer: Peer) -> None:
        await peer.expect(3)
        await peer.send(
            *user_item("item_u1", "Hello", None), *text_reply("resp_1", "item_a1", "Hi!", "item_u1")
        )
        await peer.close(1013, "try again later")

    async def second(peer: Peer) -> None:
        await peer.expect(5)
        await peer.send(*text_reply("resp_2", "item_a2", "Again.", "item_u2"))
        await peer.close(1000)

    seen: list[Routed] = []
    with (
        Loopback(first, second) as server,
        connect_sync(
            "openai_realtime",
            model="gpt-realtime",
            api_key=KEY,
            base_url=server.base_url,
            reconnect=FAST,
        ) as conn,
    ):
        conn.configure(instructions="Be brief.", output_modalities=["text"])
        conn.send_text("Hello")
        for routed in conn:
            seen.append(routed)
            if type(routed.event) is StreamWarning:
                conn.send_text("Queued")
    assert server.peers[1].received == [
        UPDATE,
        user_create("Hello", "item_u1"),
        assistant_create("Hi!", "item_a1"),
        user_create("Queued"),
        CREATE,
    ]
    assert [s for s in summary(seen) if s[1] != "text"] == [
        (1, "start", "resp_1"),
        (1, "finish", "completed", None),
        (
            0,
            "warning",
            "reconnect",
            "the connection closed (1013 try again later); reconnecting in 0.01 s (attempt 1 of 2)",
        ),
        (2, "start", "resp_2"),
        (2, "finish", "completed", None),
    ]


def test_sync_connection_is_sent_on_from_another_thread_while_it_is_read() -> None:
    async def only(peer: Peer) -> None:
        await peer.send(*user_item("item_u0", "ready", None))
        await peer.expect(2)
        await peer.send(*text_reply("resp_1", "item_a1", "Hi!", "item_u0"))
        await peer.close(1000)

    seen: list[Routed] = []
    with (
        Loopback(only) as server,
        connect_sync("openai_realtime", api_key=KEY, base_url=server.base_url) as conn,
    ):
        reader = threading.Thread(target=lambda: seen.extend(conn))
        reader.start()
        conn.send_text("Hi")
        reader.join(5)
    assert server.peers[0].received == [user_create("Hi"), CREATE]
    assert summary(seen) == [
        (1, "start", "resp_1"),
        (1, "text", "Hi!"),
        (1, "finish", "completed", None),
    ]


def test_sync_text_turn_on_the_responses_socket() -> None:
    async def only(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(*responses_reply("resp_1", "Paris."))
        await peer.drain()

    with Loopback(only) as server:
        result = text_turn_sync(
            "openai_responses_ws",
            "Capital of France?",
            instructions="Be brief.",
            model=MODEL,
            api_key=KEY,
            base_url=server.base_url,
        )
    assert server.attempts == ["/v1/responses"]
    assert server.peers[0].received == [
        create(model=MODEL, instructions="Be brief.", input="Capital of France?")
    ]
    assert (result.text, result.status, result.id) == ("Paris.", "completed", "resp_1")


def test_sync_handshake_401_and_disallowed_close_and_idle_timeout() -> None:
    async def closes(peer: Peer) -> None:
        await peer.expect(2)
        await peer.close(4000, "custom")

    async def silent(peer: Peer) -> None:
        await peer.expect(2)
        await peer.send(
            *reply_start("resp_1", "item_a1", None), text_delta("resp_1", "item_a1", "P")
        )
        await peer.drain()

    body = {"error": {"message": "Incorrect API key provided."}}
    with Loopback(Refuse(401, body), closes, silent) as server:
        with pytest.raises(APIStatusError) as refused:
            connect_sync("openai_realtime", api_key=KEY, base_url=server.base_url).open()
        assert (refused.value.status_code, refused.value.kind) == (401, "authentication")
        with (
            connect_sync(
                "openai_realtime", api_key=KEY, base_url=server.base_url, reconnect=FAST
            ) as conn,
            pytest.raises(SocketClosed) as closed,
        ):
            conn.send_text("Hi")
            list(conn)
        assert (closed.value.code, closed.value.reason) == (4000, "custom")
        seen: list[Routed] = []
        with (
            connect_sync(
                "openai_realtime", api_key=KEY, base_url=server.base_url, idle_timeout=0.2
            ) as conn,
            pytest.raises(IdleTimeout),
        ):
            conn.send_text("Hi")
            seen.extend(conn)
    assert server.attempts == ["/v1/realtime"] * 3
    assert [type(r.event) for r in seen if r.stream == 1][-1] is Finish
    assert summary(seen)[-1] == (
        1,
        "finish",
        "truncated",
        "the connection closed before response resp_1 was done",
    )
