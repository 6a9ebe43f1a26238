"""What a profile says: the sentence of what changed from one step to the next, the FLOPs note, the
walkthrough's table of a step, and the simulator's counts beside ncu's.
"""

from zoo.bench import results
from zoo.tools.profile import default_size
from zoo.tools.profile.counters import gpu_summary


def headline_profile(fam, data):
    """(size key, {step: entry}) a page shows: the family's default size if profiled, else the largest profiled."""
    sizes = data.get("sizes", {})
    if not sizes:
        return None, {}
    wanted = results.size_key(default_size(fam))
    key = wanted if wanted in sizes else max(sizes, key=lambda k: fam.bytes_moved(results.parse_case(k)[0]))
    return key, sizes[key].get("steps", {})


# -- sentences and tables -------------------------------------------------------------------------
def num(value, digits=3):
    """A counter's value for prose: thousands apart when large, ``digits`` significant digits otherwise."""
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == int(value):
        return f"{int(value)}"
    return f"{value:.{digits}g}"


def _changed(a, b, rel=0.2, absolute=0.05):
    return a is not None and b is not None and abs(a - b) > max(absolute, rel * max(abs(a), abs(b)))


FULL_SECTOR = 28  # useful bytes per 32-byte sector from which an access counts as coalesced


def _coalescing(sectors_before, sectors, used_before, used):
    """The verdict on a change of sectors per request, from the useful bytes per sector where known
    (a float4 access touches 4x the sectors of a float access and is no less coalesced)."""
    if used_before and used:
        if used >= FULL_SECTOR > used_before:
            return "coalesced"
        if used > 1.1 * used_before:
            return "better coalesced"
        if used < used_before / 1.1:
            return "less coalesced"
        return "as coalesced, wider accesses" if sectors > sectors_before else "as coalesced, narrower accesses"
    return "fewer sectors" if sectors < sectors_before else "more sectors"


def sentence(before_name, before, name, summary):
    """One sentence of what the counters say changed from ``before`` to ``summary`` (two summaries of the same
    kind), or '' when nothing they count moved."""
    short, prev = name[:3], before_name[:3]
    clauses = []
    for op, what in (("load", "reads"), ("store", "writes")):
        a, b = before.get(f"global_{op}_sectors_per_request"), summary.get(f"global_{op}_sectors_per_request")
        if _changed(a, b):
            used = before.get(f"global_{op}_bytes_per_sector"), summary.get(f"global_{op}_bytes_per_sector")
            clauses.append(f"{prev} {what} {num(a)} sectors per request, {short} {num(b)}: {_coalescing(a, b, *used)}")
    for key, what in (
        ("shared_load_conflicts_per_request", "shared loads"),
        ("shared_store_conflicts_per_request", "shared stores"),
    ):
        a, b = before.get(key), summary.get(key)
        if _changed(a, b, absolute=0.1):
            verdict = "no bank conflicts" if b < 0.05 else ("fewer bank conflicts" if b < a else "more bank conflicts")
            clauses.append(f"{what} have {num(a)} bank conflicts per request in {prev}, {num(b)} in {short}: {verdict}")
        elif a is None and b is not None and b >= 0.1:
            clauses.append(f"{short}'s {what} have {num(b)} bank conflicts per request")
    a, b = before.get("divergent_branches"), summary.get("divergent_branches")
    if a is not None and b is not None and (a > 0) != (b > 0):
        clauses.append(
            f"{prev} diverges on {num(a)} branches, {short} on {num(b)}: "
            + ("its warps take one path" if b == 0 else "its warps now split")
        )
    a, b = before.get("threads_per_instruction"), summary.get("threads_per_instruction")
    if _changed(a, b, rel=0.1, absolute=1.0):
        clauses.append(f"threads per instruction {num(a)} in {prev}, {num(b)} in {short}")
    a, b = before.get("duration_ms"), summary.get("duration_ms")
    if a and b:
        clauses.append(f"{num(a)} ms under ncu in {prev}, {num(b)} in {short} ({num(a / b)}x)")
    a, b = before.get("achieved_occupancy"), summary.get("achieved_occupancy")
    if _changed(a, b, rel=0.0, absolute=10.0):
        clauses.append(f"achieved occupancy {a:.0f}% in {prev}, {b:.0f}% in {short}")
    a, b = (before.get("stalls") or [(None,)])[0][0], (summary.get("stalls") or [(None,)])[0][0]
    if a and b and a != b:
        clauses.append(f"the top stall moves from {a} to {b}")
    if not clauses:
        return ""
    return "; ".join(clauses) + "."


