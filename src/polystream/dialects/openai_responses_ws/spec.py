"""What ``openai_responses_ws`` is and where it is served (data only; see
:mod:`polystream.dialects._socket_spec`)."""

from __future__ import annotations

from polystream.dialects._socket_spec import RECOVERABLE_CLOSE_CODES, SocketSpec
from polystream.dialects._spec import OPENAI_AUTH

__all__ = ["SPEC"]

SPEC = SocketSpec(
    name="openai_responses_ws",
    provider="openai",
    description="OpenAI Responses API over a WebSocket (response.create per turn, lanes)",
    url="wss://api.openai.com/v1/responses",
    auth=OPENAI_AUTH,
    max_duration=3600.0,
    lanes=32,
    reconnect_codes=RECOVERABLE_CLOSE_CODES,
    context="responses",
    reply_dialect="openai_responses",
    emulated=True,
    model_messages={"response.create": "model"},
    error_shape="responses",
)
