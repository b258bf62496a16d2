"""What ``gemini_live`` is and where it is served (data only; see
:mod:`polystream.dialects._socket_spec`).

The Gemini Developer API serves the Live API at
``wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.<version>.
GenerativeService.BidiGenerateContent`` (``v1beta``, ``v1alpha`` or ``v1``), the key in the
``x-goog-api-key`` header (or ``?key=``). An ephemeral token (``auth_tokens/...``, minted
by ``POST /v1alpha/auth_tokens``) opens the constrained method
``...v1alpha.GenerativeService.BidiGenerateContentConstrained`` instead, presented as
``Authorization: Token auth_tokens/...`` or, from a browser, ``?access_token=``.

Vertex AI serves the same messages at
``wss://<location>-aiplatform.googleapis.com/ws/google.cloud.aiplatform.<version>.
LlmBidiService/BidiGenerateContent`` with an OAuth bearer token, the model named
``projects/<p>/locations/<l>/publishers/google/models/<m>`` (give ``url=`` and the
headers to connect there).

A connection lives about 10 minutes (a ``goAway`` comes before the end); the session
outlives it through resumption handles.
"""

from __future__ import annotations

from typing import Final

from polystream.dialects._socket_spec import RECOVERABLE_CLOSE_CODES, SocketSpec
from polystream.dialects._spec import AuthSpec

__all__ = ["SPEC"]

_WS: Final = "wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage."

SPEC = SocketSpec(
    name="gemini_live",
    provider="gemini",
    description="Gemini Live API over a WebSocket (BidiGenerateContent): voice and text",
    url=_WS + "v1beta.GenerativeService.BidiGenerateContent",
    auth=AuthSpec("x-goog-api-key", accepts=("x-goog-api-key", "?key")),
    max_duration=600.0,
    reconnect_codes=RECOVERABLE_CLOSE_CODES,
    context="resumption",
    setup_once=True,
    text_config={"generationConfig": {"responseModalities": ["TEXT"]}},
    emulated=True,
    bridge=True,
    model_messages={"setup": "setup.model"},
    model_prefix="models/",
    also_urls=(
        _WS + "v1alpha.GenerativeService.BidiGenerateContent",
        _WS + "v1.GenerativeService.BidiGenerateContent",
    ),
    token_url=_WS + "v1alpha.GenerativeService.BidiGenerateContentConstrained",
    token_auth=AuthSpec("authorization", accepts=("authorization", "?access_token")),
    token_path="/v1alpha/auth_tokens",
    token_prefix="auth_tokens/",
)
