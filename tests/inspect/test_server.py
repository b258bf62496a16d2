"""``/inspect`` on the emulator and the gateway: the page, the decode endpoint, and the
gateway's streams (read through a tap on its journal, behind its client keys)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from polystream import decode
from polystream.decoding import decode_events
from polystream.dialects import DIALECTS
from polystream.events import dump_event
from polystream.gateway_core import Client, GatewayConfig, Upstream
from polystream.inspector import build_capture
from polystream.journal import MemoryJournal
from polystream.scenario import Emulator
from polystream.server import ServerThread, _inspect
from polystream.server._inspect import JournalTap
from polystream.server.gateway import create_gateway
from tests.gateway.conftest import AppThread
from tests.helpers import FIXTURES

KEY_A = "inspect-team-a-0123456789"
KEY_B = "inspect-team-b-9876543210"


def _page_data(html: str) -> dict[str, Any]:
    head = '<script type="application/json" id="ps-data">'
    start = html.index(head) + len(head)
    data: dict[str, Any] = json.loads(html[start : html.index("</script>", start)])
    return data


@pytest.fixture(scope="module")
def emulator() -> Iterator[ServerThread]:
    server = ServerThread(Emulator()).start()
    yield server
    server.stop()


def test_the_emulator_serves_the_page_and_decodes_what_it_is_sent(emulator: ServerThread) -> None:
    with httpx.Client(base_url=emulator.base_url) as client:
        page = client.get("/inspect")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        data = _page_data(page.text)
        assert data["server"] == {"decode": "/inspect/api/decode", "streams": None, "auth": False}
        assert data["captures"] == []
        body = (FIXTURES / "anthropic_messages" / "parallel_tools.sse").read_bytes()
        got = client.post("/inspect/api/decode", params={"name": "p.sse"}, content=body)
        assert got.status_code == 200
        capture = got.json()
        expected = json.loads(json.dumps(build_capture(body, name="p.sse")))
        # (Ids a target needs and the source has none of are minted at random.)
        assert {k: v for k, v in capture.items() if k != "transcodes"} == {
            k: v for k, v in expected.items() if k != "transcodes"
        }
        assert [(t["target"], t["bytes"], t["losses"]) for t in capture["transcodes"]] == [
            (t["target"], t["bytes"], t["losses"]) for t in expected["transcodes"]
        ]
        named = client.post("/inspect/api/decode?dialect=openai_chat", content=body).json()
        assert named["dialect"] == "openai_chat" and named["name"] == "capture"
        assert client.post("/inspect/api/decode?dialect=nope", content=body).status_code == 400
        assert client.get("/inspect/api/decode").status_code == 405
        assert client.get("/inspect/api/streams").status_code == 404  # (the gateway's)
        assert client.post("/inspect", content=b"").status_code == 405
        # The emulator's own routes are as they were.
        assert client.get("/").json()["service"] == "polystream provider emulator"


def test_a_capture_over_the_bound_is_refused(
    emulator: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_inspect, "MAX_CAPTURE_BYTES", 100)
    with httpx.Client(base_url=emulator.base_url) as client:
        got = client.post("/inspect/api/decode", content=b"data: {}\n\n" * 20)
    assert got.status_code == 413
    assert got.json() == {"error": {"message": "a capture is at most 100 bytes"}}


def test_the_tap_passes_everything_through_and_remembers_streams() -> None:
    inner = MemoryJournal()
    tap = JournalTap(inner)
    tap.create("s1", {"dialect": "openai_chat", "tenant": "a"}, now=100.0)
    tap.create("alias-1", {"alias": "s1", "dialect": "openai_chat", "tenant": "a"}, now=100.0)
    tap.create("s2", {"dialect": "anthropic_messages", "tenant": "b"}, now=101.0)
    tap.append("s1", [("1", b"data: 1\n\n"), ("2", b"data: 22\n\n")], now=100.5)
    tap.append("s1", [("3", b"data: 333\n\n")], now=101.25)
    tap.finish("s1", now=102.0)
    assert inner.read_after("s1", None) == tap.read_after("s1", None)
    assert [e.data for e in tap.read_from("s1", 1)[0]] == [b"data: 22\n\n", b"data: 333\n\n"]
    assert tap.meta("alias-1") == {"alias": "s1", "dialect": "openai_chat", "tenant": "a"}
    assert tap.total_bytes == inner.total_bytes  # (anything else is the inner journal's)
    assert tap.streams("a") == [
        {
            "id": "s1",
            "dialect": "openai_chat",
            "started": 100.0,
            "entries": 3,
            "bytes": 30,
            "finished": True,
        }
    ]
    assert [s["id"] for s in tap.streams("b")] == ["s2"]
    tapped = tap.tapped("s1", "a")
    assert tapped is not None
    assert [tapped.time_of(position) for position in range(4)] == [100.5, 100.5, 101.25, 101.25]
    assert tap.tapped("s1", "b") is None and tap.tapped("alias-1", "a") is None


def test_the_tap_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_inspect, "TAPPED_STREAMS", 3)
    monkeypatch.setattr(_inspect, "TIMED_APPENDS", 2)
    tap = JournalTap(MemoryJournal())
    for n in range(5):
        tap.create(f"s{n}", {"dialect": "openai_chat", "tenant": "a"}, now=float(n))
    assert [s["id"] for s in tap.streams("a")] == ["s4", "s3", "s2"]
    for n in range(4):
        tap.append("s4", [(str(n), b"x")], now=10.0 + n)
    tapped = tap.tapped("s4", "a")
    assert tapped is not None and tapped.count == 4
    # Past the dated appends, entries take the last time known.
    assert [tapped.time_of(position) for position in range(4)] == [10.0, 11.0, 11.0, 11.0]


# -- the gateway -------------------------------------------------------------------------------

PARTS = 6


class _Paced(httpx.AsyncByteStream):
    """A Chat Completions stream: ``w1 w2 ...``, one delta every ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def __aiter__(self) -> AsyncIterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            body = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "gpt-5",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return b"data: " + json.dumps(body).encode() + b"\n\n"

        yield chunk({"role": "assistant", "content": ""})
        for n in range(1, PARTS + 1):
            await asyncio.sleep(self.delay)
            yield chunk({"content": f"w{n} "})
        yield chunk({}, "stop")
        yield b"data: [DONE]\n\n"


