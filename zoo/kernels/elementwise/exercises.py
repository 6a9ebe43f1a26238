"""Exercises of the elementwise family (``python -m zoo exercise list elementwise``): host tooling, not a step."""

EXERCISES = {
    "v04": {
        "hints": (
            "zoo.device.memory.load_float4 / store_float4 move four float32 with one instruction; a float4 must "
            "start on a 16-byte boundary, so an array that does not keeps the scalar loop.",
            "The loop walks n // 4 float4; the last n % 4 elements (3 at most) are left for a few threads after it.",
        ),
        "lesson_size": 4099,
        "lesson": (
            (
                "load_sectors_per_request",
                ">=",
                "each lane should load 16 bytes at once: a warp's request then covers 512 bytes, 16 sectors",
            ),
        ),
    },
}
