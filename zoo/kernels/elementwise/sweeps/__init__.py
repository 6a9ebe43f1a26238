"""elementwise's sweeps, apart from its steps: ReLU's float4 per thread against blocks per SM
(``zoo elementwise-sweep``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
