"""The gateway translating a realtime client of one family to an upstream of another
(polystream's emulator behind it), under both servers: the openai SDK's
``client.realtime.connect`` and polystream's own client talking to an xAI Voice Agent
upstream, and an xAI client talking to an OpenAI Realtime upstream; text, tool calls,
audio resampled between the client's 16 kHz and OpenAI's 24 kHz, usage, routing by
model, and what cannot cross refused in the client's family."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager

import openai
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from polystream.audio import PCM16_16K, PCM16_24K, convert
from polystream.events import BlockStart, DataDelta, Finish
from polystream.gateway_core import GatewayConfig, Route, Upstream
from polystream.realtime import connect_sync, text_turn_sync
from polystream.scenario import Emulator
from polystream.scenario._format import Scenario, Timing
from polystream.server import ServerThread
from polystream.server.gateway import create_gateway
from tests.gateway.conftest import CANARY, GATEWAY_KEY, AppThread
from tests.realtime.bridge_harness import tone
from tests.realtime.test_bridge import TOOL_SCENARIOS, TOOLS

SERVERS = ["polystream", "uvicorn"]


@contextmanager
def bridged(
    server: str, upstreams: dict[str, str], routes: list[Route] | None = None
) -> Iterator[tuple[AppThread, ServerThread]]:
    """A gateway in front of the emulator, with upstreams ``name: family`` (each at the
    emulator's prefix of its provider)."""
    with ServerThread(Emulator(TOOL_SCENARIOS)) as emulator:
        prefix = {"openai_realtime": "/openai/v1", "xai_realtime": "/xai/v1"}
        config = GatewayConfig(
            upstreams={
                name: Upstream(
                    name=name,
                    dialect=family,
                    base_url=emulator.base_url + prefix[family],
                    api_key=CANARY,
                )
                for name, family in upstreams.items()
            },
            routes=routes or [],
            api_key=GATEWAY_KEY,
        )
        front = AppThread(create_gateway(config), server=server).start()
        try:
            yield front, emulator
        finally:
            front.stop()


@pytest.mark.parametrize("server", SERVERS)
def test_openai_sdk_to_an_xai_upstream(server: str) -> None:
    with bridged(server, {"grok": "xai_realtime"}) as (front, _):
        client = openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key=GATEWAY_KEY)
        with client.realtime.connect(model="grok-voice-latest") as conn:
            first = conn.recv()
            assert first.type == "session.created"
            assert first.session.model == "grok-voice-latest"  # type: ignore[union-attr]
            conn.session.update(
                session={"type": "realtime", "output_modalities": ["text"], "tools": TOOLS}
            )
            conn.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Weather in Paris?"}],
                }
            )
            conn.response.create()
            calls = []
            for event in conn:
                if event.type == "response.function_call_arguments.done":
                    calls.append((event.call_id, event.name, event.arguments))
                if event.type == "response.done":
                    usage = event.response.usage
                    break
            assert calls == [("call_7", "get_weather", '{"city":"Paris"}')]
            assert usage is not None
            assert (usage.input_tokens, usage.output_tokens) == (21, 9)
            conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": "call_7", "output": "sunny"}
            )
            conn.response.create()
            text = ""
            for event in conn:
                if event.type == "response.output_text.delta":
                    text += event.delta
                if event.type == "response.done":
                    assert event.response.status == "completed"
                    usage = event.response.usage
                    break
            assert text == "It is sunny."
            assert usage is not None
            assert usage.total_tokens == 34


@pytest.mark.parametrize("server", SERVERS)
def test_polystream_client_to_an_xai_upstream(server: str) -> None:
    with bridged(server, {"grok": "xai_realtime"}) as (front, _):
        result = text_turn_sync(
            "openai_realtime",
            "Hello",
            model="grok-voice-latest",
            base_url=front.base_url + "/openai/v1",
            api_key=GATEWAY_KEY,
            reconnect=None,
        )
    assert result.status == "completed"
    assert result.text == "Emulated reply from grok-voice-latest. You said: Hello"
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (10, 16)


def _spoken_reply(family: str, base_url: str, key: str, rate: int) -> tuple[bytes, int]:
    """A spoken turn of ``family`` at ``rate`` (turn detection off): the reply's audio
    and its audio tokens."""
    fmt = {"type": "audio/pcm", "rate": rate}
    audio = bytearray()
    tokens = -1
    with connect_sync(
        family, model="gpt-realtime", base_url=base_url, api_key=key, reconnect=None
    ) as conn:
        if family == "xai_realtime":
            conn.configure(
                turn_detection=None, audio={"input": {"format": fmt}, "output": {"format": fmt}}
            )
        else:
            conn.configure(audio={"input": {"format": fmt, "turn_detection": None}})
        conn.send_audio(tone(0.5, rate))
        conn.command("commit_audio")
        conn.create_response()
        blocks: dict[int, str] = {}
        for routed in conn:
            event = routed.event
            if routed.stream == 0:
                continue
            if isinstance(event, BlockStart):
                blocks[event.index] = event.kind
            elif isinstance(event, DataDelta) and blocks.get(event.index) == "audio":
                audio += base64.b64decode(event.delta)
            elif isinstance(event, Finish):
                assert event.status == "completed"
                assert event.usage is not None
                tokens = event.usage.audio_output_tokens or 0
                break
    return bytes(audio), tokens


