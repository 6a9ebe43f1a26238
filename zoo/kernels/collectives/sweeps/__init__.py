"""collectives's sweeps, apart from its steps: the all-reduce's bus bandwidth against NCCL (``zoo allreduce``) and a
toy data-parallel step (``zoo dataparallel``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
