"""How fast the simulator runs here now: a small kernel shaped like a step's check, timed (``seconds``).

``zoo exercise check`` scales a stage's limit by it (``zoo.exercise.runner.stage_limit``): on a busy machine, or a
slow one, a learner's right answer gets the time it needs instead of being cut off as an endless loop.
Imported after ``zoo``, which chooses the simulator.
"""

import statistics
import time

import numpy as np
from numba import cuda, float32

THREADS = 256
BLOCKS = 2
ROUNDS = 2


@cuda.jit
def rounds(out):
    tile = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    total = float32(0)
    for r in range(ROUNDS):
        tile[t] = t + r
        cuda.syncthreads()  # every store before a neighbour's load
        total += tile[THREADS - 1 - t]
        cuda.syncthreads()  # every load before the next round's store
    out[cuda.blockIdx.x * THREADS + t] = total


def seconds(runs=3):
    """The simulator's time for ``rounds`` (2 blocks of 256 threads, 2 rounds of two barriers): the median of
    ``runs``, so that neither a moment's hiccup nor a moment's lull sets the limit."""
    out = np.zeros(BLOCKS * THREADS, np.float32)
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        rounds[BLOCKS, THREADS](out)
        times.append(time.perf_counter() - began)
    return statistics.median(times)