def flops_note(summary):
    """'1.37e+11 FLOPs counted (FP32 ...), 100% of the 1.37e+11 modelled', or ''."""
    counted, modelled = summary.get("flops_counted"), summary.get("flops_modelled")
    if not counted:
        return ""
    parts = []
    for key, label in (("fp32_instructions", "FP32"), ("fp16_instructions", "FP16"), ("tensor_instructions", "HMMA")):
        if summary.get(key):
            parts.append(f"{label} {summary[key]:.3g}")
    text = f"{counted:.3g} FLOPs counted ({', '.join(parts)} instructions)"
    if modelled:
        text += f", {100 * counted / modelled:.0f}% of the {modelled:.3g} the family models"
    return text


def pct(value):
    return "-" if value is None else f"{value:.0f}%"


def pair(a, b, fmt=num):
    return f"{fmt(a)} / {fmt(b)}"


def markdown_table(fam, entry):
    """The walkthrough's table of one step's profile: a row per kernel (and the step's total when it has several)."""
    lines = [
        "| kernel | launches | ms | occupancy theor. / achieved | DRAM | L2 | threads/inst | top stalls "
        "| sectors/req ld / st | bank conflicts/req ld / st |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    kernels = entry.get("kernels", [])
    rows = [(k["name"], k["launches"], gpu_summary(entry, k["metrics"])) for k in kernels]
    if len(kernels) > 1:
        rows.append(("**step**", entry.get("launches_profiled", "-"), gpu_summary(entry)))
    for name, launches, s in rows:
        stalls = ", ".join(f"{reason} {num(v, 2)}" for reason, v in s["stalls"]) or "-"
        lines.append(
            f"| {name} | {launches} | {num(s['duration_ms'])} | "
            f"{pair(s['theoretical_occupancy'], s['achieved_occupancy'], pct)} | {pct(s['dram_pct'])} | "
            f"{pct(s['l2_pct'])} | {num(s['threads_per_instruction'])} | {stalls} | "
            f"{pair(s['global_load_sectors_per_request'], s['global_store_sectors_per_request'])} | "
            f"{pair(s['shared_load_conflicts_per_request'], s['shared_store_conflicts_per_request'])} |"
        )
    return "\n".join(lines)


# -- side by side ----------------------------------------------------------------------------------
COMPARED = (
    ("global_load_sectors_per_request", "global ld sectors/req"),
    ("global_store_sectors_per_request", "global st sectors/req"),
    ("shared_load_wavefronts_per_request", "shared ld wavefronts/req"),
    ("shared_load_conflicts_per_request", "shared ld conflicts/req"),
    ("shared_store_wavefronts_per_request", "shared st wavefronts/req"),
    ("shared_store_conflicts_per_request", "shared st conflicts/req"),
)

AGREEMENT = 0.10  # the simulator agrees with ncu within 10%

ABSOLUTE = 0.1  # ... or within 0.1 of it where the figure is near zero (conflicts)


def agrees(sim, gpu):
    if sim is None or gpu is None:
        return None
    return abs(sim - gpu) <= max(ABSOLUTE, AGREEMENT * abs(gpu))


def comparison(sim_summaries, gpu_entries):
    """Rows (step, figure, simulator, ncu, agrees) for the steps both sides have."""
    rows = []
    for step, sim in sim_summaries.items():
        entry = gpu_entries.get(step)
        if not entry or "total" not in entry:
            continue
        gpu = gpu_summary(entry)
        for key, label in COMPARED:
            a, b = sim.get(key), gpu.get(key)
            if a is None and b is None:
                continue
            rows.append((step, label, a, b, agrees(a, b)))
    return rows
