"""What a dialect is, as data: the descriptor every shell reads.

A dialect folder ``polystream/dialects/<name>/`` holds two modules besides its code:

* ``spec.py`` — one :class:`DialectSpec`, ``SPEC``: its provider, framings, routes,
  authentication, error shape, resume cursors, detection hints, stream traits and reply
  shapes. Data only, so that reading the registry imports no decoder.
* ``binding.py`` — the code: ``Decoder``, ``Encoder``, ``rebuild`` and ``request`` (its
  family's :class:`RequestCodec`), imported on first use through
  :meth:`DialectSpec.binding`.

The registry (:mod:`polystream.dialects`) lists the folders, one line each. The request
codecs, the emulator, the gateway, the client and the command line ask the registry and
keep no table of dialect names of their own.

This module sits at the bottom of :mod:`polystream.dialects`: it imports no dialect.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from polystream.errors import LocalProtocolError

if TYPE_CHECKING:
    from polystream.dialects._base import DialectDecoder, DialectEncoder
    from polystream.events import Event
    from polystream.request_model import NativeRequest, Request

__all__ = [
    "Action",
    "AuthSpec",
    "CursorMode",
    "DetectSpec",
    "DialectSpec",
    "ErrorShape",
    "ErrorSpec",
    "ProviderSpec",
    "ReplySpec",
    "RequestCodec",
    "ResumeSpec",
    "RouteMatch",
    "RouteSpec",
    "StreamSpec",
]

SpecFraming = Literal["sse", "json_array", "raw"]
ErrorShape = Literal["openai", "anthropic", "google"]
"""The three error-body shapes: OpenAI's ``{"error": {message, type, param, code}}``
(OpenAI and xAI), Anthropic's ``{"type": "error", "error": {type, message}}`` (Anthropic
and xAI ``/v1/messages``), Google's ``{"error": {code, message, status}}`` (Gemini)."""
Action = Literal["create", "resume", "generate", "send", "subscribe"]
"""What a route does: start a stream or a unary reply (``create``), read a stored
stream again from a cursor (``resume``), Gemini's unary ``generateContent``
(``generate``: ``create`` with the stream chosen by the URL, not the body), hand input
to a running session named in the path (``send``: answered at once, the session's reply
comes on its stream), or follow a session's events as they come (``subscribe``)."""
CursorMode = Literal["sequence_number", "event_id", "counter"]
"""Where a stream's resume cursor comes from: the ``sequence_number`` of each event
(Responses), its ``event_id`` (Interactions), or a counter the gateway keeps."""


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """One HTTP endpoint of a dialect, relative to its provider's prefix.

    Attributes:
        method: ``GET`` or ``POST``.
        path: The path template under :attr:`ProviderSpec.prefix`; ``{name}`` matches
            one path segment (``/v1/responses/{id}``); ``{model}:verb`` matches a
            segment ending in ``:verb``.
        action: What the endpoint does (see :data:`Action`).
        stream: Whether the endpoint streams regardless of the body (Gemini's
            ``streamGenerateContent``: True; ``generateContent``: False); None when the
            body's ``stream`` decides.
        versions: The values ``{version}`` may take (empty: the path has none).
        form_file: The endpoint takes a ``multipart/form-data`` body, and this is the
            field of its (first) file part (``file``, ``image``); None: a JSON body.
        operation: What the endpoint does where a dialect's routes differ in it (OpenAI
            images: ``generation`` or ``edit``, which names the stream's events).
    """

    method: Literal["GET", "POST"]
    path: str
    action: Action = "create"
    stream: bool | None = None
    versions: frozenset[str] = frozenset()
    form_file: str | None = None
    operation: str | None = None


