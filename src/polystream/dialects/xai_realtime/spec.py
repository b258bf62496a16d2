"""What ``xai_realtime`` is and where it is served (data only; see
:mod:`polystream.dialects._socket_spec`)."""

from __future__ import annotations

from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._spec import OPENAI_AUTH

__all__ = ["SPEC"]

SPEC = SocketSpec(
    name="xai_realtime",
    provider="xai",
    description="xAI Voice Agent API over a WebSocket: the Realtime vocabulary, xAI's audio",
    url="wss://api.x.ai/v1/realtime",
    auth=OPENAI_AUTH,
    query=("model",),
    browser_subprotocols=("xai-client-secret.{key}",),
    max_duration=7200.0,
    emulated=True,
    bridge=True,
)
