"""The Chat encoder's fast paths: a delta that makes a chunk of its own, written from
byte templates (the chunk's bytes around the delta value) when the output is certain to
equal the general path's (same keys, order and escaping).

Two kinds of templates: for another dialect's deltas (:meth:`FastPaths._fast_entry`,
the chunk :meth:`~._foreign.ForeignEncoding._chunk` writes), and for a Chat stream's own
deltas whose chunk held only them (:meth:`FastPaths._fast_own`, what
:meth:`~.encode.ChatEncoder._own` then ``_flush`` write).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeAlias

import msgspec

from polystream.dialects._chat._foreign import Block, ForeignEncoding
from polystream.dialects._chat.wire import (
    ENCODER,
)
from polystream.events import (
    ReasoningDelta,
    TextDelta,
    ToolInputDelta,
)

__all__ = ["GONE", "FastPaths"]

_OwnHead: TypeAlias = "tuple[Block | None, type, Any, int, bytes, bytes]"

GONE: Final = "-"
"""The key of an envelope change that lists vanished keys (see :func:`.wire.diff`)."""
_MARK: Final = "\x00polystream-delta\x00"
"""A placeholder for the delta value when a byte template is made (see :func:`_split`)."""
_MARK_JSON: Final = ENCODER.encode(_MARK)


def _split(data: bytes) -> tuple[bytes, bytes] | None:
    """``data`` around the one encoded :data:`_MARK` (None unless it occurs once)."""
    parts = data.split(_MARK_JSON)
    return (parts[0], parts[1]) if len(parts) == 2 else None


class FastPaths(ForeignEncoding):
    """The template caches and the paths that read them (see the module docstring)."""

    def __init__(
        self,
        *,
        id_factory: Callable[[], str] | None = None,
        clock: Callable[[], float] | None = None,
        record: bool = False,
    ) -> None:
        super().__init__(id_factory=id_factory, clock=clock, record=record)
        self._fast = True  # the byte-template delta paths (False: always the general path)
        # Another dialect's deltas: (candidate, field or tool index) -> the chunk's bytes
        # around the delta value, for the envelope in ``_templates_env``.
        self._templates: dict[tuple[int, Any], tuple[bytes, bytes] | None] = {}
        self._templates_env: dict[str, Any] | None = None
        # A Chat stream's own deltas: unified index -> (its block, the event type, the
        # residual choice fields and the candidate it was made for, the "choices"
        # bytes before and after the delta value).
        self._own_heads: dict[int, _OwnHead] = {}
        # The envelope whose empty "choices" list was checked, and that list.
        self._own_env: dict[str, Any] | None = None
        self._own_choices: Any = None

    def _fast_entry(
        self, block: Block, kind: type, index: int
    ) -> tuple[Any, type, bytes, bytes, str | None] | None:
        """:attr:`Block.fast` for deltas of type ``kind``, or None when they take the
        general path. What it checks stays true once true (a block's kind and loss, a
        choice whose role went out, a reasoning carrier recorded), except the envelope,
        which the entry names."""
        env = self._foreign_env
        if block.lost or block.custom or env is None or block.candidate not in self._role_sent:
            return None
        candidate = block.candidate
        key: Any
        open_kind: str | None
        if kind is ToolInputDelta or block.kind == "tool_call":
            key = block.tool_index
            if type(key) is not int:
                return None
            open_kind = None
        elif kind is ReasoningDelta or block.kind == "reasoning":
            if not self.quirks.reasoning_native and index not in self._reasoning_noted:
                return None  # the first one records the carrier
            key = "reasoning_content"
            open_kind = "reasoning"
        else:
            key = "refusal" if block.kind == "refusal" else "content"
            open_kind = block.kind
        if self._templates_env is not env:
            self._templates.clear()
            self._templates_env = env
        tkey = (candidate, key)
        try:
            template = self._templates[tkey]
        except KeyError:
            template = self._templates[tkey] = self._foreign_template(env, candidate, key)
        if template is None:
            return None
        return env, kind, template[0], template[1], open_kind

    def _foreign_template(
        self, env: dict[str, Any], candidate: int, key: Any
    ) -> tuple[bytes, bytes] | None:
        """The bytes of :meth:`_chunk` around the delta value."""
        delta: dict[str, Any] = (
            {"tool_calls": [{"index": key, "function": {"arguments": _MARK}}]}
            if type(key) is int
            else {key: _MARK}
        )
        entry: dict[str, Any] = {"index": candidate, "delta": delta}
        entry.update(self.quirks.choice_fields)
        chunk = dict(env)
        chunk["choices"] = [entry]
        return _split(b"data: " + ENCODER.encode(chunk) + b"\n\n")

    def _fast_own(self, event: TextDelta | ToolInputDelta | ReasoningDelta, x: Any) -> bytes | None:
        """A delta decoded from a Chat chunk holding only it (``extra["chat"]`` is just
        the envelope change): what :meth:`_own` then :meth:`_flush` write."""
        if type(x) is not dict or len(x) != 1:
            return None
        change = x.get("env")
        if type(change) is not dict or GONE in change or "choices" in change:
            return None
        env = self._env
        if env is not self._own_env:
            # A new envelope: its "choices" must be the empty placeholder.
            choices = env.get("choices")
            if type(choices) is not list or choices:
                return None
            self._own_env = env
            self._own_choices = choices
        index = event.index
        kind = type(event)
        cached = self._own_heads.get(index)
        if (
            cached is None
            or cached[0] is not self._blocks.get(index)
            or cached[1] is not kind
            or cached[2] is not self._residual.get(cached[3], self._choice_fields)
        ):
            block = self._blocks.get(index)
            if block is None:
                return None
            cached = self._own_head(block, kind)
            if cached is None:
                return None
            self._own_heads[index] = cached
            # What the general path records for the delta's choice (its residual and
            # candidate), whichever path writes this event: once per template.
            candidate = cached[3]
            self._residual[candidate] = cached[2]
            if candidate not in self._candidates:
                self._candidates.append(candidate)
        if kind is ToolInputDelta and not event.delta:
            return None
        try:
            value = ENCODER.encode(event.delta)
        except Exception:  # not encodable: the general path says how it fails
            return None
        # The envelope is changed in place (apply() would copy it: the same keys in the
        # same order), and written with the choice in place of its empty "choices".
        env.update(change)
        env["choices"] = msgspec.Raw(cached[4] + value + cached[5])
        try:
            body = ENCODER.encode(env)
        except Exception:  # the general path says how it fails
            return None
        finally:
            env["choices"] = self._own_choices
        # The chunk the general path would gather is written and forgotten.
        return b"data: %b\n\n" % body

    def _own_head(self, block: Block, kind: type) -> _OwnHead | None:
        """The template of an own delta of ``block`` (see :attr:`_own_heads`)."""
        if block.custom:
            return None  # (the general path writes custom.input)
        key: Any
        if kind is TextDelta:
            key = "refusal" if block.kind == "refusal" else "content"
        elif kind is ReasoningDelta:
            key = "reasoning_content"
        else:
            key = block.tool_index
        candidate = block.candidate
        residual = self._residual.get(candidate, self._choice_fields)
        template = self._own_template(candidate, key, residual)
        if template is None:
            return None
        return block, kind, residual, candidate, b"[" + template[0], template[1] + b"]"

    @staticmethod
    def _own_template(candidate: int, key: Any, residual: Any) -> tuple[bytes, bytes] | None:
        """The bytes of a choice entry built by :meth:`_entry_for` around the delta value."""
        if key is None or type(key) is int:
            fragment = {"index": key, "function": {"arguments": _MARK}}
            delta: dict[str, Any] = {"tool_calls": [fragment]}
        else:
            delta = {key: _MARK}
        entry: dict[str, Any] = {"index": candidate, "delta": delta}
        if not isinstance(residual, dict):
            return None
        entry.update(residual)
        try:
            return _split(ENCODER.encode(entry))
        except Exception:
            return None
