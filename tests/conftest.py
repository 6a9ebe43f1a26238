"""Tests run on whatever target zoo chose: the simulator here and in CI, the GPU on a GPU machine."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import zoo  # chooses the target before anything imports numba.cuda

if zoo.SIMULATOR:
    from zoo import simulator

    # each xdist worker imports this: shorter GIL hand-offs between simulated threads
    simulator.shorten_switch_interval()

ROOT = Path(__file__).resolve().parent.parent


def run_zoo(*args, env=None):
    """Run ``python -m zoo ARGS`` in a fresh process; returns the CompletedProcess."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "zoo", *args], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def zoo_cli():
    return run_zoo
