"""google-genai's Live client (``client.aio.live.connect``), unchanged, through the gateway
over TLS to an OpenAI Realtime upstream (the emulator's): a text turn, and a tool call
answered with the SDK's ``send_tool_response``. The SDK opens ``wss://`` whenever it has
an API key, so the gateway serves TLS with a local authority trusted through
``SSL_CERT_FILE``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import types

from polystream.gateway_core import GatewayConfig, Route, Upstream
from polystream.scenario import Emulator
from polystream.server import ServerThread, prepare_tls
from polystream.server.gateway import create_gateway
from tests.gateway.conftest import CANARY, GATEWAY_KEY, AppThread
from tests.realtime.test_bridge import TOOL_SCENARIOS

MODEL = "gpt-realtime"
LIMIT = 60.0
"""Seconds a test may take: a message that never comes fails it rather than hanging."""
WEATHER = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="The weather in a city",
            parameters=types.Schema(
                type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}
            ),
        )
    ]
)


@pytest.fixture(params=["polystream", "uvicorn"])
def front(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[AppThread]:
    """The gateway over TLS, every model to the emulator's OpenAI Realtime (plain HTTP
    behind it)."""
    tls = prepare_tls(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    with ServerThread(Emulator(TOOL_SCENARIOS)) as emulator:
        upstream = Upstream(
            name="rt",
            dialect="openai_realtime",
            base_url=emulator.base_url + "/openai/v1",
            api_key=CANARY,
        )
        config = GatewayConfig(
            upstreams={"rt": upstream},
            routes=[Route(model="*", upstream="rt")],
            api_key=GATEWAY_KEY,
        )
        gateway = AppThread(create_gateway(config), server=request.param, tls=tls).start()
        try:
            yield gateway
        finally:
            gateway.stop()


def _client(front: AppThread) -> genai.Client:
    assert front.base_url.startswith("https://")
    return genai.Client(
        api_key=GATEWAY_KEY, http_options=types.HttpOptions(base_url=front.base_url + "/gemini")
    )


async def _turn(session: Any) -> list[types.LiveServerMessage]:
    """One turn's messages (the SDK's ``receive`` stops after ``turnComplete``)."""
    return [message async for message in session.receive()]


def test_a_text_turn_reaches_openai_realtime(front: AppThread) -> None:
    async def main() -> tuple[str, types.UsageMetadata | None]:
        config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
        async with _client(front).aio.live.connect(model=MODEL, config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Hello")])
            )
            messages = await _turn(session)
        text = "".join(m.text for m in messages if m.text)
        usage = [m.usage_metadata for m in messages if m.usage_metadata]
        assert messages[-1].server_content is not None
        assert messages[-1].server_content.turn_complete
        return text, usage[-1] if usage else None

    text, usage = asyncio.run(asyncio.wait_for(main(), LIMIT))
    assert text == f"Emulated reply from {MODEL}. You said: Hello"
    assert usage is not None and (usage.total_token_count or 0) > 0


def test_a_tool_call_crosses_both_ways(front: AppThread) -> None:
    async def main() -> tuple[types.FunctionCall, str]:
        config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT], tools=[WEATHER])
        async with _client(front).aio.live.connect(model=MODEL, config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
            )
            # (The turn is not complete at a tool call: it goes on after the response.)
            calls: list[types.FunctionCall] = []
            async for message in session.receive():
                if message.tool_call is not None:
                    calls = list(message.tool_call.function_calls or [])
                    break
            (call,) = calls
            await session.send_tool_response(
                function_responses=[
                    types.FunctionResponse(id=call.id, name=call.name, response={"sky": "clear"})
                ]
            )
            text = "".join(m.text for m in await _turn(session) if m.text)
        return call, text

    call, text = asyncio.run(asyncio.wait_for(main(), LIMIT))
    assert (call.id, call.name, call.args) == ("call_7", "get_weather", {"city": "Paris"})
    assert text == "It is sunny."
