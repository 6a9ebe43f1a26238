"""numba's CUDA simulator made to run the zoo: ``warps`` (the warp-level intrinsics numba's simulator lacks, and
the rendezvous model behind them), ``threads`` (``install``: the patches, the pool of threads; ``settle_process``),
``hopper`` (wgmma, mbarriers and TMA as Python). ``zoo.runtime`` installs it when it chooses the simulator.
"""

from zoo.simulator.threads import START_CPUS, install, settle_process  # noqa: F401 (what zoo's callers use)
