"""The ring sweep behind v10 to v14: ``python -m zoo tune gemv``.

v10's kernel keeps two runs a warp in flight, v09's one, v11's carries the scales in its slots, v12's reads packed
weights in v11's order or v09's, v13's is v12's with its copies' addresses folded into the instructions, and v14's
is v13's in blocks of one group of 32 rows; which
is fastest at a shape differs from GPU to GPU (``ring.py`` gives the figures). The sweep times each candidate, each
step's kernel with two and three slots a warp (v12's to v14's in both orders and with three places for the
dependent-launch trigger, on weights their ``pack`` packed once), at each shape class's shape with int4 weights in
groups of 128: in a CUDA graph of calls over rotating inputs (``sweep.graph_us``), as the formats sweep times a
step, because a call of ~10 us launched from Python is timed at the host's pace, and in a graph the dependent
launch overlaps each call with the one before, as in a decode step.
It writes this GPU's table (``zoo.tune_table``) with every row, fastest first; v10 to v14 read it through
``ring.py`` (each the fastest of the kernels it has), never through this module, which loads the timing harness.
"""

from zoo.kernels.gemv import ring
from zoo.kernels.gemv.ring import SHAPE_CLASSES, Ring, cache_path, path

# what `zoo tune` uses
__all__ = ["SHAPE_CLASSES", "cache_path", "candidates", "inputs_for", "launch", "path", "shape_class", "sweep"]


KERNELS = ("v09", "v10", "v11", "v12", "v13", "v14")  # the steps with a ring kernel
PACKED = ("v12", "v13", "v14")  # the kernels of packed weights, each with both orders and a trigger to place
TRIGGERS_EARLY = (0, 1, 2)  # v12's to v14's: a warp lets the next kernel start at its last run, or 1 or 2 before
# Each candidate is timed in ROUNDS rounds over all of them and keeps its fastest: in one pass, a candidate's time
# moved by ~1 us from one sweep to the next (H100, 4096 x 14336: v11's kernel 11.15 us, then 12.11), more than
# separates the first few
ROUNDS = 3


def candidates():
    """Each ring kernel with two and three slots a warp (72 to 114 KB a block of eight warps); v12's to v14's in both
    orders, each with the trigger of the dependent launch at a warp's last run or one or two runs before it."""
    return [
        Ring(kernel, stages, after_math, early)
        for kernel in KERNELS
        for stages in (2, 3)
        for after_math in ((False, True) if kernel in PACKED else (False,))
        for early in (TRIGGERS_EARLY if kernel in PACKED else (0,))
    ]


def inputs_for(choice, inputs):
    """``inputs`` (W, x, scales) as ``choice``'s kernel reads them: through its step's ``pack`` (the registry's
    ``Variant.packed``: v12 to v14 pack, the others take them as given)."""
    import zoo

    return zoo.family("gemv")[choice.kernel].packed(inputs)


def launching_step(kernel):
    """The step module whose ``launch_ring`` launches ``kernel``'s ring, and whose ``grid_for`` gives its grid (v09's
    kernel through v10's)."""
    from zoo.kernels.gemv import v10_refill_after_read as v10
    from zoo.kernels.gemv import v11_scales_in_the_ring as v11
    from zoo.kernels.gemv import v12_prepacked_weights as v12
    from zoo.kernels.gemv import v13_immediate_offsets as v13
    from zoo.kernels.gemv import v14_one_group_a_block as v14

    return {"v11": v11, "v12": v12, "v13": v13, "v14": v14}.get(kernel, v10)


def launch(choice, W, x, scales, out):
    """Launch ``choice`` as the step that owns its kernel launches a pick, on inputs ``inputs_for`` made."""
    launching_step(choice.kernel).launch_ring(choice, W, x, scales, out)


def shape_class(rows, cols):
    """The class of an out x in GEMV: its grid's, from the last ring step's grid for ``rows`` (v14's: v09's to v13's
    wherever a group of 32 rows has eight warps, and a block a group where it has fewer)."""
    return ring.rows_class(rows)


def sweep(shapes=None, progress=None, save=False):
    """Time every candidate at each class's shape (or at ``shapes``, a dict class: (out, in)); write the table to
    the user's cache (and, with ``save``, to the repository's results/tune) and return it, each class's rows
    fastest first."""
    import cupy
    import numpy as np

    import zoo
    from zoo import harness, tune_table
    from zoo.device import properties, sm_count
    from zoo.device.jit import launch_count, launched_since
    from zoo.kernels.gemv import sweep as formats

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
        as_read = {}  # each kernel's input sets as it reads them (v12's to v14's packed once, before any timing)
        for choice in candidates():
            if progress:
                progress(name, choice)
            if choice.kernel not in as_read:
                as_read[choice.kernel] = [inputs_for(choice, s) for s in sets]
            mine = as_read[choice.kernel]

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
            blocks = launching_step(choice.kernel).grid_for(out_size)[1]  # its own grid: v14's blocks are a group
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
