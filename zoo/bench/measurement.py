"""What a timed row gives a table: its ``Measurement`` (time, spread, rates, check, resources), and the rates of a
call's time."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Measurement:
    name: str
    size: object
    ms: float
    spread: float
    gflops: float
    gbps: float
    ratio: float = math.nan  # throughput relative to the baseline in the same run
    over_cpu: float = math.nan  # times faster than the family's first CPU row in the same run
    correct: object = None  # True/False, or None when not checked (demonstrations)
    error: float = math.nan
    resources: dict = field(default_factory=dict)
    host_us: float = math.nan  # host time of a launch call: at 80% of ms or more, the host set the pace (host_paced)
    cold_l2: bool = False  # timed with the L2 cache flushed before every call (zoo run --cold-l2), not warm
    call_path: str = ""  # the arrays a step's launch was timed on (harness.call_path); '' for a library or CPU row
    user_loop: dict = field(default_factory=dict)  # the call in a user's loop (zoo.bench.user_loop), where recorded


def rates(fam, size, ms, kind=None):
    """(GFLOP/s, GB/s) of a call that took ``ms``: the bytes this kind of input moves, with the keyword arguments
    a kind adds to every call (KIND_PARAMS) passed to flops and bytes_moved."""
    seconds, params = ms * 1e-3, fam.kind_params(kind)
    return fam.flops(size, **params) / seconds / 1e9, fam.bytes_moved(size, kind, **params) / seconds / 1e9
