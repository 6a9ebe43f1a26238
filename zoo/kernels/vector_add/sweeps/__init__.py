"""vector_add's sweeps, apart from its steps: a launch's host cost against its kernel's time (``zoo launch``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
