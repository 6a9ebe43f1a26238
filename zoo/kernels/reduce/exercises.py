"""Exercises of the reduce family (``python -m zoo exercise list reduce``): host tooling, no step imports it."""

EXERCISES = {
    "v03": {
        "lesson_size": 1000,
        "lesson": (("shared_ways", "<=", "the lanes of a warp should touch consecutive words: 32 different banks"),),
    },
    "v08": {
        "hints": (
            "cuda.shfl_down_sync(FULL_MASK, v, offset) returns the v of the lane offset places above:"
            " after offsets 16, 8, 4, 2 and 1, lane 0 holds the warp's sum.",
            "One shared slot per warp (BLOCK // 32 of them): lane 0 of each warp writes its warp's "
            "sum, one barrier, then the first warp shuffles those sums the same way.",
        ),
        "lesson_size": 1000,
        "lesson": (
            ("shuffles", ">=", "the sums move between the lanes of a warp in registers"),
            ("shared_accesses", "<=", "shared memory holds one sum per warp, no more"),
        ),
    },
}
