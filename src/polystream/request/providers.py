"""Where each dialect lives and how it authenticates; provider error bodies both ways.

The facts are the dialects' own (:mod:`polystream.dialects`, each folder's ``spec.py``);
these functions read them for the client and the gateway (shells), which address
upstreams, and for the emulator and the gateway, which answer errors in each provider's
own shape (:mod:`polystream.dialects._errors`).
"""

from __future__ import annotations

from typing import Any

from polystream.dialects import PROVIDERS, get_dialect, provider_of
from polystream.dialects._errors import error_body as _error_body
from polystream.dialects._errors import error_from_body
from polystream.dialects._spec import ProviderSpec
from polystream.events import kind_for_status

__all__ = [
    "PROVIDERS",
    "ProviderInfo",
    "auth_headers",
    "error_body",
    "error_from_body",
    "kind_for_status",
    "provider_of",
]

ProviderInfo = ProviderSpec
"""A provider's HTTP facts (:class:`polystream.dialects._spec.ProviderSpec`)."""


def auth_headers(dialect: str, api_key: str) -> dict[str, str]:
    """The headers that authenticate a request in ``dialect``."""
    return get_dialect(dialect).auth.headers(api_key)


def error_body(
    dialect: str,
    status: int,
    message: str,
    *,
    kind: str | None = None,
    param: str | None = None,
    code: str | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """The provider's own JSON error body for ``dialect`` (see
    :func:`polystream.dialects._errors.error_body`)."""
    return _error_body(
        get_dialect(dialect).errors,
        status,
        message,
        kind=kind,
        param=param,
        code=code,
        request_id=request_id,
    )
