"""fusion's sweeps, apart from its steps: four launches against one fused kernel and CuPy's two ways
(``zoo fusion-sweep``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
