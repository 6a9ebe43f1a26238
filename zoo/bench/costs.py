"""What a check costs in the simulator, and the main job's estimate of the time left built on it.

The simulator runs one Python thread per CUDA thread, so a check's cost follows the threads it launches and the
work each does: nothing a count made before the run predicts well (a grid-stride step runs few threads that loop,
a tiled GEMM few blocks that synchronise often). ``results/simulator/costs.json`` holds instead what each check
took, step by step and size by size, on the machine that wrote it (``python -m zoo run --all --save`` in the
simulator). Another machine, or the same one when busy, is slower or faster by about one factor for all of them:
``Estimate`` learns that factor from the checks this run has finished and scales what is left by it.
"""

import json
import time

from zoo.bench import results

PATH = results.RESULTS_DIR / "simulator" / "costs.json"


def load(path=PATH):
    """{(family, step, case key): seconds} of the costs file; empty when there is none."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {
        (family, step, key): seconds
        for family, steps in data.get("seconds", {}).items()
        for step, cases in steps.items()
        for key, seconds in cases.items()
    }


def save(measured, path=PATH):
    """Merge {(family, step, case key): seconds} into the costs file, with this host and commit; returns the path."""
    import datetime

    from zoo import simulator
    from zoo.bench.harness import cpu_name

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    table = data.setdefault("seconds", {})
    for (family, step, key), seconds in measured.items():
        table.setdefault(family, {}).setdefault(step, {})[key] = round(seconds, 3)
    data["host"] = {"processor": cpu_name(), "cores": len(simulator.START_CPUS)}
    data["commit"] = results.git_commit()
    data["updated"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    data["seconds"] = {f: {s: dict(sorted(c.items())) for s, c in sorted(steps.items())} for f, steps in table.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def _mean(values, default):
    values = list(values)
    return sum(values) / len(values) if values else default


PRIOR_S = 10.0  # reference seconds of "as fast as the costs file" that the first jobs' pace is weighed against


class Estimate:
    """The time left of a run of jobs, each some checks, run by ``workers`` processes at once.

    A job's reference cost is the sum of its checks' seconds in the costs file; a check the file lacks (a new step,
    a size named with --size) costs what the family's known checks cost on average, or all known checks. Finished
    jobs teach two things: ``factor``, how much slower (or faster) this machine runs the checks now than the
    file's did, weighed against PRIOR_S seconds of the file's own pace so that the first small jobs do not swing
    it; and ``overhead``, what a job costs beyond its checks (making inputs, handing it over). The time left is
    the expected time of the jobs left, less what the running ones have done, shared among the workers, or the
    longest of them alone, whichever is longer."""

    def __init__(self, jobs, workers, reference=None, clock=time.monotonic):
        """``jobs``: {job: [(family, step, case key), ...]}."""
        self.reference = load() if reference is None else reference
        self.workers = max(1, workers)
        self.clock = clock
        self._overall = _mean(self.reference.values(), 1.0)
        by_family = {}
        for (family, _, _), seconds in self.reference.items():
            by_family.setdefault(family, []).append(seconds)
        self._family_mean = {family: _mean(seconds, self._overall) for family, seconds in by_family.items()}
        self.cost = {job: self.reference_seconds(checks) for job, checks in jobs.items()}
        self.taken = {}  # finished job -> (its seconds, its checks' seconds)
        self.started = {}  # running job -> when it was handed to a worker

    def reference_seconds(self, checks):
        """The costs file's seconds for these checks, (family, step, case key) each."""
        return sum(self.reference.get(c, self._family_mean.get(c[0], self._overall)) for c in checks)

    def start(self, job):
        """``job`` is handed to a worker now."""
        self.started[job] = self.clock()

    def finish(self, job, seconds=None, checks_seconds=None):
        """``job`` is done: it took ``seconds`` (default: since ``start``), ``checks_seconds`` of them in its
        checks (default: all)."""
        handed = self.started.pop(job, None)
        if seconds is None:
            seconds = self.clock() - handed if handed is not None else 0.0
        self.taken[job] = (seconds, seconds if checks_seconds is None else checks_seconds)

    @property
    def factor(self):
        """This machine's seconds per reference second of checks now."""
        measured = sum(checks for _, checks in self.taken.values())
        reference = sum(self.cost[j] for j in self.taken)
        return (measured + PRIOR_S) / (reference + PRIOR_S)

    @property
    def overhead(self):
        """A job's seconds beyond its checks, the median of the finished jobs' (0 before any)."""
        beyond = sorted(max(0.0, total - checks) for total, checks in self.taken.values())
        return beyond[len(beyond) // 2] if beyond else 0.0

    def seconds_for(self, checks, jobs=0):
        """Wall seconds these checks (in ``jobs`` jobs) would take at this run's pace, with its workers."""
        return (self.factor * self.reference_seconds(checks) + self.overhead * jobs) / self.workers

    def left(self):
        """Seconds until every job has finished, at this run's pace."""
        now, factor, overhead = self.clock(), self.factor, self.overhead
        expected = []
        for job, cost in self.cost.items():
            if job in self.taken:
                continue
            seconds = factor * cost + overhead
            if job in self.started:  # what it has done already, up to what it is expected to take
                seconds -= min(now - self.started[job], 0.9 * seconds)
            expected.append(seconds)
        return max(sum(expected) / self.workers, max(expected, default=0.0))
