"""Public names that moved keep working under their older names, as the same objects."""

from __future__ import annotations

import polystream.api
import polystream.decoding
import polystream.events
import polystream.gateway_core
import polystream.proxy


def test_api_is_decoding() -> None:
    for name in polystream.api.__all__:
        assert getattr(polystream.api, name) is getattr(polystream.decoding, name)
    assert set(polystream.api.__all__) == set(polystream.decoding.__all__)


def test_proxy_is_the_gateway_core() -> None:
    for name in polystream.proxy.__all__:
        assert getattr(polystream.proxy, name) is getattr(polystream.gateway_core, name)
    assert set(polystream.proxy.__all__) == set(polystream.gateway_core.__all__)


def test_warning_is_stream_warning() -> None:
    assert polystream.events.Warning is polystream.events.StreamWarning
    assert polystream.events.StreamWarning.__struct_config__.tag == "warning"
