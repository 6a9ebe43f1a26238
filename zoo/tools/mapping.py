"""Pictures of which thread touches what, drawn from the simulator's trace of one call.

A family spec may name steps to draw and the small size to draw them at::

    MAPPING = {"v01": 300}          # step: size

For each, ``draw`` runs the step once in the simulator with the GPU's constants
(``zoo.tools.profile.gpu_constants``), keeping every global-memory access
(``zoo.tools.profile.sim_counters``, ``keep_trace``), and draws each array the launch read or
wrote as a grid of its elements (a 1-D array in rows of 32, a warp's worth):

* colour: the block of the first thread that touched the element (the lowest block, warp and lane among
  those that did: blocks run in order in the simulator, a block's threads in no set order),
* shade: its warp (even warps light, odd warps dark),
* number: its lane,
* red outline: the elements warp 0 of block 0 touched in its first request to
  that array, the 32 lanes of one instruction: a row is coalesced, a column is not.

A step that launches several kernels is drawn for its busiest launch. The PNGs
are ``docs/plots/<family>-<step>-mapping.png``; ``zoo report`` redraws them (in a
simulator process of its own when it runs on a GPU) and the walkthrough pages show them.
"""

import os
import subprocess
import sys

import numpy as np

import zoo
from zoo import simulator
from zoo.bench import figures, harness, results
from zoo.runtime import SIMULATOR
from zoo.tools.profile import sim_counters, simulated

PLOTS = results.ROOT / "docs" / "plots"
ROW = 32  # elements per row of a 1-D array's picture: one warp's worth
MAX_LABELLED = 2600  # cells of a panel that still get a lane number
WIDE = 90  # cells across: wider than this, the arrays are drawn two a row


def path_for(fam, step):
    return PLOTS / f"{fam.name}-{step[:3]}-mapping.png"  # step: its name or vNN


def planned(names=None):
    """[(family, step name, size)] of every MAPPING entry, in teaching order; of the families named, if given."""
    out = []
    for fam in zoo.families():
        if names is not None and fam.name not in names:
            continue
        for step, size in getattr(fam.module, "MAPPING", {}).items():
            out.append((fam, fam[step].name, size))
    return out


def trace(variant, size):
    """The busiest launch of one call of ``variant`` at ``size`` in the simulator, with every access kept."""

    with simulated.gpu_constants(variant):
        launches = sim_counters.count(
            lambda: harness.check(variant, size, seed=0), divergence=False, memory=True, keep_trace=True
        )
    return sim_counters.busiest(launches)


