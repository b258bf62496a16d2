"""Native request bodies <-> the unified :class:`~polystream.request.model.Request`.

``parse_request(dialect, body)`` reads a native request body (a client's request
arriving at the emulator or the gateway). ``build_request(dialect, request)`` writes
one (the client, or the gateway calling its upstream). Both are total over the fields
the unified model names. A body that is malformed for its dialect raises
:class:`RequestError` naming the offending parameter, and the shells answer with the
provider's own 400 error body.

Each request family's codec lives with its dialects (``_responses/request.py``,
``_chat/request.py``, ``_messages/request.py``, ``gemini_generate/request.py``,
``gemini_interactions/request.py`` under :mod:`polystream.dialects`), and each dialect's
binding names its family's as ``request``
(:meth:`~polystream.dialects.DialectSpec.request_codec`). This module reaches them
through the registry and does what is the same for all: the fields a parser did not
read (kept as :attr:`Request.extra` and sent again to the dialect they came from), the
type check of a parsed request, and the body a gateway passes through.

Opaque state in the history is carried where each family has a place for it: Responses'
``reasoning`` items (``encrypted_content``, ``id``, summary text), Chat's
``reasoning_content`` on assistant messages (text only), Messages' ``thinking`` blocks
with their ``signature`` and ``redacted_thinking`` data, Gemini's ``thoughtSignature``
on the part it belongs to, and Interactions' ``thought`` content with its ``signature``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from polystream.dialects import DIALECTS, get_dialect
from polystream.dialects._spec import RequestCodec
from polystream.errors import LocalProtocolError, RequestError
from polystream.request_model import NativeRequest, Request

__all__ = [
    "NativeRequest",
    "RequestError",
    "build_request",
    "extra_fields",
    "parse_request",
    "pass_through_body",
    "sent_extra",
]


def _codec(dialect: str) -> RequestCodec:
    """The request codec of ``dialect``'s family.

    Raises:
        RequestError: ``dialect`` is not a registered dialect.
    """
    try:
        spec = get_dialect(dialect)
    except LocalProtocolError:
        raise RequestError(f"no request codec for dialect {dialect!r}") from None
    return spec.request_codec()


def parse_request(dialect: str, body: Any, *, model: str | None = None) -> Request:
    """Parse a native request body into a :class:`Request`.

    Args:
        dialect: The dialect the body is written in.
        body: The parsed JSON body.
        model: The model from the URL path (Gemini ``models/{model}:...``).

    Raises:
        RequestError: The body is malformed for the dialect.
    """
    if not isinstance(body, dict):
        raise RequestError("expected an object", param="body")
    codec = _codec(dialect)
    request = codec.parse(body, model=model)
    extra = _unread(body, codec)
    if extra is not None:
        codec.read_whole(request, extra)
    request.extra = extra or None
    request.origin = dialect
    return _checked(request)


def _unread(body: dict[str, Any], codec: RequestCodec) -> dict[str, Any] | None:
    """The fields of ``body`` its parser did not read (null ones left out), for
    :attr:`Request.extra`; None when there are none."""
    read = codec.read_fields
    extra = {k: v for k, v in body.items() if k not in read and v is not None}
    config = codec.config_read
    if config is not None:
        name, fields = config
        settings = body.get(name)
        if isinstance(settings, dict):
            rest = {k: v for k, v in settings.items() if k not in fields and v is not None}
            if rest:
                extra[name] = rest
    return extra or None


def sent_extra(dialect: str, request: Request) -> bool:
    """Whether :func:`build_request` sends ``request.extra`` to ``dialect`` (the dialect
    it was parsed from, or any when it was made in code)."""
    return bool(request.extra) and request.origin in (None, dialect)


def extra_fields(request: Request) -> list[str]:
    """The names of the fields in ``request.extra``, sorted (a generation config's
    as ``generationConfig.responseSchema``)."""
    if not request.extra:
        return []
    origins = [DIALECTS[request.origin]] if request.origin in DIALECTS else list(DIALECTS.values())
    configs = {
        config[0] for spec in origins if (config := spec.request_codec().config_read) is not None
    }
    names: list[str] = []
    for name, value in request.extra.items():
        if name in configs and isinstance(value, dict):
            names += (f"{name}.{field}" for field in value)
        else:
            names.append(name)
    return sorted(names)


def _checked(request: Request) -> Request:
    """``request`` with every field of the type the model declares: the parsers check
    what they read to build it, and this catches a value of the wrong type they store
    as it is (an id, a text, an effort), which would otherwise fail later, untyped,
    while a body is built from it."""
    try:
        return msgspec.convert(msgspec.to_builtins(request), Request)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at `$.")
        raise RequestError(message, param=where.rstrip("`") or None) from None
    except TypeError as exc:  # a value no JSON body holds (a set, an object)
        raise RequestError(str(exc)) from None


def build_request(dialect: str, request: Request, *, framing: str = "sse") -> NativeRequest:
    """Build the native request for ``dialect`` from a :class:`Request`.

    Raises:
        RequestError: The request holds something the dialect cannot express.
    """
    native = _codec(dialect).build(request, framing=framing)
    if request.extra and sent_extra(dialect, request):
        _add_extra(native.body, request.extra)
    return native


def pass_through_body(dialect: str, body: dict[str, Any], built: dict[str, Any]) -> dict[str, Any]:
    """The body to send for a request parsed from ``body`` and built again as ``built``
    for the same ``dialect``: ``body`` as it came, every field of it (nested ones too,
    such as Anthropic's ``cache_control`` or a Chat message's ``name``), but for the
    fields the caller decides (the codec's ``decided``), taken from ``built``: the
    model, streaming, and Chat's ``stream_options``, Responses' ``background`` and
    ``include``, Interactions' ``background`` where ``built`` sets them (an object both
    have is joined, ``built``'s fields winning; Responses' ``include`` lists are
    joined). A body that ``built`` makes a background one (Responses, Interactions)
    loses a ``store: false``: background responses are stored.

    Raises:
        RequestError: No request codec for ``dialect``.
    """
    codec = _codec(dialect)
    out = dict(body)
    for name in codec.decided:
        value = built.get(name)
        if value is None:
            continue
        given = out.get(name)
        if isinstance(value, dict) and isinstance(given, dict):
            out[name] = {**given, **value}
        elif isinstance(value, list) and isinstance(given, list):
            out[name] = given + [item for item in value if item not in given]
        else:
            out[name] = value
    if built.get("background") and out.get("store") is False:
        # A background response or interaction is stored (to be read back): the
        # caller's background wins over the client's store.
        del out["store"]
    return out


def _add_extra(body: dict[str, Any], extra: dict[str, Any]) -> None:
    """Add the fields of ``extra`` that the built ``body`` does not set (inside an object
    both have, such as Gemini's ``generationConfig``, field by field): what the unified
    request says wins."""
    for name, value in extra.items():
        built = body.get(name)
        if built is None:
            body[name] = value
        elif isinstance(built, dict) and isinstance(value, dict):
            body[name] = {**value, **built}
