"""Exercises of the softmax family (``python -m zoo exercise list softmax``): host tooling, no step imports it."""

EXERCISES = {
    "v03": {
        "lesson_size": (8, 64),
        "lesson": (
            ("barriers_per_thread", "<=", "a warp owns its row: its lanes exchange values by shuffles, not barriers"),
            ("shared_accesses", "<=", "the reductions run in registers, not in shared memory"),
        ),
        "hints": (
            "cuda.shfl_xor_sync(FULL_MASK, v, offset) hands each lane the v of lane (lane XOR offset): after "
            "offsets 16, 8, 4, 2 and 1 every lane has seen every other lane's value.",
        ),
    },
}