def panels(launch):
    """[(title, grid shape, first toucher per cell as (block, warp, lane) or None, boxed cells, most touchers)]."""
    found = {}
    for block, warp, lane, key, op, offset, width, request in launch.trace:
        info = launch.arrays[key]
        if info.space != "global":
            continue
        found.setdefault((key, op), []).append((block, warp, lane, offset, width, request))
    out = []
    first_seen = {}
    for i, (_, _, _, key, op, *_) in enumerate(launch.trace):
        first_seen.setdefault((key, op), i)
    for (key, op), accesses in sorted(found.items(), key=lambda item: (item[0][1] != "ld", first_seen[item[0]])):
        info = launch.arrays[key]
        itemsize = np.dtype(info.dtype).itemsize
        count = int(np.prod(info.shape))
        shape = info.shape if len(info.shape) == 2 else ((count + ROW - 1) // ROW, min(count, ROW))
        first = {}
        touchers = {}
        first_request = min((r for b, w, _, _, _, r in accesses if b == 0 and w == 0), default=None)
        boxed = set()
        for block, warp, lane, offset, width, request in accesses:
            for element in range(offset // itemsize, (offset + width) // itemsize):
                if element >= count:
                    continue
                thread = (block, warp, lane)  # the lowest of those that touch it: a block's threads run in no set order
                first[element] = min(first.get(element, thread), thread)
                touchers.setdefault(element, set()).add((block, warp, lane))
                if request == first_request:
                    boxed.add(element)
        what = {"ld": "read", "st": "written", "atom": "updated atomically"}[op]
        most = max((len(t) for t in touchers.values()), default=0)
        out.append((f"{info.name} ({what})", shape, first, boxed, most))
    return out


def draw(fam, step, size, path=None):
    """Draw one step's mapping picture; returns its path if the file changed (None when it did not, or without
    matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        return None
    variant = fam[step]
    launch = trace(variant, size)
    found = panels(launch)
    widths = [max(shape[1], 8) for _, shape, *_ in found]  # a narrow array still gets room for its title
    cols = len(found) if sum(widths) <= WIDE else 2  # side by side, or two a row when that gets too wide
    rows_of = [found[i : i + cols] for i in range(0, len(found), cols)]
    col_widths = [max(max(found[i][1][1], 8) for i in range(c, len(found), cols)) for c in range(cols)]
    row_heights = [max(shape[0] for _, shape, *_ in row) for row in rows_of]
    scale = 0.2  # inches per cell
    fig_w = max(6.0, min(18.0, sum(col_widths) * scale + 1.0 * cols))
    fig_h = max(3.0, min(14.0, sum(row_heights) * scale + 1.0 * len(rows_of) + 0.8))
    fig, grid = plt.subplots(
        len(rows_of),
        cols,
        figsize=(fig_w, fig_h),
        gridspec_kw={"width_ratios": col_widths, "height_ratios": row_heights},
        squeeze=False,
    )
    axes = list(grid.flat)
    for ax in axes[len(found) :]:
        ax.set_axis_off()
    palette = plt.get_cmap("tab10").colors
    for ax, (title, shape, first, boxed, most) in zip(axes, found, strict=False):
        rows, cols = shape
        image = np.ones((rows, cols, 3))
        for element, (block, warp, _) in first.items():
            r, c = divmod(element, cols)
            shade = 0.45 if warp % 2 == 0 else 0.0  # even warps mixed with white
            image[r, c] = np.array(palette[block % len(palette)]) * (1 - shade) + shade
        ax.imshow(image, interpolation="nearest", aspect="equal")
        if rows * cols <= MAX_LABELLED:
            size_pt = max(3.0, min(7.0, 140.0 / max(rows, cols)))
            for element, (_, _, lane) in first.items():
                r, c = divmod(element, cols)
                ax.text(c, r, str(lane), ha="center", va="center", fontsize=size_pt, color="black")
        for element in boxed:
            r, c = divmod(element, cols)
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.2))
        note = f"\neach element by up to {most} threads" if most > 1 else ""
        ax.set_title(f"{title}{note}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    grid = "x".join(str(g) for g in launch.grid)
    block = "x".join(str(b) for b in launch.block)
    fig.suptitle(
        f"{fam.name} {variant.name} at {results.size_key(size)}: {launch.kernel}, grid {grid}, block {block}\n"
        "colour: block of the first thread to touch it; shade: warp (light even, dark odd); number: lane; "
        "red: warp 0 of block 0, its first request",
        fontsize=8,
    )
    fig.tight_layout()
    path = path or path_for(fam, variant.name)
    changed = figures.save(fig, path, dpi=120)
    plt.close(fig)
    return path if changed else None


def regenerate(names=None):
    """Redraw every MAPPING picture (of the families named, if given); yields one line per picture that changed.
    On a GPU, draws them in a simulator process."""
    if not SIMULATOR:
        proc = subprocess.run(
            [sys.executable, "-m", "zoo.tools.mapping", *(names or ())],
            env=dict(os.environ, ZOO_TARGET="sim"),
            capture_output=True,
            text=True,
            cwd=results.ROOT,
        )
        yield from (line for line in proc.stdout.splitlines() if line.strip())
        if proc.returncode != 0:
            yield f"mapping pictures failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
        return

    simulator.settle_process()
    for fam, step, size in planned(names):
        path = draw(fam, step, size)
        if path is not None:
            yield f"mapping {path.relative_to(results.ROOT)}"


if __name__ == "__main__":
    for line in regenerate(sys.argv[1:] or None):
        print(line, flush=True)
