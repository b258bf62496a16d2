"""What ``openai_realtime`` is and where it is served (data only; see
:mod:`polystream.dialects._socket_spec`)."""

from __future__ import annotations

from polystream.dialects._socket_spec import RECOVERABLE_CLOSE_CODES, SocketSpec
from polystream.dialects._spec import OPENAI_AUTH

__all__ = ["SPEC"]

SPEC = SocketSpec(
    name="openai_realtime",
    provider="openai",
    description="OpenAI Realtime API (GA) over a WebSocket: voice and text sessions",
    url="wss://api.openai.com/v1/realtime",
    auth=OPENAI_AUTH,
    query=("model", "call_id"),
    browser_subprotocols=("realtime", "openai-insecure-api-key.{key}"),
    max_duration=3600.0,
    reconnect_codes=RECOVERABLE_CLOSE_CODES,
    context="conversation",
    text_config={"output_modalities": ["text"]},
    emulated=True,
    bridge=True,
)
