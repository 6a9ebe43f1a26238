"""zoo: CUDA kernels in pure Python with numba.cuda, from naive to fast."""

import sys

from zoo import _target

_COMMAND_LINE = sys.argv[:1] == ["-m"] or sys.argv[0].endswith(("/zoo", "\\zoo.exe"))  # `python -m zoo`, `zoo`
try:
    MODE = _target.choose(quiet=_COMMAND_LINE)  # the command line gives the notice itself, not for --help
except _target.TargetError as e:
    if _COMMAND_LINE:
        print(f"zoo: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    raise
SIMULATOR = MODE == "sim"

if SIMULATOR:
    from zoo import simulator

    simulator.install()

# after the target is chosen: the registry imports numba.cuda
from zoo import registry  # noqa: E402
from zoo.device.graphs import Graph, graph  # noqa: E402
from zoo.registry import families, family  # noqa: E402

__all__ = ["families", "family", "graph", "Graph", "registry", "MODE", "SIMULATOR"]
