"""The gateway's decisions, sans-I/O: routing, inbound authentication, resume cursors,
and keeping upstream secrets out of everything a client or a log can see.

The ASGI shell (:mod:`polystream.server.gateway`) reads requests and moves bytes; what
to call, with which key, and how a resume names its stream, is decided here (each
outbound event's resume cursor is its encoder's: see
:meth:`~polystream.dialects._base.DialectEncoder.encode_entries`).

Routing: with one upstream every request goes there. With several, the first route
whose pattern matches the request's model wins; with no configured routes a model goes to
the upstream named after the provider that serves it (its
:attr:`~polystream.dialects.ProviderSpec.model_prefixes`: ``gpt-*``, ``o<digit>*``,
``chatgpt-*``, ... to ``openai``; ``claude-*`` to ``anthropic``; ``grok-*`` to ``xai``;
``gemini-*``, ``gemma-*``, ... to ``gemini``), when that upstream exists.
A model that matches no route is a 404 in the inbound dialect's shape. A request that
names no model (a session's stream, a session created from a stored agent) goes to the
first upstream of its own dialect, else as the empty model routes.

Families: a client of a text dialect may be served by an upstream of any text dialect
(the stream is transcoded); a client of a media or agent-session dialect only by an
upstream of its own dialect (see :func:`family_refusal`).

WebSocket families (:data:`polystream.dialects._sockets.SOCKET_SPECS`) are relayed to an
upstream of the same family, or translated to one of another conversation family
(:mod:`polystream.realtime._bridge`): their paths (:data:`SOCKET_PATHS`), where a client presents
its key on the handshake (:func:`socket_key`), where the model is (the URL's query or a
client message: :func:`socket_model`, :func:`message_model`), the upstream's URL
(:func:`upstream_socket_url`), the refusal of a family that cannot serve (:func:`socket_refusal`),
the gateway's own in-band errors (:func:`socket_error`), an upstream error's text
without secrets (:func:`scrub_socket_message`) and the close codes passed on
(:func:`relayed_close_code`) are decided here.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import hmac
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlencode, urlsplit, urlunsplit

import msgspec

from polystream.dialects import DIALECTS, PROVIDERS, TEXT_FAMILIES, provider_of_path
from polystream.dialects._cursors import CursorSplitter
from polystream.dialects._sockets import SOCKET_SPECS
from polystream.realtime._bridge import bridge_refusal
from polystream.request import error_body
from polystream.scrub import Scrubber

__all__ = [
    "ANONYMOUS_TENANT",
    "DEFAULT_DIALECT",
    "DEFAULT_TENANT",
    "SOCKET_PATHS",
    "Client",
    "GatewayConfig",
    "Limits",
    "Route",
    "SSECursorSplitter",
    "Tenants",
    "Upstream",
    "alias_id",
    "check_key",
    "counter_cursors",
    "family_refusal",
    "load_config",
    "message_model",
    "model_name",
    "parse_upstream_spec",
    "presented_key",
    "relayed_close_code",
    "scrub",
    "scrub_socket_message",
    "socket_denial",
    "socket_error",
    "socket_key",
    "socket_model",
    "socket_refusal",
    "upstream_provider",
    "upstream_socket_url",
    "with_model",
]

DEFAULT_DIALECT: Final = {name: provider.default_dialect for name, provider in PROVIDERS.items()}
"""The dialect a bare provider name means in ``--upstream`` (each provider's
:attr:`~polystream.dialects.ProviderSpec.default_dialect`)."""


class Upstream(msgspec.Struct, frozen=True, kw_only=True):
    """A provider (or anything speaking its dialect) the gateway calls.

    Fields:
        name: The upstream's name in routes.
        dialect: The dialect it speaks, or the WebSocket family it serves
            (``openai_realtime``).
        base_url: Its base URL (default: the provider's official one).
        api_key: Its key. Never sent to clients, never logged.
        api_key_env: An environment variable holding the key (default: the
            provider's usual one, e.g. ``OPENAI_API_KEY``).
        background: Ask an OpenAI Responses upstream for background mode, so that a
            dropped upstream stream can be resumed (``starting_after``). Interactions
            upstreams are always resumable.
        drop_fields: Top-level fields of a client's body never sent to this upstream
            in a pass-through (the client's dialect), such as ``service_tier``, which
            would let clients choose what the key's owner pays for. The response
            names the ones it dropped.
    """

    name: str
    dialect: str
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    background: bool = False
    drop_fields: tuple[str, ...] = ()

    def key(self, environ: Mapping[str, str] | None = None) -> str:
        """The upstream key: explicit, else from the environment ("" when none)."""
        if self.api_key:
            return self.api_key
        env = environ if environ is not None else os.environ
        var = self.api_key_env or PROVIDERS[upstream_provider(self.dialect)].env_key
        return env.get(var, "")


class Route(msgspec.Struct, frozen=True, kw_only=True):
    """A routing rule.

    Fields:
        model: A glob matched against the request's model (``claude-*``, ``*``).
        upstream: The upstream's name.
        rewrite: The model name to send upstream instead, if any.
    """

    model: str
    upstream: str
    rewrite: str | None = None


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Gateway limits.

    Fields:
        max_body_bytes: Largest request body (413 past it).
        max_concurrency: Streams served at once (503 with ``Retry-After`` past it).
        keepalive_seconds: Silence after which an SSE comment is sent to the client.
        slow_client_seconds: A client that does not read for this long is
            disconnected (memory stays bounded by the send buffer).
        resume_grace_seconds: After a client disconnects, keep reading the upstream
            into the journal for this long so the client can resume; 0 cancels the
            upstream at once.
        idle_timeout: Upstream silence that counts as a stall.
        max_connections: Client connections open at once (the HTTP server refuses
            those past it).
        max_reply_bytes: Most bytes a non-streaming reply may grow to (the client's
            encoded reply as the upstream's events are read): past it the upstream is
            no longer read and the client gets a 502.
    """

    max_body_bytes: int = 8 * 1024 * 1024
    max_concurrency: int = 512
    keepalive_seconds: float = 15.0
    slow_client_seconds: float = 30.0
    resume_grace_seconds: float = 0.0
    idle_timeout: float = 120.0
    max_connections: int = 1024
    max_reply_bytes: int = 32 * 1024 * 1024

    def __post_init__(self) -> None:
        # (A keep-alive period of 0 would send comments in a loop; a bound of 0 or
        # less would refuse every request or drop every client.)
        if self.max_body_bytes < 1 or self.max_concurrency < 1:
            raise ValueError("max_body_bytes and max_concurrency must be at least 1")
        if self.max_reply_bytes < 1:
            raise ValueError("max_reply_bytes must be at least 1")
        for name in ("keepalive_seconds", "slow_client_seconds", "idle_timeout"):
            value = getattr(self, name)
            if not (0 < value < math.inf):
                raise ValueError(f"{name} must be a finite number of seconds above 0")
        if not (0 <= self.resume_grace_seconds < math.inf):
            raise ValueError("resume_grace_seconds must be a finite number of seconds, 0 or more")


class Client(msgspec.Struct, frozen=True, kw_only=True):
    """A tenant: a client key the gateway accepts (in the config's ``clients``, by the
    tenant's name). The streams a tenant creates can be resumed only with its key.

    Fields:
        api_key: The key.
        api_key_env: An environment variable holding the key (read at start).
    """

    api_key: str | None = None
    api_key_env: str | None = None


DEFAULT_TENANT: Final = "default"
"""The tenant of the single ``api_key`` (``--api-key``)."""
ANONYMOUS_TENANT: Final = "anonymous"
"""The one tenant of a gateway with no client key: every client is it."""


class Tenants:
    """The client keys a gateway accepts, and the tenant each names.

    Args:
        keys: ``(tenant, key)`` pairs; none: the gateway is open, every client is
            :data:`ANONYMOUS_TENANT`.
    """

    __slots__ = ("_keys", "open")

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        self._keys = [(tenant, key.encode()) for tenant, key in keys]
        self.open = not keys

    def identify(self, presented: str | None) -> str | None:
        """The tenant whose key was presented (None: no listed key). Every key is
        compared, each in constant time, so the time taken does not say which matched."""
        if self.open:
            return ANONYMOUS_TENANT
        if presented is None:
            return None
        given = presented.encode()
        found: str | None = None
        for tenant, key in self._keys:
            if hmac.compare_digest(key, given):
                found = tenant
        return found


class GatewayConfig(msgspec.Struct, kw_only=True):
    """Everything the gateway needs (see ``docs/gateway.md`` for the file format).

    Fields:
        upstreams: The upstreams by name.
        routes: Routing rules, first match wins.
        api_key: A key clients may present, the tenant :data:`DEFAULT_TENANT`.
        clients: Client keys by tenant name. With neither ``api_key`` nor clients,
            there is no authentication, and all streams share one anonymous tenant.
        limits: Limits.
        log_socket_usage: Read each relayed WebSocket message with its family's session
            (after the message is sent) to log every reply's usage; off by default, as
            it costs a sixth to a quarter more CPU per message.
    """

    upstreams: dict[str, Upstream]
    routes: list[Route] = msgspec.field(default_factory=list)
    api_key: str | None = None
    clients: dict[str, Client] = msgspec.field(default_factory=dict)
    limits: Limits = msgspec.field(default_factory=Limits)
    log_socket_usage: bool = False

    def tenants(self, environ: Mapping[str, str] | None = None) -> Tenants:
        """The accepted keys and their tenants (client keys in ``api_key_env`` read
        from ``environ``, default the process environment).

        Raises:
            ValueError: A client without a key (or whose variable is unset or empty),
                a client named like the ``api_key``'s tenant or ``anonymous``, or one
                key given to two tenants (it could not say whose a stream is).
        """
        env = environ if environ is not None else os.environ
        keys: list[tuple[str, str]] = []
        if self.api_key:
            if DEFAULT_TENANT in self.clients:
                raise ValueError(
                    f"client {DEFAULT_TENANT!r} is the tenant of api_key: give it another name"
                )
            keys.append((DEFAULT_TENANT, self.api_key))
        for name, client in self.clients.items():
            if name == ANONYMOUS_TENANT:
                raise ValueError(
                    f"client {name!r}: the name is the open gateway's tenant; give it another"
                )
            key = client.api_key or (env.get(client.api_key_env, "") if client.api_key_env else "")
            if not key:
                where = (
                    f"environment variable {client.api_key_env} is unset or empty"
                    if client.api_key_env and not client.api_key
                    else "it has no api_key or api_key_env"
                )
                raise ValueError(f"client {name!r} has no key: {where}")
            keys.append((name, key))
        seen: dict[str, str] = {}
        for name, key in keys:
            if key in seen:
                raise ValueError(f"clients {seen[key]!r} and {name!r} have the same key")
            seen[key] = name
        return Tenants(keys)

    def route(self, model: str, dialect: str | None = None) -> tuple[Upstream, str] | None:
        """The upstream for ``model`` and the model name to send there (None: no route).
        A request of ``dialect`` that names no model goes to the first upstream of that
        dialect, if there is one."""
        if not model and dialect is not None:
            for upstream in self.upstreams.values():
                if upstream.dialect == dialect:
                    return upstream, model
        if len(self.upstreams) == 1 and not self.routes:
            return next(iter(self.upstreams.values())), model
        for route in self.routes:
            if fnmatch.fnmatchcase(model, route.model) and route.upstream in self.upstreams:
                return self.upstreams[route.upstream], route.rewrite or model
        for name, provider in PROVIDERS.items():
            if name in self.upstreams and provider.serves(model):
                return self.upstreams[name], model
        return None

    def route_socket(self, family: str, model: str) -> tuple[Upstream, str] | None:
        """The upstream of a WebSocket connection of ``family`` and the model to send
        there (None: no route). With no routes configured, the first upstream of the
        family, whatever the model; else as :meth:`route`."""
        if not self.routes:
            for upstream in self.upstreams.values():
                if upstream.dialect == family:
                    return upstream, model
        return self.route(model, family)

    def secrets(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """Every secret the gateway holds (upstream keys and its own key, then the
        client keys)."""
        keys = [u.key(environ) for u in self.upstreams.values()]
        if self.api_key:
            keys.append(self.api_key)
        env = environ if environ is not None else os.environ
        for client in self.clients.values():
            keys.append(client.api_key or env.get(client.api_key_env or "", ""))
        return [k for k in keys if k]


def family_refusal(client: str, upstream: str) -> str | None:
    """Why an upstream of dialect ``upstream`` cannot serve a client of ``client``
    (None: it can).

    A text dialect's client is served by an upstream of any text dialect, the stream
    transcoded. A media stream (speech, transcription, images) or an agent session's
    stream has no place in a chat dialect, nor a chat stream in theirs; and a media or
    agent client is served only by an upstream of its own dialect: its request (an
    audio upload, a speech input, a session) means nothing to another. (The text of a
    transcription would fit a chat stream, but a chat request carries no audio to
    transcribe: the pair is refused too.)
    """
    if client == upstream:
        return None
    if upstream in SOCKET_SPECS:
        return (
            f"the model is served by the {upstream} upstream, a WebSocket family: an HTTP "
            f"request of {client} is not relayed to it"
        )
    text_client = DIALECTS[client].family in TEXT_FAMILIES
    text_upstream = DIALECTS[upstream].family in TEXT_FAMILIES
    if text_client and text_upstream:
        return None
    family = DIALECTS[upstream].family
    if text_client:
        return (
            f"the model is served by the {upstream} upstream, whose stream is {family}: a "
            f"{family} stream cannot be turned into a chat dialect ({client})"
        )
    if text_upstream:
        return (
            f"the model is served by the {upstream} upstream, whose stream is chat: a chat "
            f"stream cannot be turned into {client} ({DIALECTS[client].family})"
        )
    return (
        f"a {client} request is served only by an upstream of its own dialect, not by "
        f"the {upstream} upstream ({family})"
    )


def upstream_provider(dialect: str) -> str:
    """The provider of an upstream's dialect or WebSocket family."""
    if dialect in SOCKET_SPECS:
        return SOCKET_SPECS[dialect].provider
    return DIALECTS[dialect].provider


def parse_upstream_spec(spec: str) -> Upstream:
    """Parse ``--upstream PROVIDER[=BASE_URL]`` (PROVIDER may also be a dialect name).

    Raises:
        ValueError: An unknown provider or dialect.
    """
    name, _, base_url = spec.partition("=")
    name = name.strip()
    if name in DEFAULT_DIALECT:
        dialect = DEFAULT_DIALECT[name]
        provider = name
    elif name in SOCKET_SPECS:
        # (Named after its family, so that it sits beside the provider's HTTP upstream.)
        return Upstream(name=name, dialect=name, base_url=base_url.strip() or None)
    elif name in DIALECTS:
        dialect = name
        provider = DIALECTS[name].provider
    else:
        known = ", ".join([*DEFAULT_DIALECT, *DIALECTS, *SOCKET_SPECS])
        raise ValueError(f"unknown upstream {name!r} (one of: {known})")
    return Upstream(name=provider, dialect=dialect, base_url=base_url.strip() or None)


def load_config(data: bytes) -> GatewayConfig:
    """Read a gateway config file (JSON).

    Raises:
        msgspec.ValidationError: The file does not match the format.
    """
    raw = msgspec.json.decode(data)
    if isinstance(raw, dict) and isinstance(raw.get("upstreams"), dict):
        for name, upstream in raw["upstreams"].items():
            if isinstance(upstream, dict):
                upstream.setdefault("name", name)
    config = msgspec.convert(raw, GatewayConfig)
    for name, upstream in config.upstreams.items():
        if upstream.dialect not in DIALECTS and upstream.dialect not in SOCKET_SPECS:
            raise msgspec.ValidationError(
                f"upstream {name!r}: unknown dialect {upstream.dialect!r}"
            )
    return config


def presented_key(dialect: str, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The key a client presented, in its dialect's usual places (the dialect's
    :class:`~polystream.dialects.AuthSpec`): OpenAI/xAI ``Authorization: Bearer`` (or
    ``x-api-key``), Anthropic ``x-api-key`` (or a bearer token), Gemini
    ``x-goog-api-key`` or ``?key=``.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    return DIALECTS[dialect].auth.presented(lower, query)


def check_key(expected: str | None, presented: str | None) -> bool:
    """Constant-time comparison; no expected key means no authentication."""
    if expected is None:
        return True
    if presented is None:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())


def scrub(text: str, secrets: Scrubber | Iterable[str]) -> str:
    """Remove every secret, any fragment of 8 or more characters of one (as providers
    echo keys: ``Incorrect API key provided: sk-proj-abc...wxyz``) and URL credentials
    from text bound for a client or a log (see :class:`polystream.scrub.Scrubber`)."""
    if not isinstance(secrets, Scrubber):
        secrets = _scrubber(tuple(secrets))
    return secrets.text(text)


@functools.lru_cache(maxsize=16)
def _scrubber(secrets: tuple[str, ...]) -> Scrubber:
    return Scrubber(secrets)


def counter_cursors(dialect: str) -> bool:
    """Whether a dialect's journal cursors are the gateway's counter ``<stream>.<n>``
    (every SSE dialect but OpenAI/xAI Responses and Interactions, whose events carry
    their own: the ``sequence_number``, the ``event_id``)."""
    return DIALECTS[dialect].resume.cursor == "counter"


def alias_id(tenant: str, dialect: str, native_id: str) -> str:
    """The journal id under which a stream's native id (the response or interaction id
    its client resumes with) leads to the stream: one per tenant and dialect, so that
    two tenants' equal native ids never meet. (A digest: any native id makes a short
    id of one alphabet, never one of the gateway's minted ids, which are 32 hex
    digits.)"""
    digest = hashlib.sha256(f"{tenant}\x00{dialect}\x00{native_id}".encode()).hexdigest()
    return "alias-" + digest[:40]


SSECursorSplitter = CursorSplitter
"""The encoders' cursor splitter (:class:`polystream.dialects._cursors.CursorSplitter`),
by its former name."""


# -- WebSocket families -------------------------------------------------------------------

SOCKET_PATHS: Final[dict[str, str]] = {
    PROVIDERS[spec.provider].prefix + urlsplit(url).path: name
    for name, spec in SOCKET_SPECS.items()
    for url in (spec.url, *spec.also_urls)
}
"""The gateway's WebSocket endpoints, path -> family: each family at the path its
provider's SDK derives from the gateway's ``base_url`` (``/openai/v1/realtime``)."""

_UNSENDABLE_CLOSE: Final = frozenset({1005, 1006, 1015})
"""Close codes that name what happened to a connection and are never sent in a close
frame (RFC 6455, 7.4.1)."""


def socket_key(
    family: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
    subprotocols: Sequence[str] = (),
) -> tuple[str | None, str | None]:
    """The key a WebSocket client presented on its handshake, and the subprotocol to
    accept (None: none).

    The key is where the family's :class:`~polystream.dialects.AuthSpec` looks
    (``Authorization: Bearer``, ``x-api-key``), else in a browser's subprotocol that
    carries one (``openai-insecure-api-key.<key>``): the subprotocol accepted is then
    the family's plain one when the client offered it (``realtime``), else the one that
    carried the key (a browser refuses a handshake that selects none of its offers).
    """
    spec = SOCKET_SPECS[family]
    lower = {k.lower(): v for k, v in headers.items()}
    key = spec.auth.presented(lower, query)
    if key:
        return key, None
    for template in spec.browser_subprotocols:
        head, marker, tail = template.partition("{key}")
        if not marker:
            continue
        for offered in subprotocols:
            if (
                len(offered) > len(head) + len(tail)
                and offered.startswith(head)
                and offered.endswith(tail)
            ):
                plain = (p for p in spec.browser_subprotocols if "{key}" not in p)
                accepted = next((p for p in plain if p in subprotocols), offered)
                return offered[len(head) : len(offered) - len(tail)], accepted
    return None, None


def socket_model(family: str, query: Mapping[str, str]) -> str | None:
    """The model a WebSocket connection names in its URL's query (``?model=``), ``""``
    when it names none and no client message can (the connection is routed as a
    request without a model), or None when the model is to be read from the client's
    first message that names one (see :func:`message_model`)."""
    spec = SOCKET_SPECS[family]
    if "model" in spec.query and query.get("model"):
        return query["model"]
    return None if spec.model_messages else ""


def message_model(family: str, text: str) -> tuple[dict[str, Any], str, str] | None:
    """A client message of ``family`` that names a model (``response.create``; a
    message without a ``type`` is named by its key: Gemini Live's ``setup``): the
    message, its model (``""`` when it leaves the field out; without the family's
    :attr:`~polystream.dialects._socket_spec.SocketSpec.model_prefix`) and the field's
    dotted path; None for any other message. Only a text holding ``"model"`` is read."""
    spec = SOCKET_SPECS[family]
    if not spec.model_messages or '"model"' not in text:
        return None
    try:
        message = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    if not isinstance(message, dict):
        return None
    kind = message.get("type") if "type" in message else next(iter(message), None)
    path = spec.model_messages.get(kind)  # type: ignore[arg-type]
    if path is None:
        return None
    value: Any = message
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    model = value if isinstance(value, str) else ""
    return message, model.removeprefix(spec.model_prefix) if spec.model_prefix else model, path


def model_name(family: str, model: str) -> str:
    """A model as ``family``'s messages name it (Gemini Live's ``models/`` before it)."""
    prefix = SOCKET_SPECS[family].model_prefix
    return model if not prefix or "/" in model else prefix + model


def with_model(message: dict[str, Any], path: str, model: str) -> str:
    """``message`` with its model field (at the dotted ``path``) set to ``model``, as
    JSON text."""
    *parents, last = path.split(".")
    target = message
    for part in parents:
        inner = target.get(part)
        if not isinstance(inner, dict):
            inner = target[part] = {}
        target = inner
    target[last] = model
    return msgspec.json.encode(message).decode()


def upstream_socket_url(family: str, base_url: str | None, query: Mapping[str, str]) -> str:
    """The URL of an upstream of ``family``: its base URL (default: the provider's) with
    the family's endpoint after it, as the provider's SDK derives it (``http`` becomes
    ``ws``, ``https`` ``wss``), and ``query``."""
    spec = SOCKET_SPECS[family]
    if base_url:
        base = urlsplit(base_url)
        official = urlsplit(PROVIDERS[spec.provider].base_url).path.rstrip("/")
        endpoint = spec.path[len(official) :] if spec.path.startswith(official) else spec.path
        scheme = {"http": "ws", "https": "wss"}.get(base.scheme, base.scheme)
        url = urlunsplit((scheme, base.netloc, base.path.rstrip("/") + endpoint, base.query, ""))
    else:
        url = spec.url
    if query:
        url += ("&" if "?" in url else "?") + urlencode(dict(query))
    return url


def socket_refusal(family: str, upstream: str, name: str | None = None) -> str | None:
    """Why an upstream of dialect or family ``upstream`` (named ``name`` in the
    configuration) cannot serve a WebSocket client of ``family`` (None: it can: it is
    of that family, or both are conversation families the gateway translates between,
    see :mod:`polystream.realtime._bridge`)."""
    if family == upstream:
        return None
    served = f"the model is served by the {name or upstream} upstream ({upstream}"
    if upstream not in SOCKET_SPECS:
        return (
            f"{served}, an HTTP dialect), and a {family} connection is served only by a "
            "WebSocket upstream"
        )
    why = bridge_refusal(family, upstream)
    if why is None:
        return None
    return (
        f"{served}, a WebSocket family), and a {family} connection cannot be translated "
        f"to it: {why}"
    )


def socket_denial(path: str, status: int, message: str, *, kind: str | None = None) -> bytes:
    """The JSON body of a refused WebSocket handshake to ``path``: an HTTP error in the
    shape of the provider under whose prefix the path is (OpenAI's outside them)."""
    provider = provider_of_path(path)
    dialect = provider.default_dialect if provider is not None else next(iter(DIALECTS))
    return msgspec.json.encode(error_body(dialect, status, message, kind=kind))


def socket_error(
    family: str,
    status: int,
    message: str,
    *,
    kind: str | None = None,
    code: str | None = None,
    param: str | None = None,
) -> str:
    """An in-band ``error`` message of ``family`` (its
    :attr:`~polystream.dialects._socket_spec.SocketSpec.error_shape`), as JSON text."""
    spec = SOCKET_SPECS[family]
    if spec.error_shape == "message":
        return msgspec.json.encode({"type": "error", "message": message}).decode()
    dialect = PROVIDERS[spec.provider].default_dialect
    error = error_body(dialect, status, message, kind=kind, param=param, code=code)["error"]
    body: dict[str, Any] = {"type": "error"}
    if spec.error_shape == "responses":
        body["status"] = status
        body["error"] = error
    else:
        body["error"] = {
            "type": error.get("type"),
            "code": error.get("code"),
            "message": message,
            "param": error.get("param"),
            "event_id": None,
        }
    return msgspec.json.encode(body).decode()


def scrub_socket_message(text: str, secrets: Scrubber) -> str:
    """An upstream's text message as a client may have it: an ``error`` message's
    strings, and the ``error`` objects of any other message (a failed reply's), without
    secrets (see :class:`~polystream.scrub.Scrubber`). Everything else, and a message
    with nothing to remove, is returned as it is, the same string.

    Only a text holding an ``"error"`` key that is not null (or a ``type`` of
    ``error``) is decoded: the model's output is never scrubbed.
    """
    if '"error"' not in text:
        return text
    if text.count('"error"') == text.count('"error":null') + text.count('"error": null'):
        return text
    try:
        message = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return secrets.text(text)  # (not JSON: nothing of it is the model's structure)
    if not isinstance(message, dict):
        return text
    if message.get("type") == "error":
        scrubbed = secrets.value(message)
    else:
        scrubbed = _scrub_errors(message, secrets, 0)
    return text if scrubbed == message else msgspec.json.encode(scrubbed).decode()


def _scrub_errors(value: Any, secrets: Scrubber, depth: int) -> Any:
    """``value`` with the value of every ``error`` key in it scrubbed."""
    if depth > 32:
        return value
    if isinstance(value, dict):
        return {
            k: secrets.value(v)
            if k == "error" and v is not None
            else _scrub_errors(v, secrets, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_scrub_errors(v, secrets, depth + 1) for v in value]
    return value


def relayed_close_code(code: int | None, *, upstream: bool) -> int:
    """The close code sent on for a connection that closed with ``code``: its own,
    but for the codes no close frame carries. An upstream that closed without a code
    (1005) closes its client with 1000; one lost without a close (1006, or a failed
    TLS, 1015) with 1011, after which a client may reconnect. A client that closed
    without a code, or went without a close, has its upstream closed with 1001 (going
    away): uvicorn tells the two apart by neither."""
    if code is None or code in _UNSENDABLE_CLOSE:
        if not upstream:
            return 1001
        return 1000 if code == 1005 else 1011
    return code
