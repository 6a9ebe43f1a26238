"""Exercises of the reduce family (``python -m zoo exercise list reduce``): host tooling, no step imports it."""

EXERCISES = {
    "v03": {
        "lesson_size": 1000,
        "lesson": (("shared_ways", "<=", "the lanes of a warp should touch consecutive words: 32 different banks"),),
    },
    "v08": {
        "lesson_size": 1000,
        "lesson": (
            ("shuffles", ">=", "the sums move between the lanes of a warp in registers"),
            ("shared_accesses", "<=", "shared memory holds one sum per warp, no more"),
        ),
    },
}
