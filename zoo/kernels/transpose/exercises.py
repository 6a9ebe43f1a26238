"""Exercises of the transpose family (``python -m zoo exercise list transpose``): host tooling, no step imports it."""

EXERCISES = {
    "v02": {
        "lesson_size": (32, 32),
        "lesson": (("store_sectors_per_request", "<=", "a warp should write one row of out, not 32 scattered rows"),),
    },
    "v03": {
        "lesson_size": (32, 32),
        "lesson": (("shared_ways", "<=", "reading the tile down a column should hit 32 different banks"),),
    },
}
