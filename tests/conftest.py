"""Tests run on whatever target zoo chose: the simulator here and in CI, the GPU on a GPU machine."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import zoo  # chooses the target before anything imports numba.cuda

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    """The run's user cache (ZOO_CACHE) is a folder of its own, made by the process that starts the run and
    inherited by xdist's workers and the processes tests start: the exercise runner keeps a lesson's figures there
    for every later check in the run, and no test reads or writes the cache of the user running them.

    In the simulator, each process that runs tests keeps its simulated threads on one CPU: xdist's worker
    gwN takes the Nth CPU; a run without workers takes one. xdist's controller runs no test and stays
    unpinned, or every worker it starts would inherit its one CPU."""
    if not hasattr(config, "workerinput"):  # the process that starts the run (xdist's controller, or the only one)
        config.zoo_cache = tempfile.mkdtemp(prefix="zoo-test-cache-")
        os.environ["ZOO_CACHE"] = config.zoo_cache
    if not zoo.SIMULATOR:
        return
    from zoo import simulator

    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is not None:
        simulator.settle_process(int(worker.removeprefix("gw")))
    elif not getattr(config.option, "numprocesses", None):  # no xdist, or -n 0: this process runs the tests
        simulator.settle_process()


def pytest_unconfigure(config):
    if getattr(config, "zoo_cache", None):
        shutil.rmtree(config.zoo_cache, ignore_errors=True)


def run_zoo(*args, env=None):
    """Run ``python -m zoo ARGS`` in a fresh process; returns the CompletedProcess."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "zoo", *args], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def zoo_cli():
    return run_zoo


def tune_with_sizes(monkeypatch, tune_module, family, sizes):
    """The GPU path of ``zoo tune FAMILY --size ...`` with the family's timing replaced: the {class: shape} the
    sweep was asked for (a UsageError, as the CLI raises it, where two sizes are of one class)."""
    import argparse

    from zoo import cli

    seen = []

    def fake_sweep(shapes, progress=None, save=False):
        seen.append(shapes)
        return {"device": "test", "classes": {c: {"shape": list(s), "rows": []} for c, s in shapes.items()}}

    monkeypatch.setattr(zoo, "SIMULATOR", False)
    monkeypatch.setattr(tune_module, "sweep", fake_sweep)
    cli.cmd_tune(argparse.Namespace(family=family, size=list(sizes), save=False))
    return seen[0]


@pytest.fixture
def no_launch(monkeypatch):
    """Any kernel launched while the test runs fails it: a bad input must be refused before any launch."""
    from zoo.device.jit import Kernel

    def refuse(self, config):
        raise AssertionError("a kernel was launched before the input was rejected")

    monkeypatch.setattr(Kernel, "__getitem__", refuse)


@pytest.fixture
def launch_configs(monkeypatch):
    """``launch_configs(kernel)``: a list that gathers the launch configuration (``kernel[config]``) of every launch of
    ``kernel`` while the test runs; watch several kernels by calling it once for each."""

    def watch(kernel):
        configs = []
        original = type(kernel).__getitem__

        def spy(self, config):
            if self is kernel:
                configs.append(config)
            return original(self, config)

        monkeypatch.setattr(type(kernel), "__getitem__", spy)
        return configs

    return watch
