"""pipeline's sweeps, apart from its steps: copy/compute overlap of every step (``zoo streams``), Amdahl's bound (``zoo
amdahl``) and copy bandwidth (``zoo transfers``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
