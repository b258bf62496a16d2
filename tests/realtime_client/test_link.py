"""The socket client's decisions, sans-I/O (:class:`SocketLink`): the queue, the
reconnection policy of the official SDK, the ends of a connection; and where a
connection goes (:func:`endpoint`)."""

from __future__ import annotations

import json

import pytest

from polystream.client._ws import SocketOptions
from polystream.errors import IdleTimeout, LocalProtocolError, SocketClosed
from polystream.events import Finish, Raw, StreamWarning
from polystream.realtime import SOCKET_SPECS, SocketLink, endpoint
from polystream.realtime._endpoint import api_key_for
from polystream.retry import RetryPolicy
from tests.realtime_client.scripts import reply_start, responses_error, text_reply


def feed(link: SocketLink, *payloads: dict[str, object]) -> list[object]:
    return [r.event for p in payloads for r in link.incoming(json.dumps(p))]


def warnings(drop_events: list[object]) -> list[str]:
    return [e.event.message for e in drop_events if type(e.event) is StreamWarning]  # type: ignore[attr-defined]


def test_the_sdk_reconnect_codes_and_backoff() -> None:
    assert SOCKET_SPECS["openai_realtime"].reconnect_codes == frozenset(
        {1001, 1005, 1006, 1011, 1012, 1013, 1015}
    )
    assert SOCKET_SPECS["openai_responses_ws"].reconnect_codes == frozenset(
        {1001, 1005, 1006, 1011, 1012, 1013, 1015}
    )
    link = SocketLink("openai_realtime", rng=lambda: 0.5)
    link.connected()
    assert link.next_queued() is None
    delays = []
    for _ in range(5):
        drop = link.dropped(None)
        assert drop.error is None and drop.delay is not None
        delays.append(drop.delay)
        link.connected()
        link.next_queued()
    # 0.5 s doubling, capped at 8 s, scaled by 1 - 0.25 * 0.5.
    assert delays == [0.4375, 0.875, 1.75, 3.5, 7.0]
    drop = link.dropped(1006)
    assert drop.delay is None
    assert isinstance(drop.error, SocketClosed) and drop.error.code == 1006
    assert link.state == "closed"


def test_attempts_are_counted_again_after_a_message_other_than_an_error() -> None:
    link = SocketLink("openai_realtime", reconnect=RetryPolicy(max_retries=1, jitter=0.0))
    link.connected()
    link.next_queued()
    assert link.dropped(1011).delay == 0.5
    link.connected()
    link.next_queued()
    feed(link, {"type": "error", "error": {"message": "x"}})  # no progress
    assert link.dropped(1011).delay is None
    link = SocketLink("openai_realtime", reconnect=RetryPolicy(max_retries=1, jitter=0.0))
    link.connected()
    link.next_queued()
    assert link.dropped(1011).delay == 0.5
    link.connected()
    link.next_queued()
    feed(link, {"type": "rate_limits.updated", "rate_limits": []})
    assert link.dropped(1011).delay == 0.5


@pytest.mark.parametrize(
    ("code", "reason", "error"),
    [
        (1000, "", None),
        (1002, "protocol error", "the connection closed (close 1002 protocol error)"),
        (1008, "", "the connection closed (close 1008)"),
        (4000, "custom", "the connection closed (close 4000 custom)"),
    ],
)
def test_codes_that_end_the_connection(code: int, reason: str, error: str | None) -> None:
    link = SocketLink("openai_realtime")
    link.connected()
    link.next_queued()
    feed(link, *reply_start("resp_1", "item_1", None))
    drop = link.dropped(code, reason)
    assert drop.delay is None
    assert (str(drop.error) if drop.error else None) == error
    finish = drop.events[-1].event
    assert type(finish) is Finish and finish.status == "truncated"
    assert link.state == "closed"
    with pytest.raises(LocalProtocolError, match="send on a closed connection"):
        link.admit(["{}"])


def test_without_reconnection_an_allowed_code_ends_the_connection_too() -> None:
    link = SocketLink("openai_realtime", reconnect=None)
    link.connected()
    link.next_queued()
    drop = link.dropped(1001, "going away")
    assert isinstance(drop.error, SocketClosed)
    assert (drop.error.code, drop.error.reason) == (1001, "going away")


def test_the_queue_waits_for_a_socket_and_a_failed_write_goes_back_first() -> None:
    link = SocketLink("openai_realtime")
    assert link.admit(["a", "b"]) == []  # not connected yet
    assert link.connected() == []  # the first socket: nothing to replay
    assert [link.next_queued(), link.next_queued(), link.next_queued()] == ["a", "b", None]
    assert link.state == "open"
    assert link.admit(["c", "d"]) == ["c", "d"]
    link.sent("c")
    link.unsent(["d"])
    assert link.state == "reconnecting"
    assert link.admit(["e"]) == []
    assert link.queued == ["d", "e"]
    drop = link.dropped(1000)  # a clean close, with messages never sent
    assert isinstance(drop.error, SocketClosed)
    assert drop.error.unsent == ["d", "e"]
    assert str(drop.error) == "the connection closed with messages unsent (close 1000)"


