"""What ``gemini_lyria`` is and where it is served (data only; see
:mod:`polystream.dialects._socket_spec`)."""

from __future__ import annotations

from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._spec import AuthSpec

__all__ = ["SPEC"]

SPEC = SocketSpec(
    name="gemini_lyria",
    provider="gemini",
    description="Gemini Lyria RealTime over a WebSocket: weighted prompts in, endless music out",
    url=(
        "wss://generativelanguage.googleapis.com/ws/"
        "google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateMusic"
    ),
    auth=AuthSpec("x-goog-api-key", accepts=("x-goog-api-key", "?key")),
    emulated=True,
    answer="music",
)
