"""The gateway translating between OpenAI Realtime and Gemini Live, the emulator behind
it, under both servers: the openai SDK's ``client.realtime.connect`` talking to a Gemini
Live upstream (text, tool calls, spoken audio, usage, an out-of-band response refused),
and polystream's Gemini Live client talking to an OpenAI Realtime upstream (text, audio
resampled from 16 kHz to 24 kHz, routed by the model of its setup; its video refused
with a close, as Gemini reports an invalid request)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager

import openai
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from polystream.events import BlockStart, DataDelta, Finish, TextDelta
from polystream.gateway_core import GatewayConfig, Route, Upstream
from polystream.realtime import connect_sync
from polystream.scenario import Emulator
from polystream.server import ServerThread
from polystream.server.gateway import create_gateway
from tests.gateway.conftest import CANARY, GATEWAY_KEY, AppThread
from tests.realtime.bridge_harness import tone
from tests.realtime.test_bridge import TOOL_SCENARIOS, TOOLS

SERVERS = ["polystream", "uvicorn"]
GEMINI = "gemini-live-2.5-flash-preview"
PREFIX = {"openai_realtime": "/openai/v1", "gemini_live": "/gemini"}
LIVE_PATH = "/gemini/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


@contextmanager
def bridged(server: str) -> Iterator[AppThread]:
    """A gateway routing ``gpt-*`` to the emulator's OpenAI Realtime, ``gemini-*`` to its
    Gemini Live."""
    with ServerThread(Emulator(TOOL_SCENARIOS)) as emulator:
        upstreams = {
            name: Upstream(
                name=name,
                dialect=family,
                base_url=emulator.base_url + PREFIX[family],
                api_key=CANARY,
            )
            for name, family in (("gpt", "openai_realtime"), ("gemini", "gemini_live"))
        }
        routes = [Route(model="gpt-*", upstream="gpt"), Route(model="gemini-*", upstream="gemini")]
        config = GatewayConfig(upstreams=upstreams, routes=routes, api_key=GATEWAY_KEY)
        front = AppThread(create_gateway(config), server=server).start()
        try:
            yield front
        finally:
            front.stop()


@pytest.mark.parametrize("server", SERVERS)
def test_openai_sdk_to_gemini_live(server: str) -> None:
    with bridged(server) as front:
        client = openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key=GATEWAY_KEY)
        with client.realtime.connect(model=GEMINI) as conn:
            assert conn.recv().type == "session.created"
            conn.session.update(
                session={
                    "type": "realtime",
                    "output_modalities": ["text"],
                    "tools": TOOLS,
                    "audio": {"input": {"turn_detection": None}},
                }
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
                    break
            assert calls == [("call_7", "get_weather", '{"city":"Paris"}')]
            conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": "call_7", "output": "{}"}
            )
            conn.response.create()
            text = ""
            for event in conn:
                if event.type == "response.output_text.delta":
                    text += event.delta
                if event.type == "response.done":
                    usage = event.response.usage
                    break
            assert text == "It is sunny."
            assert usage is not None
            assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (30, 4, 34)
            # An out-of-band response has no place in a Gemini session.
            conn.response.create(response={"conversation": "none"})
            error = conn.recv()
            assert error.type == "error"
            assert error.error.code == "unsupported_feature"  # type: ignore[union-attr]
            assert error.error.message.startswith(  # type: ignore[union-attr]
                "gemini_live cannot give a reply out of the conversation"
            )


@pytest.mark.parametrize("server", SERVERS)
def test_openai_sdk_speaks_to_gemini_live(server: str) -> None:
    with bridged(server) as front:
        client = openai.OpenAI(base_url=front.base_url + "/openai/v1", api_key=GATEWAY_KEY)
        with client.realtime.connect(model=GEMINI) as conn:
            conn.session.update(
                session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
            )
            conn.input_audio_buffer.append(audio=base64.b64encode(tone(0.5, 24000)).decode())
            conn.input_audio_buffer.commit()
            conn.response.create()
            audio = b""
            for event in conn:
                if event.type == "response.output_audio.delta":
                    audio += base64.b64decode(event.delta)
                if event.type == "response.output_audio_transcript.done":
                    transcript = event.transcript
                if event.type == "response.done":
                    assert event.response.status == "completed"
                    break
    assert transcript == f"Emulated reply from {GEMINI}."
    assert len(audio) > 24000  # (PCM16 at 24 kHz, as the OpenAI client hears)


def _gemini_turn(base_url: str, model: str, audio: bytes | None) -> tuple[str, bytes, int]:
    """A Gemini Live turn with polystream's client (text, or spoken with manual activity
    detection): its text or transcript, its audio, its total tokens."""
    text, said, total = "", bytearray(), -1
    with connect_sync(
        "gemini_live", model=model, base_url=base_url, api_key=GATEWAY_KEY, reconnect=None
    ) as conn:
        if audio is None:
            conn.configure(generationConfig={"responseModalities": ["TEXT"]})
            conn.send_text("Hello")
        else:
            conn.configure(
                realtimeInputConfig={"automaticActivityDetection": {"disabled": True}},
                outputAudioTranscription={},
            )
            conn.command("activity_start")
            conn.send_audio(audio)
            conn.command("activity_end")
        kinds: dict[int, str] = {}
        for routed in conn:
            event = routed.event
            if routed.stream == 0:
                continue
            if isinstance(event, BlockStart):
                kinds[event.index] = event.kind
            elif isinstance(event, TextDelta) and kinds.get(event.index) in ("text", "transcript"):
                text += event.delta
            elif isinstance(event, DataDelta) and kinds.get(event.index) == "audio":
                said += base64.b64decode(event.delta)
            elif isinstance(event, Finish):
                assert event.status == "completed"
                assert event.usage is not None
                total = event.usage.total_tokens or 0
                break
    return text, bytes(said), total


@pytest.mark.parametrize("server", SERVERS)
def test_a_gemini_client_to_openai_realtime(server: str) -> None:
    with bridged(server) as front:
        text, _, total = _gemini_turn(front.base_url + "/gemini", "gpt-realtime", None)
        assert text == "Emulated reply from gpt-realtime. You said: Hello"
        assert total > 0
        # Its audio (16 kHz) resampled to OpenAI's 24 kHz; the reply's (24 kHz) as it is.
        text, said, _ = _gemini_turn(front.base_url + "/gemini", "gpt-realtime", tone(0.5, 16000))
        assert text == "Emulated reply from gpt-realtime."
        assert len(said) > 24000
        # The same client, a Gemini model: relayed to the Gemini upstream as it is.
        text, _, _ = _gemini_turn(front.base_url + "/gemini", GEMINI, None)
        assert text == f"Emulated reply from {GEMINI}. You said: Hello"


@pytest.mark.parametrize("server", SERVERS)
def test_gemini_video_to_openai_is_refused_with_a_close(server: str) -> None:
    with bridged(server) as front:
        url = front.base_url.replace("http://", "ws://") + LIVE_PATH
        with ws_connect(url, additional_headers={"x-goog-api-key": GATEWAY_KEY}) as ws:
            ws.send(json.dumps({"setup": {"model": "models/gpt-realtime"}}))
            assert list(json.loads(ws.recv())) == ["setupComplete"]
            frame = base64.b64encode(b"\xff\xd8\xff\xe0jpeg").decode()
            ws.send(
                json.dumps({"realtimeInput": {"video": {"data": frame, "mimeType": "image/jpeg"}}})
            )
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1007
    assert closed.value.rcvd.reason == (
        "openai_realtime takes no video input (not carried: this gemini_live connection is "
        "translated to a openai_realtime upstream)"
    )
