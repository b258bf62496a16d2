"""What ``xai_stt`` is and where it is served (data only; see
:mod:`polystream.dialects._socket_spec`)."""

from __future__ import annotations

from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._spec import OPENAI_AUTH

__all__ = ["SPEC"]

SPEC = SocketSpec(
    name="xai_stt",
    provider="xai",
    description="xAI streaming speech to text over a WebSocket: raw audio in, transcripts out",
    url="wss://api.x.ai/v1/stt",
    auth=OPENAI_AUTH,
    query=(
        "sample_rate",
        "encoding",
        "interim_results",
        "endpointing",
        "language",
        "multichannel",
        "channels",
        "diarize",
    ),
    emulated=True,
    answer="transcript",
    error_shape="message",
)
