"""argmax's sweeps, apart from its steps: greedy decoding of the whole model, lever by lever (``zoo decode``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
