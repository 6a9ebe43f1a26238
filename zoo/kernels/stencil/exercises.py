"""Exercises of the stencil family (``python -m zoo exercise list stencil``): host tooling, no step imports it."""

EXERCISES = {
    "v02": {
        "hints": (
            "zoo.device.constant.declare(name, shape, dtype) declares the __constant__ array at build time and "
            "returns the device function that reads it; launch fills it from weights before the kernel, on the "
            "same stream (zoo/device/constant.py says how).",
        ),
        "lesson_size": (45, 68),
        "lesson": (
            (
                "global_loads_per_output",
                "<=",
                "the taps are the same for every thread: read them from constant memory, not global memory",
            ),
        ),
    },
    "v03": {
        "hints": (
            "The tile is the block's outputs plus the filter's radius on every side: (BLOCK_Y + 2 ry) x "
            "(BLOCK_X + 2 rx) pixels, loaded by the block's threads in a loop that strides by the block's size, "
            "zeros where the tile leaves the image.",
            "One barrier between the last store into the tile and the first read of a neighbour's pixel; with "
            "blocks that stride down the image, a second one before the tile is overwritten.",
        ),
        "lesson_size": (45, 68),
        "lesson": (
            (
                "global_loads_per_output",
                "<=",
                "each pixel of the tile, halo included, is loaded from global memory once per block, then read "
                "from shared memory by every output that needs it",
            ),
        ),
    },
}
