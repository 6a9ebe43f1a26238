"""Exercises of the pipeline family (``python -m zoo exercise list pipeline``): host tooling, no step imports it."""

EXERCISES = {
    "v04": {
        "lesson_size": 4099,
        "lesson": (("streams", ">=", "the chunks go to several streams, so that copies and kernels can overlap"),),
    },
}
