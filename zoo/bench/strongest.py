"""Each figure against the family's strongest row: what a practitioner would pick instead of the steps.

A family's spec names it (STRONGEST, read by ``Family.strongest``): CUB's device-wide algorithm, cuBLAS in the
steps' own precision, SDPA, NCCL, a CUDA graph, or for a memory-bound family a copy of the same bytes. Every table
gives each row's speed as a fraction of that row's, timed in the same run, and says where the zoo is behind it.
These functions read one size's rows of a results file ({row name: entry}, as ``zoo run --save`` writes them).
"""

BEHIND = 1.0  # a step below this fraction of the strongest row is behind it


def strongest_row(fam, entries):
    """(name, entry) of the family's strongest row among one size's entries; None where it was not measured (a run
    from before the row existed, a library the GPU's machine lacked), was wrong, or was recorded before its output
    was checked: a figure every step is held to must have been right."""
    name = fam.strongest
    entry = entries.get(name)
    if not entry or not entry.get("ms") or entry.get("correct") is not True:
        return None
    return name, entry


def best_step(fam, entries):
    """(name, entry) of the fastest real step in one size's entries (demonstrations and library rows left out, and a
    step that was wrong), or None. Their ratio to the family's baseline ranks them: one baseline in one run."""
    steps = [(v.name, entries[v.name]) for v in fam if v.name in entries and not v.demonstration]
    steps = [(n, e) for n, e in steps if e.get("ratio") and e.get("correct") is not False]
    return max(steps, key=lambda s: s[1]["ratio"], default=None)


def of_strongest(fam, entries, name):
    """Row ``name``'s speed as a fraction of the strongest row's in the same entries (the strongest row's time over
    its time, both at one size), or None where either is missing."""
    found = strongest_row(fam, entries)
    row = entries.get(name)
    if found is None or not row or not row.get("ms"):
        return None
    return found[1]["ms"] / row["ms"]


def behind(fraction):
    """Whether a step at ``fraction`` of the strongest row is behind it."""
    return fraction is not None and fraction < BEHIND


def missing_reason(fam, entries):
    """Why one size's entries have no usable strongest row, in a few words ('' where they have one)."""
    if strongest_row(fam, entries) is not None:
        return ""
    entry = entries.get(fam.strongest)
    if not entry:
        return "was not measured in this run (recorded before it was declared, or its library was missing)"
    if entry.get("correct") is False:
        return "gave a wrong result in this run"
    return "was recorded before its output was checked"


def missing_note(fam, entries):
    """Why a table has no % of the strongest row, and how to get one ('' where it has one)."""
    why = missing_reason(fam, entries)
    if not why:
        return ""
    return f"The strongest row, {fam.strongest}, {why}: `python -m zoo run {fam.name} --save` on a GPU records it."
