"""Exercises of the int4 family (``python -m zoo exercise list int4``): host tooling, no step imports it."""

EXERCISES = {
    "v02": {
        "hints": (
            "zoo.device.memory.load_word / store_word move four bytes, eight nibbles, with one instruction; "
            "only a word aligned in both arrays can go that way.",
            "The bytes before the first 4-byte boundary and after the last whole word (3 at most each) can still "
            "go one byte a thread, as v01 does them.",
        ),
        "lesson_size": 4099,
        "lesson": (
            (
                "load_sectors_per_request",
                ">=",
                "a lane should load a 32-bit word, not a byte: a warp's request then covers a whole 128-byte line",
            ),
        ),
    },
}
