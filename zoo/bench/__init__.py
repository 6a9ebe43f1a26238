"""The bench: checking the registry's steps against their references and timing them, and what the
measurements become.

``run`` (the main job, ``zoo run``), ``harness`` (check a step, time launches, CPU rows, resources),
``results`` (the results files), ``ceilings`` (the machine's measured copy bandwidth and FMA peak), ``sweeps``
(the families' sweep commands). It imports the registry, the device package and the runtime, never the tools
or the CLI.
"""
