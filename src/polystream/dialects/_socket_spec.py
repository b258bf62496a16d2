"""What a WebSocket family is, as data: the descriptor its future shells read (the
socket client, the emulator, the gateway), beside the sans-I/O session in its folder.

This module sits at the bottom of :mod:`polystream.dialects`, with :mod:`._spec`.
"""

from __future__ import annotations

from dataclasses import dataclass

from polystream.dialects._spec import AuthSpec

__all__ = ["SocketSpec"]


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
        reply_dialect: The HTTP dialect whose stream each reply is, when the family's
            replies are another API's streams (the Responses WebSocket's are
            ``openai_responses`` streams); its requests are that dialect's bodies.
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
    reply_dialect: str | None = None
