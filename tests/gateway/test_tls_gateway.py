"""The gateway over TLS, under both servers, in front of an emulator upstream that is
itself served over TLS: the official openai SDK streams a chat completion through it
(HTTPS in, HTTPS to the upstream, transcoded), and its Realtime client talks through it
(WSS in, WSS to the upstream). Clients and the gateway's upstream side trust the local
authority through ``SSL_CERT_FILE``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest

from polystream.gateway_core import GatewayConfig, Route, Upstream
from polystream.retry import RetryPolicy
from polystream.scenario import Emulator
from polystream.server import ServerThread, prepare_tls
from polystream.server.gateway import create_gateway
from tests.gateway.conftest import CANARY, GATEWAY_KEY, AppThread

MODEL = "gpt-5.4-nano"


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tls")


@pytest.fixture(scope="module")
def upstream(tls_dir: Path) -> Iterator[ServerThread]:
    with ServerThread(Emulator(), tls=tls_dir) as server:
        yield server


@pytest.fixture(params=["polystream", "uvicorn"])
def front(
    request: pytest.FixtureRequest,
    tls_dir: Path,
    upstream: ServerThread,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[AppThread]:
    """A gateway over TLS: chat requests to the upstream's Responses endpoint, Realtime
    sockets to its Realtime endpoint, both over TLS."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_dir / "ca.pem"))
    assert upstream.base_url.startswith("https://")
    base = upstream.base_url + "/openai/v1"
    config = GatewayConfig(
        upstreams={
            "text": Upstream(
                name="text", dialect="openai_responses", base_url=base, api_key=CANARY
            ),
            "rt": Upstream(name="rt", dialect="openai_realtime", base_url=base, api_key=CANARY),
        },
        routes=[Route(model="gpt-realtime", upstream="rt"), Route(model="*", upstream="text")],
        api_key=GATEWAY_KEY,
    )
    gateway = AppThread(
        create_gateway(config, retry=RetryPolicy(max_retries=1, initial_delay=0.01)),
        server=request.param,
        tls=prepare_tls(tls_dir),
    ).start()
    try:
        yield gateway
    finally:
        gateway.stop()


def sdk(front: AppThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key=GATEWAY_KEY, max_retries=0)


def test_a_chat_stream_through_the_gateway_over_https(front: AppThread) -> None:
    assert front.base_url.startswith("https://127.0.0.1:")
    with sdk(front) as client:
        chunks = list(
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Hello there"}], stream=True
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == f"Emulated reply from {MODEL}. You said: Hello there"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_a_realtime_session_through_the_gateway_over_wss(front: AppThread) -> None:
    with sdk(front) as client, client.realtime.connect(model="gpt-realtime") as conn:
        assert conn.recv().type == "session.created"
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        conn.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hello there"}],
            }
        )
        conn.response.create()
        messages = []
        while not messages or messages[-1]["type"] != "response.done":
            messages.append(json.loads(conn.recv_bytes()))
    deltas = [m["delta"] for m in messages if m["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "Emulated reply from gpt-realtime. You said: Hello there"
    assert messages[-1]["response"]["status"] == "completed"


def test_the_gateway_trusts_the_upstream_through_ssl_cert_file(
    front: AppThread, tls_dir: Path, upstream: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client trusts the gateway by its own context; the gateway, without
    # SSL_CERT_FILE, cannot trust its upstream.
    monkeypatch.delenv("SSL_CERT_FILE")
    http = httpx2.Client(verify=prepare_tls(tls_dir).client_context())
    with (
        openai.OpenAI(
            base_url=front.base_url + "/openai/v1",
            api_key=GATEWAY_KEY,
            max_retries=0,
            http_client=http,
        ) as client,
        pytest.raises(openai.APIStatusError) as caught,
    ):
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hello there"}]
        )
    assert caught.value.status_code == 502
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "server_error"
    assert body["message"].startswith(
        f"cannot reach {upstream.base_url}/openai/v1: [SSL: CERTIFICATE_VERIFY_FAILED] "
        "certificate verify failed: unable to get local issuer certificate"
    )