def test_the_responses_model_is_configured_and_the_realtime_model_is_in_the_url() -> None:
    link = SocketLink("openai_responses_ws", model="gpt-5.4-mini")
    assert link.session.send_text("hi") == [
        '{"type":"response.create","model":"gpt-5.4-mini","input":"hi"}'
    ]
    link = SocketLink("openai_realtime", model="gpt-realtime")
    assert link.queued == []


def test_raw_events_only_when_asked_and_the_end_events() -> None:
    link = SocketLink("openai_realtime")
    link.connected()
    link.next_queued()
    assert Raw not in {type(e) for e in feed(link, *text_reply("r", "i", "x", None))}
    link = SocketLink("openai_realtime", keep_raw=True)
    link.connected()
    link.next_queued()
    events = feed(link, *reply_start("r", "i", None))
    assert [type(e) for e in events].count(Raw) == 4
    assert [type(r.event) for r in link.close()][-1] is Finish
    assert link.close() == []


def test_idle_timeout_and_handshake_failures() -> None:
    link = SocketLink("openai_realtime", reconnect=RetryPolicy(max_retries=2, jitter=0.0))
    assert link.connect_failed(401, {}) is None
    assert link.connect_failed(503, {"retry-after": "3"}) == 3.0
    assert link.connect_failed(None, {}) == 1.0
    assert link.connect_failed(None, {}) is None
    link = SocketLink("openai_realtime")
    link.connected()
    link.next_queued()
    drop = link.timed_out(1.5)
    assert isinstance(drop.error, IdleTimeout)
    assert (str(drop.error), drop.error.seconds) == ("no message for 1.5 s", 1.5)


def test_endpoints() -> None:
    def url(family: str, **options: object) -> str:
        return endpoint(family, api_key="k", **options).url  # type: ignore[arg-type]

    assert url("openai_realtime", model="gpt-realtime") == (
        "wss://api.openai.com/v1/realtime?model=gpt-realtime"
    )
    assert url("openai_responses_ws", model="gpt-5.4-mini") == "wss://api.openai.com/v1/responses"
    assert url("openai_realtime", base_url="http://127.0.0.1:8000/openai/v1/") == (
        "ws://127.0.0.1:8000/openai/v1/realtime"
    )
    assert url("openai_responses_ws", base_url="https://proxy.example/v1?x=1") == (
        "wss://proxy.example/v1/responses?x=1"
    )
    assert url("openai_realtime", base_url="wss://h/v1", model="m", query={"call_id": "c"}) == (
        "wss://h/v1/realtime?model=m&call_id=c"
    )
    assert url("openai_realtime", url="ws://h/rt", model="m") == "ws://h/rt?model=m"
    found = endpoint(
        "openai_realtime", api_key="k", headers={"Authorization": "Bearer ek_1", "X-A": "b"}
    )
    assert found.headers == {"Authorization": "Bearer ek_1", "X-A": "b"}
    assert found.request_id_header == "x-request-id"
    with pytest.raises(LocalProtocolError, match="unknown WebSocket family 'nope'"):
        endpoint("nope", api_key="k")


def test_api_keys_and_socket_options() -> None:
    assert api_key_for("openai_realtime", None, {"OPENAI_API_KEY": "env"}) == "env"
    assert api_key_for("openai_realtime", {"openai": "mine"}, {"OPENAI_API_KEY": "env"}) == "mine"
    with pytest.raises(LocalProtocolError) as caught:
        api_key_for("openai_realtime", None, {})
    assert caught.value.message == "no API key for openai: pass api_key= or set OPENAI_API_KEY"
    found = endpoint("openai_realtime", api_key="k")
    assert SocketOptions(ping_interval=5.0, extra={"proxy": None}).arguments(found) == {
        "additional_headers": {"authorization": "Bearer k"},
        "open_timeout": 10.0,
        "ping_interval": 5.0,
        "ping_timeout": 20.0,
        "close_timeout": 10.0,
        "proxy": None,
    }


def test_a_retry_advice_renews_the_connection_only_when_opted_in() -> None:
    limit = responses_error("websocket_connection_limit_reached", "limit")
    link = SocketLink("openai_responses_ws", model="m")
    link.connected()
    link.next_queued()
    feed(link, limit)
    assert not link.renew
    link = SocketLink("openai_responses_ws", model="m", full_history_retry=True)
    link.connected()
    link.next_queued()
    # No request to blame (stream 0): a new connection, nothing sent again.
    assert StreamWarning not in {type(e) for e in feed(link, limit)}
    assert link.renew
    drop = link.renewal()
    assert (drop.delay, warnings(drop.events), link.queued) == (
        0.0,
        ["renewing the connection; reconnecting in 0.00 s"],
        [],
    )
    # A request whose chain is not known whole: not sent again (no warning).
    link.connected()
    link.next_queued()
    for message in link.admit(link.session.send_text("x", previous_response_id="resp_old")):
        link.sent(message)
    events = feed(link, responses_error("previous_response_not_found", "gone"))
    assert StreamWarning not in {type(e) for e in events}
    assert link.renew
    assert link.renewal().events[-1].event.code == "reconnect"  # type: ignore[attr-defined]
    assert link.queued == []
