"""``python -m polystream`` is the ``polystream`` command."""

from __future__ import annotations

import sys

from polystream.cli import main

sys.exit(main())
