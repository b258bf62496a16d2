"""polystream's benchmark suite: polystream against the official SDKs and generic
baselines, on identical, deterministically generated wire bytes.

Run it with ``python -m benchmarks.run`` (see ``docs/performance.md``).
"""
