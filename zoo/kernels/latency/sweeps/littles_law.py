"""What the latency family's sweeps share: Little's law, the knee of a measured curve, their rows.

Host tooling for ``sweep_bytes_in_flight`` and ``sweep_fmas_in_flight``; no step imports it.

What occupancy is for: hiding latency. A warp that waits on a load or an FMA
result leaves its scheduler idle unless another warp (occupancy) or another
independent instruction of the same warp (ILP) is ready. Both only fill the
pipe. Little's law says how full it must be: to sustain a throughput T through
a latency L, T x L units of work must be in flight. Once they are, the unit is
busy and more warps or more loads only lengthen the queues: the measured points
flatten at the ceiling, where the Little's-law line bends.
"""

SATURATED = 0.9  # a measured curve saturates where its best point first reaches 90% of its highest


def numbers(text):
    """[int, ...] from a comma-separated list of positive integers (a command-line option)."""
    out = []
    for item in str(text).split(","):
        item = item.strip()
        if not (item.isdigit() and int(item) > 0):
            raise ValueError(f"expected positive integers joined by commas, got {text!r}")
        out.append(int(item))
    return out


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def series_value(rows, name, key="ns_per_step"):
    """``key`` of the first row of series ``name`` that has a number there, or None."""
    return next((r[key] for r in rows if r.get("series") == name and is_number(r.get(key))), None)


def capped(rate, ceiling):
    """Little's line: the rate that the work in flight sustains, never above the ceiling (if known)."""
    return min(rate, ceiling) if ceiling else rate


def measured_knee(points, x_key, y_key):
    """(x where the best y per x first reaches SATURATED of the highest y, interpolated in log x; that highest y)."""
    best = {}
    for r in points:
        best[r[x_key]] = max(best.get(r[x_key], 0.0), r[y_key])
    xs = sorted(best)
    if not xs:
        return None, None
    top = max(best.values())
    goal = SATURATED * top
    for lo, hi in zip([None] + xs, xs, strict=True):
        if best[hi] >= goal:
            if lo is None or best[hi] == best[lo]:
                return float(hi), top
            frac = (goal - best[lo]) / (best[hi] - best[lo])
            return float(lo * (hi / lo) ** frac), top
    return None, top


def little_knee(latency_ns, ceiling, sms, per_unit=2):
    """Work in flight per SM where Little's line per_unit x work x SMs / latency meets the ceiling."""
    return ceiling * latency_ns / (per_unit * sms)


def one_panel(title, rows, has_points, draw):
    """A figure of one panel that ``draw(ax, rows)`` fills, or a note where the simulator timed nothing."""
    import matplotlib.pyplot as plt

    from zoo.bench import sweeps

    fig, ax = plt.subplots(figsize=(7, 5))
    fig.suptitle(title)
    if not has_points:
        sweeps.no_timings(ax)
        return fig
    draw(ax, rows)
    fig.tight_layout()
    return fig
