"""Decoding state of a Gemini stream: a function call streamed with ``partialArgs``
(its arguments assembled by JSON path), the blocks of a candidate, and the values of the
chunk before, which the next chunk reuses when it repeats them."""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from polystream.events import Usage

ENCODE: Final = msgspec.json.Encoder()
# JSONPath segments of partialArgs: .name, ['name'] / ["name"], [0] (RFC 9535 subset).
_PATH_SEGMENT: Final = re.compile(
    r"\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]"
)


class StreamedCall:
    """A function call streamed with ``partialArgs``: its block and assembled args."""

    __slots__ = ("continuing", "index", "root", "run", "run_at")

    def __init__(self, index: int) -> None:
        self.index = index
        self.root: Any = None  # the arguments assembled so far
        self.continuing: str | None = None  # the path whose string value continues
        # The pieces of the string that continues, joined into root only when the run
        # ends (or json() is asked): joined at each fragment, a long string streamed
        # in many fragments would cost time quadratic in their number.
        self.run: list[str] | None = None
        self.run_at: list[str | int] = []  # its path's segments

    def fold(self, call: dict[str, Any]) -> bool:
        """Fold one ``functionCall`` fragment in; False if a path was not understood."""
        ok = True
        args = call.get("args")
        if isinstance(args, dict):
            self._end_run()
            # A copy: the fragment's own object is in its event's extra, and the later
            # fragments set their paths in what is assembled.
            args = _copied(args)
            self.root = args if not isinstance(self.root, dict) else {**self.root, **args}
        partial = call.get("partialArgs")
        if not isinstance(partial, list):
            return ok
        for arg in partial:
            if not isinstance(arg, dict) or not isinstance(arg.get("jsonPath"), str):
                ok = False
                continue
            path: str = arg["jsonPath"]
            value: Any
            if "stringValue" in arg:
                value = arg["stringValue"]
            elif "numberValue" in arg:
                value = arg["numberValue"]
            elif "boolValue" in arg:
                value = arg["boolValue"]
            elif "nullValue" in arg:
                value = None
            else:
                continue
            segments = _parse_path(path)
            if segments is None:
                ok = False
                continue
            more = arg.get("willContinue") is True
            if isinstance(value, str) and self.continuing == path:
                if self.run is not None:
                    self.run.append(value)
                    if not more:
                        self._end_run()
                        self.continuing = None
                    continue
                previous = self._get(segments)
                if isinstance(previous, str):
                    value = previous + value
            self._end_run()
            if not self._set(segments, value):
                ok = False
                continue
            self.continuing = path if more else None
            if more and isinstance(value, str):
                self.run = [value]
                self.run_at = segments
        return ok

    def _join_run(self) -> None:
        """Set the continuing string's pieces, joined, at its path (the run goes on)."""
        run = self.run
        if run is not None and len(run) > 1:
            joined = "".join(run)
            self._set(self.run_at, joined)
            self.run = [joined]

    def _end_run(self) -> None:
        self._join_run()
        self.run = None

    def _get(self, segments: list[str | int]) -> Any:
        node = self.root
        for seg in segments:
            if isinstance(seg, str) and isinstance(node, dict):
                node = node.get(seg)
            elif isinstance(seg, int) and isinstance(node, list) and seg < len(node):
                node = node[seg]
            else:
                return None
        return node

    def _set(self, segments: list[str | int], value: Any) -> bool:
        """Set the value at a path; False (nothing set) when the path does not fit
        what was assembled (a name into an array, an index into an object) or an
        array index runs :data:`_MAX_INDEX_AHEAD` or more past the end of its array
        (the elements between are null until set): what a fragment costs stays
        bounded, where an index of 10**12 would fill an array with that many nulls."""
        if not segments:
            self.root = value
            return True
        if not isinstance(self.root, dict | list):
            self.root = {} if isinstance(segments[0], str) else []
        node: Any = self.root
        for seg, nxt in zip(segments, [*segments[1:], None], strict=True):
            fresh: Any = None if nxt is None else ({} if isinstance(nxt, str) else [])
            if isinstance(seg, str):
                if not isinstance(node, dict):
                    return False
                if nxt is None:
                    node[seg] = value
                    return True
                if not isinstance(node.get(seg), dict | list):
                    node[seg] = fresh
                node = node[seg]
            else:
                if not isinstance(node, list):
                    return False
                if seg - len(node) >= _MAX_INDEX_AHEAD:
                    return False
                while len(node) <= seg:
                    node.append(None)
                if nxt is None:
                    node[seg] = value
                    return True
                if not isinstance(node[seg], dict | list):
                    node[seg] = fresh
                node = node[seg]
        return True

    def json(self) -> str:
        """The assembled arguments as compact JSON ("" when none arrived)."""
        self._join_run()
        return "" if self.root is None else ENCODE.encode(self.root).decode()


# How far past the end of an array a streamed argument's index may reach (arrays are
# streamed about in order; the elements skipped are null until set).
_MAX_INDEX_AHEAD: Final = 64


def _copied(value: Any) -> Any:
    """A copy of a JSON value, its objects and arrays copied all the way down."""
    if type(value) is dict:
        return {key: _copied(item) for key, item in value.items()}
    if type(value) is list:
        return [_copied(item) for item in value]
    return value


def _parse_path(path: str) -> list[str | int] | None:
    if not path.startswith("$"):
        return None
    out: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _PATH_SEGMENT.match(path, pos)
        if m is None:
            return None
        name, number, single, double = m.groups()
        if number is not None:
            out.append(int(number))
        else:
            out.append(name if name is not None else (single if single is not None else double))
        pos = m.end()
    return out


class Previous:
    """The previous chunk's repeated values, reused when the next chunk repeats them."""

    __slots__ = (
        "candidates",
        "extra",
        "extra_candidates",
        "extra_residual",
        "meta",
        "residual",
        "usage",
    )

    def __init__(self) -> None:
        self.residual: dict[str, Any] | None = None
        self.candidates: list[dict[str, Any]] | None = None
        self.extra: dict[str, Any] | None = None
        self.extra_residual: dict[str, Any] | None = None
        self.extra_candidates: list[dict[str, Any]] | None = None
        self.meta: dict[str, Any] | None = None
        self.usage: Usage | None = None


class Candidate:
    """Per-candidate block state."""

    __slots__ = (
        "call",
        "finish",
        "finish_message",
        "has_calls",
        "last",
        "last_reasoning",
        "last_signed",
        "last_text",
        "last_textual",
        "open",
        "open_kind",
    )

    def __init__(self) -> None:
        self.open: int | None = None  # the open block (a text or reasoning run)
        self.open_kind: str | None = None  # "text" or "reasoning"
        self.last: int | None = None  # the most recent block of the candidate
        self.last_signed = False
        self.last_textual = False  # the most recent block is text or reasoning
        self.last_reasoning = False  # the most recent block is reasoning
        self.last_text: int | None = None  # most recent text block (for citations)
        self.call: StreamedCall | None = None
        self.has_calls = False
        self.finish: str | None = None
        self.finish_message: str | None = None
