"""What a WebSocket family is, as data: the descriptor its future shells read (the
socket client, the emulator, the gateway), beside the sans-I/O session in its folder.

This module sits at the bottom of :mod:`polystream.dialects`, with :mod:`._spec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from polystream.dialects._spec import AuthSpec

__all__ = ["RECOVERABLE_CLOSE_CODES", "SocketErrorShape", "SocketSpec"]

RECOVERABLE_CLOSE_CODES: Final = frozenset({1001, 1005, 1006, 1011, 1012, 1013, 1015})
"""The close codes after which the official OpenAI SDK reconnects (RFC 6455 7.4.1:
going away, no status, abnormal closure, internal error, service restart, try again
later, TLS failure)."""

SocketErrorShape = Literal["realtime", "responses", "message"]
"""The shape of a family's in-band ``error`` message: the Realtime API's
``{"type": "error", "error": {type, code, message, param, event_id}}``, the Responses
WebSocket's wrapped ``{"type": "error", "status": N, "error": {type, code, message,
param}}``, or xAI's speech sockets' ``{"type": "error", "message": ...}``."""


@dataclass(frozen=True, slots=True)
class SocketSpec:
    """A WebSocket family: where it is, how a client authenticates, how long it lives.

    Attributes:
        name: The family's name (its folder under ``polystream/dialects/``).
        provider: ``openai``, ``xai`` or ``gemini``.
        description: One line for humans.
        url: The endpoint (``wss://api.openai.com/v1/realtime``).
        query: The query parameters a connection may take (``model``, ``call_id``).
        auth: How a server-side client presents its key.
        browser_subprotocols: The subprotocols a browser offers instead of a header,
            ``{key}`` standing for an ephemeral key.
        max_duration: The longest a connection or session lives, in seconds.
        lanes: How many replies may run side by side on one connection (1: one at a
            time).
        reconnect_codes: The close codes after which a client may reconnect (empty:
            never).
        context: What a client keeps to carry a connection's context over to a new
            one: ``conversation`` (the conversation and the session updates, replayed
            on the new socket: the service keeps nothing), ``responses`` (the replies
            of each chain, for a full-history retry), ``resumption`` (the service
            keeps the session: the latest resumption handle, and the messages the
            service has not yet acknowledged, sent again on the new socket), or None.
        setup_once: The configuration is one setup message, the connection's first,
            sent once (its model included): a client gives the model to the session,
            which writes the setup with the first command.
        text_config: The :meth:`configure` fields that make the replies text only.
        emulated: The family's binding has a ``Server`` that ``polystream serve`` runs
            (its endpoint is served under the provider's prefix).
        reply_dialect: The HTTP dialect whose stream each reply is, when the family's
            replies are another API's streams (the Responses WebSocket's are
            ``openai_responses`` streams); its requests are that dialect's bodies.
        answer: What the emulator answers a turn with: ``reply`` (the scenario's reply
            to the turn's text), ``speech`` (the turn's own text said aloud: text to
            speech) or ``transcript`` (the scenario's text as the transcript of the
            turn's audio: speech to text).
        model_messages: The client messages that name the model, by type, each with
            the dotted path of its model field (``{"response.create": "model"}``):
            where a gateway reads the model of a connection whose URL names none.
        error_shape: The shape of its in-band ``error`` messages (see
            :data:`SocketErrorShape`).
        model_prefix: What the family's messages put before a model's name
            (``models/``), left out to route it.
        bridge: Its conversations translate to and from another such family's through
            the unified model (its server can be a bridge's client side, its session
            a bridge's upstream: see :mod:`polystream.realtime._bridge`).
        also_urls: More endpoints of the same family (other API versions), served
            alike.
        token_url: The endpoint that takes an ephemeral token instead of a key.
        token_auth: How a client presents an ephemeral token there: a header whose
            value is ``<token_scheme> <token>``, or a query parameter.
        token_scheme: The scheme word before the token in :attr:`token_auth`'s header.
        token_path: The HTTP path (``POST``) that mints ephemeral tokens, under the
            provider's prefix.
        token_prefix: How an ephemeral token begins: a client given one as its key
            connects to :attr:`token_url` and presents it there.
    """

    name: str
    provider: str
    description: str
    url: str
    auth: AuthSpec
    query: tuple[str, ...] = ()
    browser_subprotocols: tuple[str, ...] = ()
    max_duration: float | None = None
    lanes: int = 1
    reconnect_codes: frozenset[int] = frozenset()
    context: Literal["conversation", "responses", "resumption"] | None = None
    setup_once: bool = False
    text_config: Mapping[str, Any] = field(default_factory=dict)
    reply_dialect: str | None = None
    emulated: bool = False
    answer: Literal["reply", "speech", "transcript"] = "reply"
    model_messages: Mapping[str, str] = field(default_factory=dict)
    error_shape: SocketErrorShape = "realtime"
    bridge: bool = False
    model_prefix: str = ""
    also_urls: tuple[str, ...] = ()
    token_url: str | None = None
    token_auth: AuthSpec | None = None
    token_scheme: str = "Token"
    token_path: str | None = None
    token_prefix: str | None = None

    @property
    def path(self) -> str:
        """The endpoint's path (``/v1/realtime``): served under the provider's prefix
        (``/openai/v1/realtime``), where the provider's SDK derives it from its
        ``base_url``."""
        return urlsplit(self.url).path

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path it is served at: :attr:`path`, then those of :attr:`also_urls`
        and :attr:`token_url`."""
        urls = (self.url, *self.also_urls, *((self.token_url,) if self.token_url else ()))
        return tuple(urlsplit(url).path for url in urls)
