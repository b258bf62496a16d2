"""What ``xai_tts`` is and where it is served (data only; see
:mod:`polystream.dialects._socket_spec`)."""

from __future__ import annotations

from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._spec import OPENAI_AUTH

__all__ = ["SPEC"]

SPEC = SocketSpec(
    name="xai_tts",
    provider="xai",
    description="xAI streaming text to speech over a WebSocket: text deltas in, audio out",
    url="wss://api.x.ai/v1/tts",
    auth=OPENAI_AUTH,
    query=(
        "voice",
        "language",
        "codec",
        "sample_rate",
        "speed",
        "optimize_streaming_latency",
        "text_normalization",
        "with_timestamps",
    ),
    emulated=True,
    answer="speech",
    error_shape="message",
)