@dataclass(frozen=True, slots=True)
class RouteMatch:
    """A request path matched to a dialect's route: the dialect, the route, and the
    values of the path's ``{name}`` segments."""

    dialect: str
    route: RouteSpec
    params: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class AuthSpec:
    """How a request to the dialect's endpoint carries its key.

    Attributes:
        header: The header a client sends the key in (lowercase).
        bearer: The header's value is ``Bearer <key>``.
        accepts: Where a presented key is looked for, in order: a header name
            (``x-api-key``), ``bearer`` (``Authorization: Bearer``) or ``?<name>``
            (a query parameter). Empty: only :attr:`header`.
        extra: Headers every request carries besides (Anthropic: ``anthropic-version``).
    """

    header: str
    bearer: bool = False
    accepts: tuple[str, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)

    def headers(self, api_key: str) -> dict[str, str]:
        """The headers that authenticate a request with ``api_key``."""
        out = {self.header: f"Bearer {api_key}" if self.bearer else api_key}
        out.update(self.extra)
        return out

    def presented(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        """The key a client presented (``headers`` with lowercase names), or None."""
        for place in self.accepts or (("bearer",) if self.bearer else (self.header,)):
            if place == "bearer":
                auth = headers.get("authorization", "")
                if auth[:7].lower() == "bearer ":
                    return auth[7:].strip()
            elif place[:1] == "?":
                if place[1:] in query:
                    return query[place[1:]]
            elif place in headers:
                return headers[place]
        return None


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """How the dialect's endpoints answer an error.

    Attributes:
        shape: The body shape (see :data:`ErrorShape`).
        param_field: The shape has a ``param`` field; otherwise the parameter is
            written into the message (``"... (messages[0].role)"``).
        overloaded_status: The status of an overloaded answer (Anthropic's 529,
            elsewhere 503).
        request_id_field: The body carries the request id (Anthropic's shape).
    """

    shape: ErrorShape
    param_field: bool
    overloaded_status: int = 503
    request_id_field: bool = False


@dataclass(frozen=True, slots=True)
class ResumeSpec:
    """How an interrupted stream of the dialect is read again.

    Attributes:
        cursor: Where each event's cursor comes from (see :data:`CursorMode`).
        id_lines: With a counter cursor, the gateway writes it into each event as an
            SSE ``id:`` line (False where the client's reader rejects ``id:`` lines:
            google-genai).
        request_path: The path of the provider's own resume request, under its base URL
            (``/responses/{id}``); None when the provider has none.
        cursor_param: Its query parameter that takes the cursor (``starting_after``,
            ``last_event_id``).
        client_resume: The client resumes a cut stream from the provider itself
            (verified against the provider's documentation).
        needs_background: The provider keeps a stream to resume only for a request
            made with ``background: true``.
    """

    cursor: CursorMode
    id_lines: bool = False
    request_path: str | None = None
    cursor_param: str | None = None
    client_resume: bool = False
    needs_background: bool = False


@dataclass(frozen=True, slots=True)
class DetectSpec:
    """How the first event of an SSE stream shows the dialect (``dialect="auto"``).

    An event is claimed when its name or ``type`` is in :attr:`names` or starts with
    one of :attr:`prefixes`, or its data object has one of :attr:`keys`, or its
    ``object`` is one of :attr:`objects`. Dialects are tried in :attr:`order`; one
    with a :attr:`model_prefix` claims the event only when the model at
    :attr:`model_path` starts with it (xAI's siblings of the OpenAI and Anthropic
    dialects: the same events, a ``grok`` model).

    :attr:`media_types` claims a body that is not a stream of events but a media file
    (the audio of a speech request): a ``Content-Type`` it names (an entry ending in
    ``/`` names every subtype: ``audio/``), or the first bytes of such a file
    (:func:`polystream.audio.sniff_audio`). The dialect then decodes in its ``raw``
    framing, and its decoder takes that media type as its ``content_type`` option.
    """

    order: int
    names: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()
    model_path: tuple[str, ...] = ()
    model_prefix: str | None = None
    media_types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """How the gateway streams the dialect to a client.

    Attributes:
        keepalive: What it sends during an upstream silence (empty: nothing; the
            google-genai reader parses every line of a generate stream as data).
        relays_upstream_keepalive: An upstream's own keep-alive is transcoded for
            the client (its SDK skips a ``ping`` event or a comment).
        ends_aborted: A failed stream ends with an aborted transfer after its
            in-band error (no terminal error event a reader takes as the end).
    """

    keepalive: bytes = b": keep-alive\n"
    relays_upstream_keepalive: bool = False
    ends_aborted: bool = False


@dataclass(frozen=True, slots=True)
class ReplySpec:
    """The shapes of the dialect's replies, for the emulator and the demo.

    Attributes:
        id_prefix: The reply id's prefix (``resp_``, ``chatcmpl-``, ``msg_``).
        call_id_prefix: A tool call id's prefix.
        item_ids: Reasoning and message blocks have ids (output items).
        signature_state: A reasoning block has a place for its signature.
        demo_model: The model the demo asks for.
        model_prefixes: Model names the emulator knows for the dialect besides its
            provider's (``tts-``, ``whisper-``, ``dall-e-``).
    """

    id_prefix: str
    call_id_prefix: str
    item_ids: bool = False
    signature_state: bool = True
    demo_model: str = ""
    model_prefixes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """A provider's HTTP facts.

    Attributes:
        name: ``openai``, ``anthropic``, ``xai`` or ``gemini``.
        base_url: The default base URL (what the official SDK uses).
        env_key: The environment variable holding the API key.
        request_id_header: The response header carrying the request id.
        prefix: Where the emulator and the gateway serve its dialects
            (``/openai/v1/responses``: the prefix is ``/openai``).
        model_prefixes: The model names it serves, as prefixes (the gateway's
            default routes; the emulator's known models).
        default_dialect: The dialect its bare name means (``--upstream openai``).
        error_shape: The shape of its error bodies (for a path under its prefix that
            matches no route).
        default_socket: The WebSocket family its bare name means for a realtime turn
            (``polystream call openai --realtime``); None: it has none.
    """

    name: str
    base_url: str
    env_key: str
    request_id_header: str
    prefix: str
    model_prefixes: tuple[str, ...]
    default_dialect: str
    error_shape: ErrorShape
    default_socket: str | None = None

    def serves(self, model: str) -> bool:
        """Whether ``model`` is one of the provider's model names."""
        return model.startswith(self.model_prefixes)


_LOADED: dict[str, ModuleType] = {}
"""The dialects' bindings imported so far, by name."""


@dataclass(frozen=True, slots=True)
class DialectSpec:
    """A registered dialect: what it is, where it is served and how it behaves.

    Attributes:
        name: The dialect name used in the API, the CLI and fixture folders.
        provider: ``openai``, ``anthropic``, ``xai`` or ``gemini``.
        family: The request family: dialects of one family share the request body
            shape (``responses``, ``chat``, ``messages``, ``generate``,
            ``interactions``).
        framings: The framings it streams in (the first is the default).
        description: One line for humans.
        routes: Its endpoints.
        auth: How a client presents its key.
        errors: How its endpoints answer errors.
        resume: How an interrupted stream is read again.
        detect: How a stream shows it (auto-detection).
        stream: How the gateway streams it.
        reply: The shapes of its replies (emulator, demo).
        raw_options: For a dialect with a ``raw`` framing (the reply's body is the
            media itself): the options of its raw decoder taken from the request body,
            as ``{decoder option: body field}`` (speech: the ``response_format`` is the
            decoder's ``audio_format``).
    """

    name: str
    provider: str
    family: str
    framings: tuple[SpecFraming, ...]
    description: str
    routes: tuple[RouteSpec, ...]
    auth: AuthSpec
    errors: ErrorSpec
    resume: ResumeSpec
    detect: DetectSpec
    reply: ReplySpec
    stream: StreamSpec = StreamSpec()
    raw_options: Mapping[str, str] = field(default_factory=dict)

    @property
    def retrievable(self) -> bool:
        """The emulator and the gateway serve a stored stream again (it has a
        ``resume`` route)."""
        return any(route.action == "resume" for route in self.routes)

    def module(self) -> ModuleType:
        """Import and return the dialect's binding (``Decoder``, ``Encoder``,
        ``rebuild``).

        Raises:
            LocalProtocolError: The dialect is registered but not available.
        """
        loaded = _LOADED.get(self.name)
        if loaded is not None:
            return loaded  # (each new decoder and encoder asks: a gateway, on every stream)
        target = f"polystream.dialects.{self.name}.binding"
        try:
            loaded = _LOADED[self.name] = importlib.import_module(target)
            return loaded
        except ModuleNotFoundError as exc:
            if exc.name in (target, f"polystream.dialects.{self.name}"):
                raise LocalProtocolError(
                    f"dialect {self.name} is not available in this build", dialect=self.name
                ) from None
            raise

    binding = module

    def decoder(self, **options: Any) -> DialectDecoder:
        """A new decoder; options go to its constructor (``strict``, ``keep_raw``, ...)."""
        decoder: DialectDecoder = self.module().Decoder(**options)
        return decoder

    def encoder(self, **options: Any) -> DialectEncoder:
        """A new encoder; options go to its constructor."""
        encoder: DialectEncoder = self.module().Encoder(**options)
        return encoder

    def rebuild(self, events: Iterable[Event]) -> dict[str, Any]:
        """The provider's own final object, rebuilt from this dialect's unified events."""
        result: dict[str, Any] = self.module().rebuild(events)
        return result

    def request_codec(self) -> RequestCodec:
        """The request codec of the dialect's family (its binding's ``request``)."""
        codec: RequestCodec = self.module().request
        return codec


OPENAI_AUTH: Final = AuthSpec("authorization", bearer=True, accepts=("bearer", "x-api-key"))
"""``Authorization: Bearer <key>`` (OpenAI, and every xAI dialect)."""
GOOGLE_VERSIONS: Final = frozenset({"v1beta", "v1", "v1alpha"})
"""The API versions under which Gemini's endpoints are served."""


class RequestCodec(Protocol):
    """A request family's codec: native request bodies <-> the unified
    :class:`~polystream.request_model.Request` (one per family, in the family's folder;
    each dialect's binding names it as ``request``).

    Attributes:
        family: The family (:attr:`DialectSpec.family`).
        read_fields: The top-level fields of a body that :meth:`parse` reads; the
            others are kept as :attr:`Request.extra`.
        config_read: The family's generation config object and the fields of it that
            :meth:`parse` reads (None: the family has none).
        decided: The top-level fields of a built body that the builder's caller decides
            (the model, streaming): a pass-through body takes them from the built one.
        settings: The family's names of the unified generation settings.
    """

    @property
    def family(self) -> str: ...
    @property
    def read_fields(self) -> frozenset[str]: ...
    @property
    def config_read(self) -> tuple[str, frozenset[str]] | None: ...
    @property
    def decided(self) -> tuple[str, ...]: ...
    @property
    def settings(self) -> Mapping[str, str]: ...

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        """The unified request of a native ``body`` (an object); ``model`` is the one
        the URL names, for a family whose body has none.

        Raises:
            RequestError: The body is malformed for the family.
        """
        ...

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        """The native request of ``request``.

        Raises:
            RequestError: The request holds something the family cannot express.
        """
        ...

    def read_whole(self, request: Request, extra: dict[str, Any]) -> None:
        """Remove from ``extra`` (the fields :meth:`parse` did not read field by field)
        what ``request`` states whole all the same."""
        ...