@pytest.mark.parametrize("server", SERVERS)
def test_an_xai_client_at_16k_to_an_openai_upstream(server: str) -> None:
    with bridged(server, {"gpt": "openai_realtime"}) as (front, emulator):
        direct, direct_tokens = _spoken_reply(
            "openai_realtime", emulator.base_url + "/openai/v1", CANARY, 24000
        )
        via, via_tokens = _spoken_reply(
            "xai_realtime", front.base_url + "/xai/v1", GATEWAY_KEY, 16000
        )
    assert len(direct) > 24000  # (over half a second of it)
    # The upstream's 24 kHz reply, resampled to the client's 16 kHz.
    assert via == convert(direct, PCM16_24K, PCM16_16K)
    assert via_tokens == direct_tokens > 0


@pytest.mark.parametrize("server", SERVERS)
def test_routing_by_model_relays_or_translates(server: str) -> None:
    routes = [Route(model="gpt-*", upstream="gpt"), Route(model="grok-*", upstream="grok")]
    with bridged(server, {"gpt": "openai_realtime", "grok": "xai_realtime"}, routes) as (
        front,
        _,
    ):
        for model in ("gpt-realtime", "grok-voice-latest"):
            result = text_turn_sync(
                "xai_realtime",
                "Hi",
                model=model,
                base_url=front.base_url + "/xai/v1",
                api_key=GATEWAY_KEY,
                reconnect=None,
            )
            # (xAI's replies are spoken unless asked otherwise: the text is the transcript.)
            assert result.transcript is not None
            assert result.transcript.text == f"Emulated reply from {model}. You said: Hi"
            assert result.status == "completed"


@pytest.mark.parametrize("server", SERVERS)
def test_a_feature_that_cannot_cross_is_an_error_event(server: str) -> None:
    with bridged(server, {"gpt": "openai_realtime"}) as (front, _):
        url = front.base_url.replace("http://", "ws://") + "/xai/v1/realtime?model=gpt-realtime"
        headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
        with ws_connect(url, additional_headers=headers) as ws:
            assert json.loads(ws.recv())["type"] == "conversation.created"
            assert json.loads(ws.recv())["type"] == "session.created"
            ws.send(
                json.dumps(
                    {
                        "type": "conversation.item.create",
                        "item": {
                            "type": "force_message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": "One moment."}],
                        },
                    }
                )
            )
            error = json.loads(ws.recv())
            # The connection goes on.
            ws.send('{"type":"session.update","session":{"instructions":"Be brief."}}')
            assert json.loads(ws.recv())["type"] == "session.updated"
    assert error["type"] == "error"
    assert error["error"] == {
        "type": "invalid_request_error",
        "code": "unsupported_feature",
        "message": "openai_realtime cannot say a text verbatim (a forced message) (not "
        "carried: this xai_realtime connection is translated to a openai_realtime upstream)",
        "param": None,
        "event_id": None,
    }


@pytest.mark.parametrize("server", SERVERS)
def test_an_http_upstream_is_still_refused(server: str) -> None:
    with ServerThread() as emulator:
        config = GatewayConfig(
            upstreams={
                "http": Upstream(
                    name="http",
                    dialect="openai_responses",
                    base_url=emulator.base_url + "/openai/v1",
                    api_key=CANARY,
                )
            },
            api_key=GATEWAY_KEY,
        )
        front = AppThread(create_gateway(config), server=server).start()
        try:
            url = front.base_url.replace("http://", "ws://") + "/openai/v1/realtime?model=gpt-5"
            with pytest.raises(InvalidStatus) as refused:
                ws_connect(url, additional_headers={"Authorization": f"Bearer {GATEWAY_KEY}"})
        finally:
            front.stop()
    assert refused.value.response.status_code == 400
    assert json.loads(refused.value.response.body)["error"]["message"] == (
        "the model is served by the http upstream (openai_responses, an HTTP dialect), and "
        "a openai_realtime connection is served only by a WebSocket upstream"
    )


@pytest.mark.parametrize("server", SERVERS)
def test_the_openai_sdk_interrupts_an_xai_reply(server: str) -> None:
    slow = Emulator([Scenario(timing=Timing(delay=0.05))])
    with ServerThread(slow) as emulator:
        config = GatewayConfig(
            upstreams={
                "grok": Upstream(
                    name="grok",
                    dialect="xai_realtime",
                    base_url=emulator.base_url + "/xai/v1",
                    api_key=CANARY,
                )
            },
            api_key=GATEWAY_KEY,
        )
        front = AppThread(create_gateway(config), server=server).start()
        try:
            client = openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key=GATEWAY_KEY)
            with client.realtime.connect(model="grok-voice-latest") as conn:
                conn.session.update(
                    session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
                )
                conn.conversation.item.create(
                    item={
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "Tell me a story"}],
                    }
                )
                conn.response.create()
                for event in conn:
                    if event.type == "response.output_audio.delta":
                        item_id, response_id = event.item_id, event.response_id
                        break
                # Barge-in: what was played is kept, the rest cancelled.
                conn.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=10)
                conn.response.cancel(response_id=response_id)
                kinds = []
                for event in conn:
                    kinds.append(event.type)
                    if event.type == "response.done":
                        assert event.response.status == "cancelled"
                        break
                assert "conversation.item.truncated" in kinds
        finally:
            front.stop()
