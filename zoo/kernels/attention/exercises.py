"""Exercises of the attention family (``python -m zoo exercise list attention``): host tooling, no step imports it."""

EXERCISES = {
    "v02": {
        "hints": (
            "One block owns a few query rows of one head; their scores against every key fit in dynamic shared "
            "memory (rows x n float32), sized by the launch's fourth configuration value.",
            "Three phases, a barrier between each: scores into shared memory, a warp per row for its max and sum "
            "of exponentials (shuffles), then the weighted sum of V's rows.",
        ),
        "lesson_size": (1, 20, 128),
        "lesson": (
            ("launches", "<=", "the three kernels become three phases of one"),
            ("global_stores", "<=", "the scores stay on the chip: only O is written"),
        ),
    },
}
