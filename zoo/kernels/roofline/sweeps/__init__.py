"""roofline's sweeps, apart from its steps: the polynomial's degree against measured ceilings (``zoo roofline``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
