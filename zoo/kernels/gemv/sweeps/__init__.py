"""gemv's sweeps, apart from its steps: the tuning of v10's packed ring (``zoo tune gemv``, ``tune.py``: the steps
read its table through ``ring.py``), every weight format against the goals (``zoo gemv-formats``, ``formats.py``) and
the roof of reading a call's bytes (``zoo gemv-read-roof``, ``read_roof.py``).

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
