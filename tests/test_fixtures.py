"""Every stream fixture of every dialect, held to the same contract:

* decoding matches the snapshots next to the fixture (``<case>.events.jsonl`` and
  ``<case>.result.json``; regenerate with ``POLYSTREAM_UPDATE_SNAPSHOTS=1 pytest``);
* decoding is identical whatever the chunking (whole, byte by byte, random splits);
* :func:`polystream.decode` (which may coalesce the events it does not return) gives
  the snapshot's result too, whole and in pieces;
* the stream ends in exactly one Finish, last among content events;
* same-dialect round trip: decode then encode reproduces every native event, in order,
  with the same JSON values, without using the raw events.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polystream import StreamDecoder, decode, get_dialect
from polystream.events import Finish, KeepAlive, Warning

from .helpers import (
    assert_chunking_invariant,
    check_snapshot,
    events_jsonl,
    feed_all,
    fixture_dialect,
    native_frames,
    split_at,
    stream_fixtures,
)

FIXTURE_FILES = stream_fixtures()
IDS = [str(p.relative_to(p.parents[1])) for p in FIXTURE_FILES]


def _decoder(path: Path) -> StreamDecoder:
    return StreamDecoder(fixture_dialect(path))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=IDS)
def test_snapshots(path: Path) -> None:
    data = path.read_bytes()
    decoder = _decoder(path)
    events = decoder.feed(data) + decoder.close()
    stem = path.with_suffix("")
    check_snapshot(stem.with_suffix(".events.jsonl"), events_jsonl(events))
    result = json.dumps(decoder.result().to_dict(), indent=2, sort_keys=True) + "\n"
    check_snapshot(stem.with_suffix(".result.json"), result)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=IDS)
def test_decode_gives_the_snapshot_result(path: Path) -> None:
    data = path.read_bytes()
    expected = path.with_suffix("").with_suffix(".result.json").read_text()
    dialect = fixture_dialect(path)
    for source in (data, [data], [data[i : i + 7] for i in range(0, len(data), 7)]):
        result = decode(source, dialect)
        assert json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n" == expected


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=IDS)
def test_one_finish_last(path: Path) -> None:
    decoder = _decoder(path)
    events = decoder.feed(path.read_bytes()) + decoder.close()
    finishes = [i for i, e in enumerate(events) if isinstance(e, Finish)]
    assert len(finishes) == 1
    assert all(isinstance(e, KeepAlive | Warning) for e in events[finishes[0] + 1 :])


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=IDS)
def test_chunking_invariant(path: Path) -> None:
    assert_chunking_invariant(lambda: _decoder(path), path.read_bytes())


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=IDS)
@given(cuts=st.lists(st.integers(min_value=0), max_size=16))
def test_random_splits(path: Path, cuts: list[int]) -> None:
    data = path.read_bytes()
    whole = feed_all(lambda: _decoder(path), [data])
    assert feed_all(lambda: _decoder(path), split_at(data, cuts)) == whole


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=IDS)
def test_same_dialect_round_trip(path: Path) -> None:
    dialect = fixture_dialect(path)
    data = path.read_bytes()
    decoder = StreamDecoder(dialect)
    events = decoder.feed(data) + decoder.close()
    assert not any(getattr(e, "raw", None) is not None for e in events)
    options = {}
    if path.suffix == ".jsonarray":
        options["framing"] = "json_array"
    encoded = get_dialect(dialect).encoder(**options).encode_all(events)
    assert native_frames(encoded) == native_frames(data)
