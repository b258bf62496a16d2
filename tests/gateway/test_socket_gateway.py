"""The gateway relaying the WebSocket families to an upstream of the same family, under
both servers, with the official openai SDK (``client.realtime.connect``,
``client.responses.connect``) and a plain ``websockets`` client in front and a scripted
upstream behind: what the upstream received (the injected key, never the client's; the
messages, exactly), what the client received (exactly, binary frames too, errors
scrubbed), the close codes both ways, the handshake's refusals, routing by model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from polystream.cli._listen import bind
from polystream.gateway_core import GatewayConfig, Limits, Route, Upstream
from polystream.server import ServerThread
from polystream.server.gateway import create_gateway
from tests.gateway.conftest import CANARY, GATEWAY_KEY, AppThread
from tests.gateway.socket_upstream import Conn, ScriptedUpstream

SERVERS = ["polystream", "uvicorn"]

SESSION_CREATED = (
    '{"type":"session.created","event_id":"event_A1","session":{"type":"realtime",'
    '"id":"sess_1","model":"gpt-realtime","output_modalities":["text"]}}'
)
REPLY = [
    '{"type":"response.created","event_id":"event_A2","response":{"id":"resp_1",'
    '"object":"realtime.response","status":"in_progress","output":[]}}',
    # (The model's output is passed byte for byte: a key in it is not the gateway's to cut.)
    '{"type":"response.output_text.delta","event_id":"event_A3","response_id":"resp_1",'
    f'"item_id":"item_1","output_index":0,"content_index":0,"delta":"Hi {CANARY}"}}',
    '{"type":"response.done","event_id":"event_A4","response":{"id":"resp_1",'
    '"object":"realtime.response","status":"completed","output":[],"usage":'
    '{"total_tokens":7,"input_tokens":5,"output_tokens":2}}}',
]
AUDIO = bytes(range(256)) * 4
UPSTREAM_ERROR = (
    '{"type":"error","event_id":"event_A5","error":{"type":"invalid_request_error",'
    f'"code":"invalid_api_key","message":"Incorrect API key provided: {CANARY}.",'
    '"param":null,"event_id":null}}'
)
SCRUBBED_ERROR = (
    '{"type":"error","event_id":"event_A5","error":{"type":"invalid_request_error",'
    '"code":"invalid_api_key","message":"Incorrect API key provided: [redacted].",'
    '"param":null,"event_id":null}}'
)


@contextmanager
def gateway(
    server: str,
    upstreams: dict[str, tuple[str, ScriptedUpstream]],
    routes: list[Route] | None = None,
    *,
    log_usage: bool = False,
    **limits: Any,
) -> Iterator[AppThread]:
    """A gateway in front of scripted upstreams (``name: (family, upstream)``)."""
    config = GatewayConfig(
        upstreams={
            name: Upstream(name=name, dialect=family, base_url=up.base_url, api_key=CANARY)
            for name, (family, up) in upstreams.items()
        },
        routes=routes or [],
        api_key=GATEWAY_KEY,
        limits=Limits(**limits),
        log_socket_usage=log_usage,
    )
    front = AppThread(create_gateway(config), server=server).start()
    try:
        yield front
    finally:
        front.stop()


def ws_url(front: AppThread, path: str) -> str:
    return front.base_url.replace("http://", "ws://") + path


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {GATEWAY_KEY}"}


def assert_injected_key(conn: Conn) -> None:
    """The upstream got the upstream's key, and nothing of the client's."""
    assert conn.headers["Authorization"] == f"Bearer {CANARY}"
    assert GATEWAY_KEY not in str(conn.headers.raw_items())
    assert GATEWAY_KEY not in conn.path
    assert conn.headers["User-Agent"].startswith("polystream-gateway/")
    assert "Sec-WebSocket-Protocol" not in conn.headers


@pytest.mark.parametrize("server", SERVERS)
def test_realtime_sdk_through_the_gateway(server: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="polystream.gateway")

    async def script(conn: Conn) -> None:
        await conn.ws.send(SESSION_CREATED)
        for _ in range(3):  # session.update, conversation.item.create, response.create
            await conn.recv()
        for message in REPLY:
            await conn.ws.send(message)
        await conn.ws.send(AUDIO)
        await conn.ws.send(UPSTREAM_ERROR)
        await conn.recv()  # the client's bytes
        await conn.ws.close(4001, "session over")

    with (
        ScriptedUpstream(script) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}, log_usage=True) as front,
    ):
        client = openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key=GATEWAY_KEY)
        with client.realtime.connect(model="gpt-realtime") as conn:
            first = conn.recv()
            assert first.type == "session.created"
            conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
            conn.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Hello"}],
                }
            )
            conn.response.create()
            got = [conn.recv_bytes() for _ in range(len(REPLY) + 2)]
            conn.send_raw(b"\x00\x01 client bytes \xff")
            with pytest.raises(ConnectionClosed) as closed:
                conn.recv_bytes()
        sent = upstream.conn()
    assert got == [m.encode() for m in REPLY] + [AUDIO, SCRUBBED_ERROR.encode()]
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4001, "session over")
    assert sent.path == "/v1/realtime?model=gpt-realtime"
    assert_injected_key(sent)
    assert [json.loads(m) for m in sent.received[:3]] == [
        {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}},
        {
            "type": "conversation.item.create",
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hello"}],
            },
        },
        {"type": "response.create"},
    ]
    assert sent.received[3] == b"\x00\x01 client bytes \xff"
    # The session read the relayed messages: a line for the reply, with its usage.
    lines = [r.getMessage() for r in caplog.records if r.name == "polystream.gateway"]
    assert (
        "WebSocket /openai/v1/realtime: reply resp_1 completed, usage: input 5, output 2, total 7"
        in lines
    )
    closing = [line for line in lines if line.startswith("WebSocket /openai/v1/realtime -> ")]
    assert len(closing) == 1
    assert closing[0].startswith("WebSocket /openai/v1/realtime -> rt (openai_realtime), upstream ")
    assert closing[0].endswith("(4 messages in, 6 out; replies: 1, usage: input 5, output 2)")
    assert not [line for line in lines if CANARY in line or GATEWAY_KEY in line]


@pytest.mark.parametrize("server", SERVERS)
def test_messages_pass_exactly_and_in_order(server: str) -> None:
    messages: list[str | bytes] = [f'{{"type":"x","n":{n}}}' for n in range(50)]
    messages[7] = b"\x00" * 70_000  # (a frame over 64 KiB, and one of 125 bytes)
    messages[8] = b"\x01" * 125
    messages[9] = '{"type":"x","text":"caf\u00e9 \u2603 \U0001f600"}'

    async def echo(conn: Conn) -> None:
        for _ in messages:
            await conn.ws.send(await conn.recv())

    with (
        ScriptedUpstream(echo) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}) as front,
        ws_connect(ws_url(front, "/openai/v1/realtime?model=m"), additional_headers=auth()) as ws,
    ):
        for message in messages:
            ws.send(message)
        assert [ws.recv() for _ in messages] == messages
        ws.close()
        assert upstream.conn().received == messages


@pytest.mark.parametrize("server", SERVERS)
def test_responses_sdk_routed_by_the_first_message(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="polystream.gateway")
    reply = [
        '{"type":"response.created","sequence_number":0,"response":{"id":"resp_9",'
        '"object":"response","status":"in_progress","model":"gpt-5.4-mini","output":[],'
        '"error":null}}',
        '{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1",'
        '"output_index":0,"content_index":0,"delta":"Hello","logprobs":[]}',
        '{"type":"response.failed","sequence_number":2,"response":{"id":"resp_9",'
        '"object":"response","status":"failed","model":"gpt-5.4-mini","output":[],'
        f'"error":{{"code":"server_error","message":"key {CANARY} broke"}}}}}}',
    ]
    scrubbed_failure = (
        '{"type":"response.failed","sequence_number":2,"response":{"id":"resp_9",'
        '"object":"response","status":"failed","model":"gpt-5.4-mini","output":[],'
        '"error":{"code":"server_error","message":"key [redacted] broke"}}}'
    )

    async def answer(conn: Conn) -> None:
        await conn.recv()
        for message in reply:
            await conn.ws.send(message)
        await conn.recv()  # a second request, same model: same upstream

    async def unused(conn: Conn) -> None:
        raise AssertionError("the other upstream was called")

    routes = [
        Route(model="fast", upstream="main", rewrite="gpt-5.4-mini"),
        Route(model="other-*", upstream="other"),
    ]
    with (
        ScriptedUpstream(answer) as main,
        ScriptedUpstream(unused) as other,
        gateway(
            server,
            {"main": ("openai_responses_ws", main), "other": ("openai_responses_ws", other)},
            routes,
        ) as front,
    ):
        client = openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key=GATEWAY_KEY)
        with client.responses.connect() as conn:
            conn.response.create(model="fast", input="Hi", store=False)
            got = [conn.recv_bytes() for _ in reply]
            conn.response.create(model="fast", input="Again")
            conn.response.create(model="other-1", input="Elsewhere")
            refused = json.loads(conn.recv_bytes())
        sent = main.conn()
    assert got == [reply[0].encode(), reply[1].encode(), scrubbed_failure.encode()]
    assert sent.path == "/v1/responses"
    assert_injected_key(sent)
    assert [json.loads(m) for m in sent.received] == [
        {"type": "response.create", "model": "gpt-5.4-mini", "input": "Hi", "store": False},
        {"type": "response.create", "model": "gpt-5.4-mini", "input": "Again"},
    ]
    assert refused == {
        "type": "error",
        "status": 400,
        "error": {
            "message": "model 'other-1' is not served by this connection's upstream (main): "
            "open another connection for it",
            "type": "invalid_request_error",
            "param": "model",
            "code": None,
        },
    }
    assert other.handshakes == 0
    # (Without log_socket_usage, the messages are not read: one line for the connection.)
    lines = [r.getMessage() for r in caplog.records if r.name == "polystream.gateway"]
    assert len(lines) == 1
    assert lines[0].startswith("WebSocket /openai/v1/responses -> main (openai_responses_ws), ")
    assert lines[0].endswith(" (2 messages in, 3 out)")


@pytest.mark.parametrize("server", SERVERS)
def test_client_disconnect_closes_the_upstream(server: str) -> None:
    async def script(conn: Conn) -> None:
        await conn.ws.send(SESSION_CREATED)

    with (
        ScriptedUpstream(script) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}) as front,
    ):
        client = openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key=GATEWAY_KEY)
        with client.realtime.connect(model="gpt-realtime") as conn:
            assert conn.recv_bytes() == SESSION_CREATED.encode()
            conn.send_raw('{"type":"input_audio_buffer.clear"}')
            conn.close(code=4100, reason="user hung up")
        sent = upstream.conn()
        assert (sent.close_code, sent.close_reason) == (4100, "user hung up")
        assert sent.received == ['{"type":"input_audio_buffer.clear"}']

        # A client that goes without a close: its upstream is closed with 1001.
        with ws_connect(
            ws_url(front, "/openai/v1/realtime?model=m"), additional_headers=auth()
        ) as ws:
            assert ws.recv() == SESSION_CREATED
            ws.socket.close()  # (the TCP connection, no close frame)
        assert upstream.conn(1).close_code == 1001


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize(
    ("how", "code", "reason"),
    [
        ("close", 1000, ""),
        ("close", 1008, "policy says no"),
        ("no code", 1000, ""),
        ("drop", 1011, "upstream connection lost"),
    ],
)
def test_upstream_close_reaches_the_client(server: str, how: str, code: int, reason: str) -> None:
    async def script(conn: Conn) -> None:
        await conn.ws.send(SESSION_CREATED)
        if how == "close":
            await conn.ws.close(code, reason)
        elif how == "no code":
            conn.ws.transport.write(b"\x88\x00")  # (a close frame without a code)
        else:
            conn.ws.transport.abort()  # (lost without a close)

    with (
        ScriptedUpstream(script) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}) as front,
        ws_connect(ws_url(front, "/openai/v1/realtime?model=m"), additional_headers=auth()) as ws,
    ):
        assert ws.recv() == SESSION_CREATED
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (code, reason)


@pytest.mark.parametrize("server", SERVERS)
def test_a_bad_gateway_key_is_refused_at_the_handshake(server: str) -> None:
    async def script(conn: Conn) -> None:
        raise AssertionError("the upstream was called")

    with (
        ScriptedUpstream(script) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}) as front,
    ):
        client = openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key="wrong-key-000000")
        with pytest.raises(InvalidStatus) as refused, client.realtime.connect(model="gpt-realtime"):
            pass
        response = refused.value.response
        assert response.status_code == 401
        assert json.loads(response.body) == {
            "error": {
                "message": "missing or invalid API key",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
        with pytest.raises(InvalidStatus) as missing:
            ws_connect(ws_url(front, "/openai/v1/responses")).close()
        assert missing.value.response.status_code == 401
        assert upstream.handshakes == 0


@pytest.mark.parametrize("server", SERVERS)
def test_the_key_in_a_browser_subprotocol(server: str) -> None:
    async def script(conn: Conn) -> None:
        await conn.ws.send(SESSION_CREATED)

    with (
        ScriptedUpstream(script) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}) as front,
    ):
        offered = ["realtime", f"openai-insecure-api-key.{GATEWAY_KEY}"]
        url = ws_url(front, "/openai/v1/realtime?model=gpt-realtime")
        with ws_connect(url, subprotocols=offered) as ws:  # type: ignore[arg-type]
            assert ws.subprotocol == "realtime"
            assert ws.recv() == SESSION_CREATED
        assert_injected_key(upstream.conn())
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(url, subprotocols=["realtime", "openai-insecure-api-key.nope"]).close()  # type: ignore[list-item]
        assert refused.value.response.status_code == 401


@pytest.mark.parametrize("server", SERVERS)
def test_a_family_that_does_not_translate_is_refused(server: str) -> None:
    async def script(conn: Conn) -> None:
        raise AssertionError("the upstream was called")

    with (
        ScriptedUpstream(script) as upstream,
        gateway(server, {"resp": ("openai_responses_ws", upstream)}) as front,
    ):
        # The model in the URL: refused at the handshake.
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(
                ws_url(front, "/openai/v1/realtime?model=gpt-realtime"), additional_headers=auth()
            ).close()
        assert refused.value.response.status_code == 400
        message = (
            "the model is served by the resp upstream (openai_responses_ws, a WebSocket "
            "family), and a openai_realtime connection cannot be translated to it: "
            "openai_responses_ws conversations cannot be translated to or from another family"
        )
        assert json.loads(refused.value.response.body)["error"]["message"] == message
    upstreams = {"resp": ("openai_realtime", upstream)}
    with ScriptedUpstream(script) as upstream, gateway(server, upstreams) as front:
        # The model in the first message: an in-band error, then a close.
        with ws_connect(ws_url(front, "/openai/v1/responses"), additional_headers=auth()) as ws:
            ws.send('{"type":"response.create","model":"gpt-5.4","input":"Hi"}')
            error = json.loads(ws.recv())
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv()
        assert error["type"] == "error"
        assert error["status"] == 400
        assert error["error"]["message"] == (
            "the model is served by the resp upstream (openai_realtime, a WebSocket family), "
            "and a openai_responses_ws connection cannot be translated to it: "
            "openai_responses_ws conversations cannot be translated to or from another family"
        )
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1008
        assert upstream.handshakes == 0


@pytest.mark.parametrize("server", SERVERS)
def test_an_upstream_refusal_reaches_the_client_scrubbed(server: str) -> None:
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {CANARY}"}}).encode()

    async def script(conn: Conn) -> None:
        raise AssertionError("no connection was to open")

    with (
        ScriptedUpstream(script, refuse=(401, body)) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}) as front,
    ):
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(
                ws_url(front, "/openai/v1/realtime?model=m"), additional_headers=auth()
            ).close()
        response = refused.value.response
        assert response.status_code == 401
        assert CANARY not in response.body.decode()
        assert json.loads(response.body)["error"]["message"] == (
            "upstream: the WebSocket handshake was refused with HTTP 401: "
            '{"error": {"message": "Incorrect API key provided: [redacted]"}}'
        )


@pytest.mark.parametrize("server", SERVERS)
def test_an_upstream_redirect_is_not_followed(server: str) -> None:
    async def script(conn: Conn) -> None:
        raise AssertionError("no connection was to open")

    with (
        ScriptedUpstream(script, refuse=(302, b""), location="/v1/elsewhere") as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}) as front,
    ):
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(
                ws_url(front, "/openai/v1/realtime?model=m"), additional_headers=auth()
            ).close()
        response = refused.value.response
        assert response.status_code == 502
        assert json.loads(response.body)["error"]["message"] == (
            "the upstream answered HTTP 302 (a redirect) to the WebSocket handshake, which "
            "the gateway does not follow"
        )
        assert "elsewhere" not in response.body.decode()
        assert upstream.handshakes == 1


@pytest.mark.parametrize("server", SERVERS)
def test_an_unreachable_upstream_is_a_502(server: str) -> None:
    config = GatewayConfig(
        upstreams={
            "rt": Upstream(
                name="rt",
                dialect="openai_realtime",
                base_url="http://127.0.0.1:9/v1",
                api_key=CANARY,
            )
        },
        api_key=GATEWAY_KEY,
    )
    front = AppThread(create_gateway(config), server=server).start()
    try:
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(
                ws_url(front, "/openai/v1/realtime?model=m"), additional_headers=auth()
            ).close()
    finally:
        front.stop()
    assert refused.value.response.status_code == 502
    assert (
        "upstream rt cannot be reached"
        in json.loads(refused.value.response.body)["error"]["message"]
    )


@pytest.mark.parametrize("server", SERVERS)
def test_xai_speech_to_text_binary_in_query_passed(server: str) -> None:
    transcript = '{"type":"transcript.done","text":"hello","duration":1.5}'

    async def script(conn: Conn) -> None:
        await conn.ws.send('{"type":"transcript.created"}')
        await conn.recv()
        await conn.recv()
        await conn.recv()
        await conn.ws.send(transcript)
        await conn.ws.close()

    audio = [bytes([n]) * 3200 for n in range(2)]
    with (
        ScriptedUpstream(script) as upstream,
        gateway(server, {"stt": ("xai_stt", upstream)}) as front,
        ws_connect(
            ws_url(front, "/xai/v1/stt?sample_rate=16000&encoding=pcm&interim_results=true"),
            additional_headers=auth(),
        ) as ws,
    ):
        assert ws.recv() == '{"type":"transcript.created"}'
        ws.send(audio[0])
        ws.send(audio[1])
        ws.send('{"type":"audio.done"}')
        assert ws.recv() == transcript
        sent = upstream.conn()
    assert sent.path == "/v1/stt?sample_rate=16000&encoding=pcm&interim_results=true"
    assert sent.received == [*audio, '{"type":"audio.done"}']
    assert_injected_key(sent)


@pytest.mark.parametrize("server", SERVERS)
def test_the_concurrency_limit_counts_sockets(server: str) -> None:
    async def script(conn: Conn) -> None:
        await conn.ws.send(SESSION_CREATED)

    with (
        ScriptedUpstream(script) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}, max_concurrency=1) as front,
    ):
        url = ws_url(front, "/openai/v1/realtime?model=m")
        with ws_connect(url, additional_headers=auth()) as ws:
            assert ws.recv() == SESSION_CREATED
            with pytest.raises(InvalidStatus) as refused:
                ws_connect(url, additional_headers=auth()).close()
            assert refused.value.response.status_code == 503
            assert refused.value.response.headers["Retry-After"] == "1"
        upstream.conn()
        for _ in range(100):  # (its slot is given back once its relay ends)
            try:
                with ws_connect(url, additional_headers=auth()) as ws:
                    assert ws.recv() == SESSION_CREATED
                break
            except InvalidStatus:
                time.sleep(0.02)
        else:
            raise AssertionError("the slot was not given back")


@pytest.mark.parametrize("server", SERVERS)
def test_a_client_that_does_not_read_holds_the_upstream_back(server: str) -> None:
    count = 1000
    chunk = random.Random(7).randbytes(65536)
    sent = [0]
    finished = threading.Event()

    async def flood(conn: Conn) -> None:
        for _ in range(count):
            await conn.ws.send(chunk)
            sent[0] += 1
        finished.set()

    with (
        ScriptedUpstream(flood) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}) as front,
        ws_connect(
            ws_url(front, "/openai/v1/realtime?model=m"),
            additional_headers=auth(),
            max_size=None,
            compression=None,  # (what a deflated flood would fit in the buffers tells nothing)
        ) as ws,
    ):
        time.sleep(0.5)
        held = sent[0]
        # (What the sockets' buffers hold and the gateway's few messages, not 62 MiB.)
        assert held < count // 2
        got = [ws.recv() for _ in range(count)]
        assert finished.wait(10)
        assert got == [chunk] * count
        del upstream


def test_no_route_for_a_socket_is_a_404() -> None:
    async def script(conn: Conn) -> None:
        raise AssertionError("the upstream was called")

    with (
        ScriptedUpstream(script) as upstream,
        gateway(
            "polystream",
            {"rt": ("openai_realtime", upstream)},
            [Route(model="gpt-*", upstream="rt")],
        ) as front,
    ):
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(
                ws_url(front, "/openai/v1/realtime?model=claude-1"), additional_headers=auth()
            ).close()
        assert refused.value.response.status_code == 404
        with pytest.raises(InvalidStatus) as unknown:
            ws_connect(ws_url(front, "/openai/v1/nothing"), additional_headers=auth()).close()
        assert unknown.value.response.status_code == 404
        assert json.loads(unknown.value.response.body)["error"]["message"] == (
            "no such WebSocket endpoint: /openai/v1/nothing"
        )


def test_a_route_rewrites_the_model_in_the_query() -> None:
    async def script(conn: Conn) -> None:
        await conn.ws.send(SESSION_CREATED)

    with (
        ScriptedUpstream(script) as upstream,
        gateway(
            "polystream",
            {"rt": ("openai_realtime", upstream)},
            [Route(model="voice", upstream="rt", rewrite="gpt-realtime-mini")],
        ) as front,
        ws_connect(
            ws_url(front, "/openai/v1/realtime?model=voice&intent=transcription"),
            additional_headers=auth(),
        ) as ws,
    ):
        assert ws.recv() == SESSION_CREATED
        ws.close()
        assert upstream.conn().path == "/v1/realtime?model=gpt-realtime-mini&intent=transcription"


def test_the_listening_socket_lets_asyncio_disable_nagle() -> None:
    """The serving commands' socket names TCP: asyncio then sets ``TCP_NODELAY`` on each
    connection uvicorn accepts (with protocol 0 it would not, and a burst of small
    messages would wait on the client's delayed ACK)."""
    sock = bind("gateway", "127.0.0.1", 0)
    assert sock is not None
    nodelay: list[int] = []

    async def main() -> None:
        def made(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            raw = writer.get_extra_info("socket")
            nodelay.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(made, sock=sock)
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if nodelay:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    asyncio.run(main())
    assert nodelay == [1]


@pytest.mark.parametrize("server", SERVERS)
def test_a_client_that_takes_no_writes_is_dropped(server: str) -> None:
    chunk = random.Random(3).randbytes(65536)

    async def flood(conn: Conn) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                await conn.ws.send(chunk)

    with (
        ScriptedUpstream(flood) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}, slow_client_seconds=0.3) as front,
        contextlib.suppress(ConnectionClosed),
        ws_connect(
            ws_url(front, "/openai/v1/realtime?model=m"),
            additional_headers=auth(),
            max_size=None,
            compression=None,
        ) as ws,
    ):
        # (Not reading: once the buffers are full, the gateway's write waits.)
        started = time.monotonic()
        assert upstream.conn(timeout=5).close_code == 1001
        assert time.monotonic() - started < 2.0
        ws.socket.close()  # (its own close would wait on its full buffers)


