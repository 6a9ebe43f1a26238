"""sgemm's sweeps, apart from its steps: the tile-shape tuning of v10 and later (``zoo tune sgemm``): the steps read
its table through ``tiles.py``.

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
