"""Exercises of the sgemm family (``python -m zoo exercise list sgemm``): host tooling, no step imports it."""

EXERCISES = {
    "v03": {
        "lesson_size": (32, 32, 64),
        "lesson": (
            (
                "global_loads_per_output",
                "<=",
                "each element brought into a shared tile is used by a whole row or column of the block's threads",
            ),
        ),
    },
}
