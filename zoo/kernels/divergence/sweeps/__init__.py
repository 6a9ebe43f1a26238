"""divergence's sweeps, apart from its steps: every step against the fraction of a warp's lanes on the long path (``zoo
divergence``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
