"""zoo: CUDA kernels in pure Python with numba.cuda, from naive to fast."""
from zoo import _target

MODE = _target.choose()
SIMULATOR = MODE == "sim"

if SIMULATOR:
    from zoo import _simwarp

    _simwarp.install()

from zoo import registry  # noqa: E402  (after the target is chosen: it imports numba.cuda)
from zoo.registry import families, family  # noqa: E402,F401

__all__ = ["families", "family", "MODE", "SIMULATOR"]
