"""launch's sweeps, apart from its steps: a loop of tiny launches on each launch path (``zoo launch-loop``) and a
user's own loop (``zoo user-loop``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