def test_an_http_request_routed_to_a_socket_upstream_is_a_400() -> None:
    async def script(conn: Conn) -> None:
        raise AssertionError("the upstream was called")

    with (
        ScriptedUpstream(script) as upstream,
        gateway("polystream", {"rt": ("openai_realtime", upstream)}) as front,
    ):
        client = openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key=GATEWAY_KEY)
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="gpt-realtime", input="Hi")
    assert refused.value.body == {
        "message": "the model is served by the openai_realtime upstream, a WebSocket "
        "family: an HTTP request of openai_responses is not relayed to it",
        "type": "invalid_request_error",
        "param": "model",
        "code": None,
    }
    assert upstream.handshakes == 0


@pytest.mark.parametrize("server", SERVERS)
def test_an_upstream_that_closes_while_the_client_sends(server: str) -> None:
    async def script(conn: Conn) -> None:
        await conn.recv()
        reading = asyncio.create_task(conn.drain())  # (its close's answer must be read)
        await conn.ws.close(4002, "enough")
        await reading

    with (
        ScriptedUpstream(script) as upstream,
        gateway(server, {"rt": ("openai_realtime", upstream)}) as front,
        ws_connect(ws_url(front, "/openai/v1/realtime?model=m"), additional_headers=auth()) as ws,
        pytest.raises(ConnectionClosed) as closed,
    ):
        # (Sends that find the upstream closed do not turn its close into a failure.)
        for n in range(2000):
            ws.send(f'{{"type":"input_audio_buffer.append","audio":"{n:04d}"}}')
        ws.recv()
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4002, "enough")
    assert upstream.conn().close_code == 4002


