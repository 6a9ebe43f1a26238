"""latency's sweeps, apart from its steps: pointer-chase latency (``zoo latency``), bytes in flight (``zoo
bytes-in-flight``) and FMAs in flight (``zoo fmas-in-flight``), with the Little's-law arithmetic they share.

Each module with a ``COMMAND`` is a ``python -m zoo`` subcommand (``zoo.bench.sweeps``); no step imports from here.
"""
