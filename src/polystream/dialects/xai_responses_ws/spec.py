"""What ``xai_responses_ws`` is and where it is served (data only; see
:mod:`polystream.dialects._socket_spec`)."""

from __future__ import annotations

from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._spec import OPENAI_AUTH

__all__ = ["SPEC"]

SPEC = SocketSpec(
    name="xai_responses_ws",
    provider="xai",
    description="xAI Responses API over a WebSocket (response.create per turn)",
    url="wss://api.x.ai/v1/responses",
    auth=OPENAI_AUTH,
    reply_dialect="xai_responses",
    emulated=True,
    model_messages={"response.create": "model"},
    error_shape="responses",
)
"""No documented lanes (``stream_id``) or maximum duration: one reply at a time."""
