"""Exercises of the scan family (``python -m zoo exercise list scan``): host tooling, no step imports it."""

EXERCISES = {
    "v02": {
        "hints": (
            "Up-sweep: at offset d = 1, 2, 4, ... thread t adds s[d (2t + 1) - 1] into s[d (2t + 2) - 1], with a "
            "barrier between levels. Clear the root, then walk back down: at each level the left child takes the "
            "parent's value and the right child the parent's plus the old left.",
            "padded(i) = i + (i >> 5): one spare word every 32 keeps the deep levels' stride off a single bank.",
        ),
        "lesson_size": 1000,
        "lesson": (
            ("shared_accesses", "<=", "a balanced tree does about 2 n additions, not n log2 n"),
            ("shared_ways", "<=", "at a stride of 2^k a warp's lanes pile into one bank unless the indices are padded"),
        ),
    },
}
