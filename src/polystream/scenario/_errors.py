"""Error answers in each provider's own shape, for the emulator's HTTP error answers.

The body comes from :func:`polystream.dialects._errors.error_body`, through the
endpoint's dialect's :class:`~polystream.dialects._spec.ErrorSpec` (or, for a path under
a provider's prefix that is no endpoint, the provider's ``error_shape``). This module adds
the headers: ``Retry-After`` and the request id.
"""

from __future__ import annotations

import math
from typing import Any, Final, get_args

import msgspec

from polystream.dialects import DIALECTS, PROVIDERS
from polystream.dialects import provider_of_path as _provider_spec_of_path
from polystream.dialects._errors import DEFAULT_MESSAGES, error_body
from polystream.dialects._spec import ErrorShape, ErrorSpec

__all__ = [
    "ANTHROPIC_SHAPE",
    "DEFAULT_MESSAGES",
    "GOOGLE_SHAPE",
    "OPENAI_SHAPE",
    "ErrorAnswer",
    "error_answer",
    "provider_of_path",
]

OPENAI_SHAPE, ANTHROPIC_SHAPE, GOOGLE_SHAPE = get_args(ErrorShape)
"""The three error-body shapes, as :data:`~polystream.dialects._spec.ErrorShape` lists
them: the emulator words some refusals per shape (an Anthropic-shaped endpoint words a
missing field as Anthropic's API does)."""

_REQUEST_ID_HEADERS: Final[dict[str, str]] = {
    OPENAI_SHAPE: "x-request-id",
    ANTHROPIC_SHAPE: "request-id",
}
"""The request-id header each error shape's SDK reads (Google's carries none)."""

_encoder: Final = msgspec.json.Encoder()


class ErrorAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """An HTTP error answer: status, headers and JSON body bytes."""

    status: int
    body: bytes
    headers: dict[str, str]


def provider_of_path(path: str) -> str | None:
    """The name of the provider whose prefix starts ``path`` (``/openai/...`` ->
    ``openai``), or None."""
    provider = _provider_spec_of_path(path)
    return provider.name if provider is not None else None


def _errors_of(provider: str | None, dialect: str | None) -> ErrorSpec | None:
    if dialect is not None and dialect in DIALECTS:
        return DIALECTS[dialect].errors
    if provider is not None and provider in PROVIDERS:
        shape = PROVIDERS[provider].error_shape
        return ErrorSpec(shape, param_field=shape == OPENAI_SHAPE)
    return None


def error_answer(
    provider: str | None,
    status: int,
    message: str | None = None,
    *,
    dialect: str | None = None,
    kind: str | None = None,
    param: str | None = None,
    code: str | None = None,
    retry_after: float | None = None,
    request_id: str = "req_emulator",
) -> ErrorAnswer:
    """Build the error answer a provider sends for ``status``.

    Args:
        provider: A registered provider's name, or None for a generic
            ``{"error": {"message", "type"}}`` body.
        status: The HTTP status.
        message: The message (default: :data:`DEFAULT_MESSAGES`).
        dialect: The dialect of the endpoint; its error spec decides the shape (an
            xAI ``/v1/messages`` endpoint answers in Anthropic's).
        kind: The error's unified kind; names the error where the status does not.
        param: OpenAI's ``param`` (a shape without the field leaves it out).
        code: OpenAI's ``code`` (default: per status).
        retry_after: Seconds for ``Retry-After`` (and ``retry-after-ms``).
        request_id: The request id header / field.
    """
    headers = {"content-type": "application/json"}
    if retry_after is not None:
        # Retry-After takes whole seconds (RFC 9110 §10.2.3); the OpenAI and Anthropic
        # SDKs also read the finer retry-after-ms.
        headers["retry-after"] = str(max(0, math.ceil(retry_after)))
        headers["retry-after-ms"] = str(max(0, round(retry_after * 1000)))
    errors = _errors_of(provider, dialect)
    body: dict[str, Any]
    if errors is None:
        text = message or DEFAULT_MESSAGES.get(status, f"HTTP {status}")
        body = {"error": {"message": text, "type": "not_found" if status == 404 else "error"}}
        return ErrorAnswer(status=status, body=_encoder.encode(body), headers=headers)
    id_header = _REQUEST_ID_HEADERS.get(errors.shape)
    if id_header is not None:
        headers[id_header] = request_id
    body = error_body(
        errors,
        status,
        message,
        kind=kind,
        # The emulator's shapes without a param field have never named it in the
        # message: their SDK tests pin the provider's own wording.
        param=param if errors.param_field else None,
        code=code,
        request_id=request_id if errors.shape == ANTHROPIC_SHAPE else None,
    )
    return ErrorAnswer(status=status, body=_encoder.encode(body), headers=headers)