def _gateway(delay: float) -> AppThread:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Paced(delay)
        )

    config = GatewayConfig(
        upstreams={"chat": Upstream(name="chat", dialect="openai_chat", base_url="http://up/v1")},
        clients={"team-a": Client(api_key=KEY_A), "team-b": Client(api_key=KEY_B)},
    )
    app = create_gateway(config, transport=httpx.MockTransport(handler))
    return AppThread(app).start()


def _request(key: str) -> dict[str, Any]:
    return {
        "headers": {"authorization": f"Bearer {key}"},
        "json": {"model": "gpt-5", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    }


def test_the_gateway_lists_a_tenants_streams_and_follows_one_live() -> None:
    gateway = _gateway(delay=0.15)
    try:
        with httpx.Client(base_url=gateway.base_url, timeout=10) as client:
            page = client.get("/inspect")
            assert page.status_code == 200
            assert _page_data(page.text)["server"] == {
                "decode": None,
                "streams": "/inspect/api/streams",
                "auth": True,
            }
            assert client.get("/inspect/api/streams").status_code == 401
            wrong = {"authorization": "Bearer not-a-key"}
            assert client.get("/inspect/api/streams", headers=wrong).status_code == 401
            assert client.post("/inspect/api/decode", content=b"x").status_code == 404
            a = {"authorization": f"Bearer {KEY_A}"}
            b = {"x-api-key": KEY_B}
            received = b""
            with client.stream("POST", "/openai/v1/chat/completions", **_request(KEY_A)) as reply:
                chunks = reply.iter_raw()
                while b"w1 " not in received:
                    received += next(chunks)
                # While it runs: listed as live, read as far as it went.
                (listed,) = client.get("/inspect/api/streams", headers=a).json()["streams"]
                assert listed["dialect"] == "openai_chat" and listed["finished"] is False
                stream_id = listed["id"]
                assert stream_id == reply.headers["x-polystream-stream-id"]
                live = client.get(f"/inspect/api/streams/{stream_id}", headers=a).json()
                assert live["finished"] is False
                assert live["capture"]["result"]["status"] == "truncated"  # (so far)
                assert live["capture"]["transcodes"] == []
                for chunk in chunks:
                    received += chunk
            # Another tenant sees none of it.
            assert client.get("/inspect/api/streams", headers=b).json() == {"streams": []}
            other = client.get(f"/inspect/api/streams/{stream_id}", headers=b)
            assert other.status_code == 404
            done = client.get(f"/inspect/api/streams/{stream_id}", headers=a).json()
    finally:
        gateway.stop()
    assert done["finished"] is True
    capture = done["capture"]
    # What the client got, decoded, is what the inspector shows.
    assert capture["result"] == decode(received).to_dict()
    assert capture["events"] == [json.loads(dump_event(e)) for e in decode_events(received)]
    assert capture["result"]["text"] == "w1 w2 w3 w4 w5 w6 "
    assert [t["target"] for t in capture["transcodes"]] == list(DIALECTS)
    # Dated by when the journal got each event, from the first one.
    assert capture["timed"] is True and capture["time_origin"] == "first_event"
    times = [n["time"] for n in capture["native"]]
    assert times[0] == 0.0 and times == sorted(times)
    assert times[-1] >= 0.5  # six deltas 0.15 s apart
    assert capture["stats"]["tokens_per_second"] is None  # (the upstream states no usage)
    assert capture["stats"]["longest_gap"]["seconds"] >= 0.1
