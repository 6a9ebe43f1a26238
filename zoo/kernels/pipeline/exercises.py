"""Exercises of the pipeline family (``python -m zoo exercise list pipeline``): host tooling, no step imports it."""

EXERCISES = {
    "v04": {
        "hints": (
            "stages.streams(n) gives n streams, made once and kept; chunk c goes to stream c % n, and"
            " its copy in, kernel and copy out all go to that one stream, so they stay in order.",
            "The result is complete only when every stream has finished: synchronize each of them before returning.",
        ),
        "lesson_size": 4099,
        "lesson": (("streams", ">=", "the chunks go to several streams, so that copies and kernels can overlap"),),
    },
}
