"""Gemini Live resumption through the socket client's decisions (:class:`SocketLink`,
sans-I/O) and over loopback: a ``goAway`` replaces the socket once a handle is known
(closed first, then the new one opened with the handle, the unacknowledged messages
sent again); a drop resumes the same way; without a handle nothing is resumed."""

from __future__ import annotations

import asyncio
import json

from polystream.errors import SocketClosed
from polystream.events import ErrorEvent, Finish, FinishReason, Lifetime, StreamWarning
from polystream.realtime import SocketLink, connect
from tests.realtime_client.loopback import Loopback, Peer

MODEL = "gemini-live-2.5-flash-preview"
SETUP = {"model": f"models/{MODEL}", "sessionResumption": {"transparent": True}}


def feed(link: SocketLink, *payloads: dict[str, object]) -> list[object]:
    return [r.event for p in payloads for r in link.incoming(json.dumps(p))]


def opened(link: SocketLink) -> list[str | bytes]:
    """Open a socket: the replay, then the queue, as the shells write them."""
    out = list(link.connected())
    while (message := link.next_queued()) is not None:
        link.sent(message)
        out.append(message)
    return out


def update(handle: str, last: int | None = None) -> dict[str, object]:
    body: dict[str, object] = {"newHandle": handle, "resumable": True}
    if last is not None:
        body["lastConsumedClientMessageIndex"] = str(last)
    return {"sessionResumptionUpdate": body}


def test_goaway_renews_the_socket_with_the_handle_and_the_unacknowledged() -> None:
    link = SocketLink("gemini_live", model=MODEL, rng=lambda: 0.0)
    session = link.session
    link.admit(session.configure(resumption=True, transparent=True))
    first = opened(link)
    assert [json.loads(m) for m in first] == [{"setup": SETUP}]
    # Before any handle: a goAway is only news.
    assert feed(link, {"goAway": {"timeLeft": "10s"}})[0] == Lifetime(
        state="going_away",
        reason="goAway",
        max_duration=600.0,
        time_left=10.0,
        extra={"timeLeft": "10s"},
    )
    assert not link.renew
    one, two, three = (link.admit(session.send_text(t))[0] for t in ("one", "two", "three"))
    for message in (one, two, three):
        link.sent(message)
    feed(link, update("h1", last=1))  # "one" is in the handle's state
    feed(link, {"goAway": {"timeLeft": "10s"}})
    assert link.renew  # the shell closes the socket, and only then:
    drop = link.renewal()
    assert drop.delay == 0.0 and drop.error is None
    assert [type(r.event) for r in drop.events] == [StreamWarning]
    assert "the server is going away: resuming the session" in drop.events[0].event.message  # type: ignore[attr-defined]
    second = opened(link)
    resumed = {**SETUP, "sessionResumption": {"transparent": True, "handle": "h1"}}
    assert [json.loads(second[0]), *second[1:]] == [{"setup": resumed}, two, three]
    assert link.connections == 2


def test_a_drop_resumes_only_with_a_handle() -> None:
    link = SocketLink("gemini_live", model=MODEL, rng=lambda: 0.0)
    link.admit(link.session.configure(resumption=True))
    opened(link)
    drop = link.dropped(1006)
    assert drop.delay is None and isinstance(drop.error, SocketClosed)

    link = SocketLink("gemini_live", model=MODEL, rng=lambda: 0.0)
    link.admit(link.session.configure(resumption=True))
    opened(link)
    feed(link, update("h1"))
    (after,) = link.admit(link.session.send_text("later"))
    link.sent(after)
    drop = link.dropped(1011, "Deadline expired")
    assert drop.delay == 0.5  # the SDK's backoff's first delay (no jitter drawn)
    events = [r.event for r in drop.events]
    assert type(events[0]) is ErrorEvent and events[0].error.code == "1011"
    replay = opened(link)
    assert json.loads(replay[0])["setup"]["sessionResumption"] == {"handle": "h1"}
    assert replay[1:] == [after]


def test_over_loopback_the_old_socket_is_closed_before_the_new_one_opens() -> None:
    order: list[str] = []

    async def first(peer: Peer) -> None:
        await peer.expect(2)
        await peer.send(
            {"setupComplete": {"sessionId": "s-1"}},
            update("h1", last=1),
            {"goAway": {"timeLeft": "1s"}},
        )
        await peer.drain()  # until the client closes
        order.append("old closed")

    async def second(peer: Peer) -> None:
        order.append("new opened")
        (setup,) = await peer.expect(1)
        assert json.loads(setup)["setup"]["sessionResumption"]["handle"] == "h1"
        await peer.send(
            {"setupComplete": {"sessionId": "s-1"}},
            {"serverContent": {"modelTurn": {"parts": [{"text": "Hi"}]}}},
            {"serverContent": {"turnComplete": True}},
        )
        await peer.drain()

    async def main(base_url: str) -> list[object]:
        seen: list[object] = []
        async with connect(
            "gemini_live", model=MODEL, api_key="k", base_url=base_url, idle_timeout=5
        ) as conn:
            await conn.configure(resumption=True, transparent=True)
            await conn.send_text("Hello")
            async for routed in conn:
                seen.append(routed.event)
                if type(routed.event) is Finish:
                    break
        return seen

    with Loopback(first, second) as server:
        seen = asyncio.run(main(server.base_url))
    assert order == ["old closed", "new opened"]
    assert any(type(e) is StreamWarning and e.code == "reconnect" for e in seen)
    assert seen[-1] == Finish(status="completed", reason=FinishReason(unified="stop"))
