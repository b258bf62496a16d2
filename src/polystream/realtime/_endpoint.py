"""Where a WebSocket family is served and how a client authenticates, sans-I/O: the URL
and headers of the opening handshake, from the family's descriptor
(:class:`~polystream.dialects._socket_spec.SocketSpec`) and its provider's.

The URL follows the official OpenAI SDK: without a base URL, the family's endpoint
(``wss://api.openai.com/v1/realtime``); with one, the endpoint's path under the
provider's default base URL is appended to it, ``http`` becoming ``ws`` and ``https``
``wss`` (``http://127.0.0.1:8000/openai/v1`` gives
``ws://127.0.0.1:8000/openai/v1/realtime``). ``model`` goes in the query where the
family takes it there (``?model=``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from polystream.dialects import PROVIDERS, ProviderSpec
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._sockets import SOCKET_SPECS, SOCKETS
from polystream.errors import LocalProtocolError

__all__ = ["Endpoint", "api_key_for", "endpoint", "socket_spec"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The opening handshake of a connection.

    Attributes:
        url: The WebSocket URL, query included.
        headers: The request headers (authentication first).
        request_id_header: The response header carrying the provider's request id.
    """

    url: str
    headers: dict[str, str]
    request_id_header: str


def socket_spec(family: str) -> SocketSpec:
    """The descriptor of the WebSocket family ``family``.

    Raises:
        LocalProtocolError: No family has that name.
    """
    spec = SOCKET_SPECS.get(family)
    if spec is None:
        raise LocalProtocolError(
            f"unknown WebSocket family {family!r} (known: {', '.join(SOCKETS)})"
        )
    return spec


def _provider(spec: SocketSpec) -> ProviderSpec:
    return PROVIDERS[spec.provider]


def api_key_for(
    family: str, api_key: str | Mapping[str, str] | None, environ: Mapping[str, str]
) -> str:
    """The key to connect with: ``api_key`` (a key, or keys by provider), else the
    provider's environment variable (``OPENAI_API_KEY``), as the HTTP client does.

    Raises:
        LocalProtocolError: No key.
    """
    provider = _provider(socket_spec(family))
    key = api_key.get(provider.name) if isinstance(api_key, Mapping) else api_key
    key = key or environ.get(provider.env_key)
    if not key:
        raise LocalProtocolError(
            f"no API key for {provider.name}: pass api_key= or set {provider.env_key}"
        )
    return key


def _ws_scheme(url: str) -> str:
    for http, ws in (("http://", "ws://"), ("https://", "wss://")):
        if url.startswith(http):
            return ws + url[len(http) :]
    return url


def endpoint(
    family: str,
    *,
    api_key: str,
    model: str | None = None,
    base_url: str | None = None,
    url: str | None = None,
    query: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Endpoint:
    """The URL and headers that open a connection of ``family``.

    Args:
        api_key: The key, sent as the family's authentication headers; an ephemeral
            token of a family that takes them (Gemini's ``auth_tokens/...``) goes to
            the family's token endpoint instead, in its token header.
        model: Put in the query when the family takes it there (``model`` in the
            descriptor's ``query``).
        base_url: The provider's base URL (``http(s)://`` or ``ws(s)://``), under which
            the family's path is appended.
        url: The whole endpoint instead (``base_url`` is then not used).
        query: More query parameters (``call_id``), after ``model``.
        headers: More headers, after the authentication headers (a header of the same
            name replaces theirs).

    Raises:
        LocalProtocolError: An unknown family; a ``base_url`` for a family whose
            endpoint is not under its provider's base URL (give ``url``).
    """
    spec = socket_spec(family)
    provider = _provider(spec)
    token = (
        spec.token_url is not None
        and spec.token_prefix is not None
        and api_key.startswith(spec.token_prefix)
    )
    if url is None:
        target = spec.token_url if token and spec.token_url else spec.url
        url = target if base_url is None else _under(spec, provider, base_url, target)
    params: dict[str, str] = {}
    if model is not None and "model" in spec.query:
        params["model"] = model
    params.update(query or {})
    if params:
        url += ("&" if "?" in url else "?") + urlencode(params)
    if token and spec.token_auth is not None:
        out = {spec.token_auth.header: f"{spec.token_scheme} {api_key}"}
    else:
        out = spec.auth.headers(api_key)
    for name, value in (headers or {}).items():
        for existing in [k for k in out if k.lower() == name.lower()]:
            del out[existing]
        out[name] = value
    return Endpoint(url=url, headers=out, request_id_header=provider.request_id_header)


def _under(spec: SocketSpec, provider: ProviderSpec, base_url: str, target: str) -> str:
    default = _ws_scheme(provider.base_url).rstrip("/")
    if not target.startswith(default + "/"):
        raise LocalProtocolError(
            f"{spec.name} is not served under {provider.name}'s base URL: give url=",
            dialect=spec.name,
        )
    path = target[len(default) :]
    base, sep, query = _ws_scheme(base_url).partition("?")
    return base.rstrip("/") + path + sep + query
