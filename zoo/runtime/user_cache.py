"""The user's cache folder, where zoo keeps what it measured or computed for this user: $ZOO_CACHE, else
$XDG_CACHE_HOME/zoo, else ~/.cache/zoo. ``zoo tune`` writes its tables under ``tune/``; the exercise runner keeps the
simulator's figures of a lesson under ``lessons/``."""

import os
from pathlib import Path


def root() -> Path:
    """The cache folder (not created here)."""
    return Path(os.environ.get("ZOO_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "zoo")