@pytest.mark.parametrize("server", SERVERS)
def test_the_emulator_behind_the_gateway(server: str) -> None:
    """The openai SDK through the gateway to polystream's own emulator: a text turn of
    the Realtime API and one of the Responses WebSocket, each as the emulator gives it
    directly."""

    def realtime_turn(base_url: str, key: str) -> tuple[list[str], str]:
        client = openai.OpenAI(base_url=base_url, api_key=key)
        kinds: list[str] = []
        text = ""
        with client.realtime.connect(model="gpt-realtime") as conn:
            conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
            conn.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Hello"}],
                }
            )
            conn.response.create()
            for event in conn:
                kinds.append(event.type)
                if event.type == "response.output_text.delta":
                    text += event.delta
                if event.type == "response.done":
                    break
        return kinds, text

    def responses_turn(base_url: str, key: str) -> tuple[list[str], str]:
        client = openai.OpenAI(base_url=base_url, api_key=key)
        kinds: list[str] = []
        text = ""
        with client.responses.connect() as conn:
            conn.response.create(model="gpt-5.4-nano", input="Hello", store=False)
            for event in conn:
                kinds.append(event.type)
                if event.type == "response.output_text.delta":
                    text += event.delta
                if event.type == "response.completed":
                    break
        return kinds, text

    with ServerThread() as emulator:
        base = emulator.base_url + "/openai/v1"
        upstreams = {
            "rt": Upstream(name="rt", dialect="openai_realtime", base_url=base, api_key=CANARY),
            "resp": Upstream(
                name="resp", dialect="openai_responses_ws", base_url=base, api_key=CANARY
            ),
        }
        config = GatewayConfig(upstreams=upstreams, api_key=GATEWAY_KEY)
        front = AppThread(create_gateway(config), server=server).start()
        try:
            via = front.base_url + "/openai/v1"
            for turn in (realtime_turn, responses_turn):
                direct = turn(base, CANARY)
                assert direct[1].startswith("Emulated reply")
                assert turn(via, GATEWAY_KEY) == direct
        finally:
            front.stop()
