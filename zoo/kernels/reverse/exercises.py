"""Exercises of the reverse family (``python -m zoo exercise list reverse``): host tooling, no step imports it."""

EXERCISES = {
    "v02": {
        "lesson_size": 1000,
        "lesson": (
            ("dynamic_shared_bytes", "==", "the buffer is sized by the launch's fourth argument, 4 bytes an element"),
            ("static_shared_bytes", "==", "no buffer of a size fixed when the kernel is compiled"),
        ),
    },
    "v03": {
        "sizes": (2500,),
        "lesson_size": 2500,
        "lesson": (
            ("store_sectors_per_request", "<=", "a warp's 32 stores should land on consecutive elements of out"),
        ),
    },
}
