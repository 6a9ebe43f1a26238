"""Exercises of the histogram family (``python -m zoo exercise list histogram``): host tooling, no step imports it."""

EXERCISES = {
    "v02": {
        "hints": (
            "cuda.atomic.add works on a shared array too: cuda.shared.array(BINS, int32), zeroed by "
            "the block before anyone counts (and a barrier between).",
        ),
        "lesson_size": 4099,
        "lesson": (
            ("global_atomics", "<=", "a block counts in shared memory and adds each bin to global memory once"),
        ),
    },
}
