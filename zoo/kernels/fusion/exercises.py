"""Exercises of the fusion family (``python -m zoo exercise list fusion``): host tooling, no step imports it."""

EXERCISES = {
    "v03": {
        "hints": (
            "A device function (@jit(device=True)) can run the whole chain on one value in registers; one kernel "
            "loads x[i], calls it and stores out[i].",
        ),
        "lesson_size": 1031,
        "lesson": (
            ("launches", "<=", "the whole chain is one kernel"),
            ("global_loads_per_output", "<=", "x is read once, and no temporary goes through global memory"),
        ),
    },
}
