"""The gateway's shape for its HTTP server's own refusals.

polystream's HTTP server refuses some requests before the app sees them (a declared
``Content-Length`` over the body limit: 413, before any of the body is read). Given
:func:`gateway_refusal` as its ``refusal`` hook, it answers them in the error shape of
the dialect the request's path names, as the gateway answers its own errors, so that
each official SDK raises its typed status error.
"""

from __future__ import annotations

from typing import Final

import msgspec

from polystream.request import error_body
from polystream.server.gateway import _match, _prefix_dialect

__all__ = ["gateway_refusal"]

_KINDS: Final = {413: "request_too_large", 503: "overloaded"}
_JSON: Final = [(b"content-type", b"application/json")]


def gateway_refusal(
    status: int, path: str, message: str
) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers and body for the server's refusal of a request to ``path``: the error
    body of the dialect of the endpoint (``/xai/v1/messages``: Anthropic's shape), or
    of its prefix for a path that is none (OpenAI's outside every prefix)."""
    matched = _match("POST", path)
    dialect = matched[0] if matched is not None else _prefix_dialect(path)
    body = error_body(dialect, status, message, kind=_KINDS.get(status))
    return list(_JSON), msgspec.json.encode(body)
