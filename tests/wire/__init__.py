"""Tests of the framing layer: server-sent events and the streamed JSON array."""

from __future__ import annotations
