"""A stream's objects are freed by reference counting as soon as they are dropped.

No decoder, accumulator, encoder or transcoder makes a reference cycle (a table of its
own bound methods, a framer holding a bound method of its decoder, an exception kept
with the traceback of a frame that holds the decoder): a dropped one, with every
fragment it holds, is freed at once instead of waiting for the cycle collector (in a
server, for a full collection, since a stream's objects outlive many young ones).

Every stream fixture of every dialect, the malformed ones included, decoded (lenient:
errors become events) whole and cut off halfway, and transcoded into every dialect and
the Gemini JSON array; strict decoders too, fed again after they failed (a failed
decoder keeps its error and raises a copy of it on each later call: a raised error's
traceback holds the frames it passed through, and the decoder with them).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable
from pathlib import Path

import pytest

import polystream
from polystream import get_dialect
from polystream.dialects import DIALECTS
from polystream.transcode import Transcoder

from .helpers import FIXTURES, STREAM_SUFFIXES, fixture_dialect

ALL_FIXTURES = sorted(p for p in FIXTURES.rglob("*") if p.suffix in STREAM_SUFFIXES)
IDS = [str(p.relative_to(FIXTURES)) for p in ALL_FIXTURES]
TARGETS = [(name, {}) for name in DIALECTS] + [("gemini_generate", {"framing": "json_array"})]


def cyclic_garbage(run: Callable[[], object]) -> list[str]:
    """The types of the objects ``run`` leaves in reference cycles (sorted)."""
    run()  # once before: a library's one-time caches are not the stream's objects
    gc.collect()
    gc.freeze()  # what exists now is not looked at
    enabled = gc.isenabled()
    gc.disable()
    try:
        run()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return sorted(type(obj).__name__ for obj in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.unfreeze()
        if enabled:
            gc.enable()


def test_the_check_sees_a_cycle() -> None:
    class Owner:
        def __init__(self) -> None:
            self.table = {"x": self.method}

        def method(self) -> None:
            pass

    assert cyclic_garbage(Owner) == ["Owner", "dict", "method"]
    assert cyclic_garbage(lambda: {"a": [1]}) == []


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=IDS)
def test_decoding_leaves_no_cycle(path: Path) -> None:
    data = path.read_bytes()
    dialect = fixture_dialect(path)

    def whole() -> None:
        polystream.decode(data, dialect)

    def cut_off() -> None:
        decoder = polystream.StreamDecoder(dialect)
        with contextlib.suppress(polystream.PolystreamError):
            decoder.feed(data[: len(data) // 2])
        decoder.snapshot  # noqa: B018 (the reply so far, then dropped unclosed)

    def dialect_decoder(strict: bool) -> None:
        decoder = get_dialect(dialect).decoder(strict=strict)
        # In pieces, then once more after the end: a decoder that failed raises its
        # error again on each later call (a copy: the one it keeps is never raised).
        for step in (data[:100], data[100:], b"", None, None):
            try:
                if step is None:
                    decoder.close()
                else:
                    decoder.feed(step)
            except polystream.PolystreamError:
                pass

    def strict_whole() -> None:
        with contextlib.suppress(polystream.PolystreamError):
            polystream.decode(data, dialect, strict=True)

    assert cyclic_garbage(whole) == []
    assert cyclic_garbage(cut_off) == []
    assert cyclic_garbage(lambda: dialect_decoder(strict=False)) == []
    assert cyclic_garbage(lambda: dialect_decoder(strict=True)) == []
    assert cyclic_garbage(strict_whole) == []


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=IDS)
def test_transcoding_leaves_no_cycle(path: Path) -> None:
    data = path.read_bytes()
    dialect = fixture_dialect(path)

    def transcode() -> None:
        for target, options in TARGETS:
            transcoder = Transcoder(target, source=dialect, target_options=options)
            try:
                transcoder.feed(data)
                transcoder.close()
            except polystream.PolystreamError:
                pass
            transcoder.result()

    assert cyclic_garbage(transcode) == []
