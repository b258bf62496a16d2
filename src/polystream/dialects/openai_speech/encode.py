"""Unified events -> a speech stream, in either framing.

``sse``: each data delta of the (first) ``audio`` block becomes a ``speech.audio.delta``
event; a completed (or incomplete) Finish becomes ``speech.audio.done`` with the usage
(the Finish's, else the last usage updates merged); an in-band error becomes an
``error`` event (a failed Finish without one writes it from the Finish's error); a
truncated Finish writes nothing, so the stream ends without its terminal event; an SSE
comment is written back. Events decoded from a speech stream are written back exactly
(their ``extra["speech"]``, see :mod:`.decode`).

``raw``: the decoded bytes of the audio block's data deltas, nothing else.

Everything the target cannot carry is reported in :attr:`Encoder.losses`: text,
reasoning, tool and other non-audio blocks and a second audio block (each once, at its
start: what it holds goes with it), deltas of a block that never started,
citations, signatures, metadata, statuses, transcript segments, the reply's id and
model, another dialect's unknown events, what comes after an error (the error event
ends the stream), finish reasons other than ``stop``, an
``incomplete`` status, and in the raw framing the usage and any error.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final

from polystream.dialects._base import DialectEncoder
from polystream.errors import LocalProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    KeepAlive,
    Raw,
    StreamStart,
    StreamWarning,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.wire.sse import SSEEncoder

from .decode import DIALECT
from .wire import DELTA, DONE, ERROR, EXTRA_KEY, compact

__all__ = ["Encoder"]

_SSE: Final = SSEEncoder()
_COUNTS: Final = ("input_tokens", "output_tokens", "total_tokens")
_WORDS: Final[dict[str, str]] = {
    "rate_limit": "rate_limit_exceeded",
    "quota": "insufficient_quota",
    "overloaded": "service_unavailable",
    "authentication": "invalid_api_key",
    "invalid_request": "invalid_request_error",
    "server": "server_error",
}
"""The OpenAI error word written for an error of another dialect that names none."""
_CODES: Final = frozenset(("rate_limit_exceeded", "insufficient_quota", "service_unavailable"))
_AFTER_ERROR: Final = frozenset((Finish, KeepAlive, Raw, StreamWarning, BlockEnd, UsageUpdate))
"""What may follow the error event: nothing of it is written, not even a keep-alive
comment (a reader's stream ended at the error)."""


class Encoder(DialectEncoder):
    """Writes ``openai_speech`` (see the module docstring).

    Args:
        framing: ``"sse"`` (the default) or ``"raw"``.

    Raises:
        LocalProtocolError: An unknown framing.
    """

    dialect = DIALECT

    def __init__(self, *, framing: str = "sse") -> None:
        super().__init__()
        if framing not in ("sse", "raw"):
            raise LocalProtocolError(f"{DIALECT} has no {framing} framing", dialect=DIALECT)
        self.framing = framing
        self._raw = framing == "raw"
        self._kinds: dict[int, str] = {}  # block index -> kind
        self._audio: int | None = None  # the audio block written
        self._usage: Usage | None = None
        self._source: str | None = None  # the dialect of the stream (its StreamStart)
        self._errored = False  # an error event was written

    def folds_usage(self, source: str) -> bool:
        """Another dialect's usage updates are only merged into the usage written at the
        end (``speech.audio.done``); a speech stream's own are too, but it has one."""
        return source != DIALECT

    # -- events ------------------------------------------------------------------------

    def _encode(self, event: Event) -> bytes:
        if self._errored and type(event) not in _AFTER_ERROR:
            # (The error event ends a speech stream: its readers stop there.)
            what = type(event).__struct_config__.tag
            self.lose(str(what), event, "the speech stream already ended with its error")
            return b""
        if type(event) is DataDelta:
            return self._data(event)
        if type(event) is UsageUpdate:
            usage = self._usage
            self._usage = event.usage if usage is None else usage.merged(event.usage)
            return b""
        if type(event) is BlockStart:
            self._kinds[event.index] = event.kind
            if event.kind == "audio" and self._audio is None:
                self._audio = event.index
            elif event.kind == "audio":
                self.lose("block:audio", event, "a speech stream has one audio block")
            else:
                self.lose(f"block:{event.kind}", event, "a speech stream carries audio only")
            return b""
        if type(event) is BlockEnd:
            return b""
        if type(event) is StreamStart:
            self._source = event.dialect
            if event.id is not None:
                self.lose("id", event, "a speech stream has no reply id")
            if event.model is not None:
                self.lose("model", event, "a speech stream does not name its model")
            return b""
        if type(event) is Finish:
            return self._finish(event)
        if type(event) is ErrorEvent:
            return self._error(event)
        if type(event) is KeepAlive:
            if self._raw or self._errored:
                return b""
            return _SSE.comment(event.comment or "")
        if type(event) is Unknown:
            return self._unknown(event)
        if type(event) is Raw or type(event) is StreamWarning:
            return b""  # (a decoder's own account of its input, not content)
        index = getattr(event, "index", None)
        if index is not None and index in self._kinds and index != self._audio:
            return b""  # (a block the speech stream lost whole: reported at its start)
        what = type(event).__struct_config__.tag
        self.lose(str(what), event, "a speech stream carries audio only")
        return b""

    def _data(self, event: DataDelta) -> bytes:
        if event.index != self._audio:
            if event.index not in self._kinds:
                self.lose("data", event, "a data delta of a block that never started")
            return b""  # (else a block lost whole: reported at its start)
        if event.replace:
            self.lose("data.replace", event, "speech audio only extends: written as appended")
        if self._raw:
            try:
                return base64.b64decode(event.delta, validate=True)
            except (binascii.Error, ValueError):
                raise LocalProtocolError(
                    "cannot write a data delta whose text is not base64 as raw audio",
                    dialect=DIALECT,
                    event_index=self.event_index,
                ) from None
        return self._write(DELTA, {"type": DELTA, "audio": event.delta}, event.extra)

    def _finish(self, event: Finish) -> bytes:
        usage = self._usage
        if event.usage is not None:
            usage = event.usage if usage is None else usage.merged(event.usage)
        if self._errored:
            if event.status != "failed":
                self.lose(f"finish:{event.status}", event, "the speech stream ended with its error")
            return b""
        if event.status in ("failed", "truncated"):
            if event.status == "failed" and not self._errored:
                return self._write_error(event, event.error, None)
            return b""
        if event.status == "incomplete":
            self.lose("finish:incomplete", event, "a speech stream ends completed or not at all")
        if event.reason.unified != "stop":
            self.lose(
                "finish_reason",
                event,
                f"a speech stream has no finish reason ({event.reason.unified})",
            )
        if self._raw:
            if usage is not None and not usage.is_empty():
                self.lose("usage", event, "raw audio carries no usage")
            return b""
        obj: dict[str, Any] = {"type": DONE}
        if usage is not None:
            obj["usage"] = _usage_object(usage)
        return self._write(DONE, obj, event.extra)

    def _error(self, event: ErrorEvent) -> bytes:
        if event.error.kind == "protocol":
            self.lose("error:protocol", event, "the source's own decoding error is not the API's")
            return b""
        return self._write_error(event, event.error, event.extra)

    def _write_error(
        self, event: Event, error: ErrorInfo | None, extra: dict[str, Any] | None
    ) -> bytes:
        if self._raw:
            self.lose("error", event, "raw audio cannot say that the stream failed")
            return b""
        self._errored = True
        kept = extra.get(EXTRA_KEY) if extra else None
        if isinstance(kept, dict) and isinstance(kept.get("data"), str):
            return _SSE.event(kept["data"], event=kept.get("event"))
        code = error.code if error is not None else None
        word = code or _WORDS.get(error.kind if error is not None else "", "server_error")
        body: dict[str, Any] = {
            "type": word,
            "code": code or (word if word in _CODES else None),
            "message": error.message if error is not None else "the stream failed",
            "param": None,
        }
        return _SSE.event(compact({"type": ERROR, "error": body}))

    def _unknown(self, event: Unknown) -> bytes:
        if self._source != DIALECT or self._raw:
            self.lose("event:unknown", event, "another dialect's event")
            return b""
        kept = event.extra.get(EXTRA_KEY) if event.extra else None
        name = kept.get("event") if isinstance(kept, dict) else None
        return _SSE.event(event.data, event=name if isinstance(name, str) else None)

    def _write(self, name: str, obj: dict[str, Any], extra: dict[str, Any] | None) -> bytes:
        kept = extra.get(EXTRA_KEY) if extra else None
        if not isinstance(kept, dict):
            return _SSE.event(compact(obj))
        if kept.get("untyped"):
            del obj["type"]
        fields = kept.get("fields")
        if isinstance(fields, dict):
            obj.update(fields)
        order = kept.get("order")
        if isinstance(order, list) and set(order) == set(obj):
            obj = {key: obj[key] for key in order}
        sse_name = kept.get("event")
        return _SSE.event(compact(obj), event=sse_name if isinstance(sse_name, str) else None)


def _usage_object(usage: Usage) -> dict[str, Any]:
    """The ``usage`` of ``speech.audio.done``: the provider's own object when it states
    these counts, else the counts."""
    raw = usage.raw
    counts = (usage.input_tokens, usage.output_tokens, usage.total_tokens)
    if isinstance(raw, dict) and tuple(raw.get(name) for name in _COUNTS) == counts:
        return raw
    given = usage.input_tokens or 0
    made = usage.output_tokens or 0
    total = usage.total_tokens if usage.total_tokens is not None else given + made
    return {"input_tokens": given, "output_tokens": made, "total_tokens": total}
