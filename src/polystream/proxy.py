"""The older name of :mod:`polystream.gateway_core`, the gateway's sans-I/O core."""

from __future__ import annotations

from polystream.gateway_core import (
    ANONYMOUS_TENANT,
    DEFAULT_DIALECT,
    DEFAULT_TENANT,
    Client,
    GatewayConfig,
    Limits,
    Route,
    SSECursorSplitter,
    Tenants,
    Upstream,
    alias_id,
    check_key,
    counter_cursors,
    family_refusal,
    load_config,
    parse_upstream_spec,
    presented_key,
    scrub,
)

__all__ = [
    "ANONYMOUS_TENANT",
    "DEFAULT_DIALECT",
    "DEFAULT_TENANT",
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
    "parse_upstream_spec",
    "presented_key",
    "scrub",
]
