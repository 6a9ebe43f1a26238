"""The sweep behind v10's ring: ``python -m zoo tune gemv``.

v10's packed ring has three kernels (``KERNELS`` there: addresses computed or immediate, blocks of eight warps or of
one group of 32 rows), and which is fastest at a shape, with how many slots, which order of a slot's refill and where
the dependent launch's trigger goes, differs from GPU to GPU (``ring.py``). The sweep times each candidate at each
shape class's shape with int4 weights in groups of 128, on weights ``pack`` packed once: in a CUDA graph of calls over
rotating inputs (``sweep.graph_us``), as the formats sweep times a step, because a call of ~10 us launched from Python
is timed at the host's pace, and in a graph the dependent launch overlaps each call with the one before, as in a
decode step. It writes this GPU's table (``zoo.runtime.tune_table``) with every row, fastest first; v10 reads it through
``ring.py``, never through this module, which loads the timing harness.
"""

from zoo.kernels.gemv import ring
from zoo.kernels.gemv import v10_prepacked_weights as v10
from zoo.kernels.gemv.ring import SHAPE_CLASSES, Ring, cache_path, path

# what `zoo tune` uses
__all__ = ["SHAPE_CLASSES", "cache_path", "candidates", "inputs_for", "launch", "path", "sweep"]

STEP = "v10"  # the step whose ring is tuned
TRIGGERS_EARLY = (0, 1, 2)  # a warp lets the next kernel start at its last run, or 1 or 2 before
# Each candidate is timed in ROUNDS rounds over all of them and keeps its fastest: in one pass, a candidate's time
# moved by ~1 us from one sweep to the next (H100, 4096 x 14336: 11.15 us, then 12.11), more than separates the first
# few
ROUNDS = 3


def candidates():
    """Each of v10's kernels with two and three slots a warp (74 to 114 KB a block of eight warps), in both orders of
    a slot's refill, with the trigger of the dependent launch at a warp's last run or one or two runs before it."""
    return [
        Ring(kernel, stages, after_math, early)
        for kernel in v10.KERNELS
        for stages in (2, 3)
        for after_math in (False, True)
        for early in TRIGGERS_EARLY
    ]


def inputs_for(choice, inputs):
    """``inputs`` (W, x, scales) as v10's kernels read them: through its ``pack`` (the registry's ``Variant.packed``),
    the same for every candidate."""
    import zoo

    return zoo.family("gemv")[STEP].packed(inputs)


def launch(choice, W, x, scales, out):
    """Launch ``choice`` as v10 launches a pick, on inputs ``inputs_for`` made."""
    v10.launch_ring(choice, W, x, scales, out)


def sweep(shapes=None, progress=None, save=False):
    """Time every candidate at each class's shape (or at ``shapes``, a dict class: (out, in)); write the table to
    the user's cache (and, with ``save``, to the repository's results/tune) and return it, each class's rows
    fastest first."""
    import cupy
    import numpy as np

    import zoo
    from zoo.bench import harness
    from zoo.device import properties, sm_count
    from zoo.device.jit import launch_count, launched_since
    from zoo.kernels.gemv.sweeps import formats
    from zoo.runtime import tune_table

    fam = zoo.family("gemv")
    shapes = shapes or SHAPE_CLASSES
    table = {"device": properties()["name"], "classes": {}}
    for name, (out_size, in_size) in shapes.items():
        host = fam.inputs((out_size, in_size), 0, "int4")
        reference = fam.reference(*host)
        sets = [tuple(cupy.asarray(a) for a in s) for s in harness.input_sets(host)]
        out = cupy.full(out_size, np.nan, np.float32)
        rows = []
        timed = []  # (call, its input sets, its row) of each candidate timed, for the later rounds
        as_read = {}  # the input sets as v10's kernels read them, packed once, before any timing
        for choice in candidates():
            if progress:
                progress(name, choice)
            if not as_read:
                as_read[STEP] = [inputs_for(choice, s) for s in sets]
            mine = as_read[STEP]

            def call(inputs, choice=choice, out=out):
                launch(choice, *inputs, out)

            since = launch_count()
            try:
                for inputs in (mine[-1], mine[0]):  # right on a second call with other inputs too
                    out[:] = np.nan
                    call(inputs)
                kernel = launched_since(since)  # the kernel the choice launched, as it launched it
                agrees = bool(harness.compare(cupy.asnumpy(out), reference, fam.tolerance((out_size, in_size)))[0])
                us = formats.graph_us(call, mine)
            except Exception as e:  # a choice this compiler or device refuses: record why, go on
                rows.append({"tiles": choice._asdict(), "error": f"{type(e).__name__}: {e}"[:200]})
                continue
            used = harness.kernel_resources(kernel)  # the driver's occupancy query, with its shared memory
            blocks = v10.grid_for(out_size, choice.kernel)[1]  # its own grid: one_group_a_block's blocks are a group
            waves = blocks / (sm_count() * max(1, used["blocks_per_sm"]))
            rows.append(
                {
                    "tiles": choice._asdict(),
                    "threads": used["threads_per_block"],
                    "ms": us / 1e3,
                    "agrees": agrees,
                    "registers": used["registers"],
                    "local_bytes": used["local_bytes"],
                    "output_tiles": blocks,
                    "blocks_per_sm": used["blocks_per_sm"],
                    "waves": waves,
                    "last_wave_full": waves / -(-waves // 1),
                }
            )
            timed.append((call, mine, rows[-1]))
        for _ in range(ROUNDS - 1):  # every candidate again, in turn: a slow moment of the GPU costs one round
            for call, mine, row in timed:
                row["ms"] = min(row["ms"], formats.graph_us(call, mine) / 1e3)
        for _, _, row in timed:
            row["gflops"] = 2 * out_size * in_size / row["ms"] / 1e6  # a multiply and an add a weight
        table["classes"][name] = tune_table.class_entry((out_size, in_size), rows)
    partial = set(shapes) != set(SHAPE_CLASSES)  # tuning some classes keeps the others
    tune_table.write(table, ring.table()[0], partial, cache_path(), *([path()] if save else []))
    ring.table.cache_clear()  # the next call reads the new table
    return table
