"""The gateway relays the Gemini Live family (``gemini_live``) to an upstream of the same
family (the emulator here): polystream's client through it, the client's key checked
at the handshake (``x-goog-api-key``) and the upstream's key injected."""

from __future__ import annotations

import asyncio

import pytest

from polystream.errors import APIStatusError
from polystream.gateway_core import GatewayConfig, Upstream
from polystream.realtime import text_turn
from polystream.scenario import Emulator
from polystream.server import ServerThread
from polystream.server.gateway import create_gateway
from tests.gateway.conftest import AppThread

MODEL = "gemini-live-2.5-flash-preview"


@pytest.mark.parametrize("server", ["polystream", "uvicorn"])
def test_a_live_turn_through_the_gateway(server: str) -> None:
    with ServerThread(Emulator()) as upstream:
        config = GatewayConfig(
            upstreams={
                "g": Upstream(
                    name="g",
                    dialect="gemini_live",
                    base_url=upstream.base_url + "/gemini",
                    api_key="upstream-key",
                )
            },
            api_key="gateway-key",
        )
        front = AppThread(create_gateway(config), server=server).start()
        try:

            def turn(key: str) -> object:
                return asyncio.run(
                    text_turn(
                        "gemini_live",
                        "Hello",
                        model=MODEL,
                        api_key=key,
                        base_url=front.base_url + "/gemini",
                        reconnect=None,
                        idle_timeout=5,
                    )
                )

            result = turn("gateway-key")
            with pytest.raises(APIStatusError) as refused:
                turn("wrong-key")
        finally:
            front.stop()
    assert (result.status, result.text) == (  # type: ignore[attr-defined]
        "completed",
        f"Emulated reply from {MODEL}. You said: Hello",
    )
    assert refused.value.status_code == 401
