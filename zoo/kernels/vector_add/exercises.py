"""Exercises of the vector_add family (``python -m zoo exercise list vector_add``): host tooling, no step imports it."""

EXERCISES = {
    "v02": {
        "lesson_size": 5000,
        "lesson": (("threads", "<=", "the grid stays one size as n grows: each thread walks several elements"),),
    },
}
