"""``openai_agent_session``'s code: ``Decoder``, ``Encoder``, ``rebuild`` and ``request``
(see the package docstring)."""

from __future__ import annotations

from .decode import DIALECT, Decoder
from .encode import Encoder
from .request import AGENT_SESSION as request
from .result import rebuild

__all__ = ["DIALECT", "Decoder", "Encoder", "rebuild", "request"]
