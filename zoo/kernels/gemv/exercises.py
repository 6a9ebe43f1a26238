"""Exercises of the gemv family (``python -m zoo exercise list gemv``): host tooling, no step imports it."""

EXERCISES = {
    "v02": {
        "hints": (
            "Lane l of a warp takes columns l, l + 32, l + 64, ... of the warp's row: one load of the warp reads "
            "32 neighbouring weights.",
            "cuda.shfl_xor_sync(FULL_MASK, s, offset) for offsets 16, 8, 4, 2, 1 leaves every lane holding the "
            "sum of the 32 partial sums; lane 0 writes it.",
        ),
        "lesson_size": (33, 320),
        "lesson": (
            (
                "load_sectors_per_request",
                "<=",
                "the lanes of a warp should read neighbouring weights of one row, not one weight of 32 rows",
            ),
            ("shuffles", ">=", "the lanes' partial sums meet in registers, through warp shuffles"),
        ),
    },
}
