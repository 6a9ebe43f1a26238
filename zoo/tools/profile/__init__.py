"""``python -m zoo profile``: hardware counters on a GPU, memory-access counters in the simulator.

On a GPU, ``ncu.run_ncu(fam, steps, size)`` runs Nsight Compute (``ncu``) over exactly the kernels each step
launches in one call at the size (``target`` is the program it profiles) with one curated set of metrics
(``counters.METRICS``), folds the rows per step and kernel, and ``ncu.save`` keeps them with zoo's results:
``results/profiles/<gpu>-<family>.json``. The walkthrough pages show them as a table per step and a sentence
computed from the counters (``prose``).

In the simulator, ``simulated.simulate(variant, size)`` counts the same memory lessons without a GPU
(``sim_counters``): sectors per global request, shared-memory wavefronts and bank conflicts per request,
divergent branches, threads per line. ``prose.comparison`` sets the two side by side (``.ci/gpu-profile.sh``).

Both sides reduce to one *summary* dict per step with the same keys where the two can count the same thing,
so one sentence function speaks for either.

==========================================  ==================================================================
``zoo.tools.profile.ncu``                   the runner: the ncu command, its run, the profile files
``zoo.tools.profile.target``                the program ncu profiles: each step's call between markers
``zoo.tools.profile.counters``              what ncu is asked for, its CSV read, rows folded per step and kernel
``zoo.tools.profile.sim_counters``          the simulator's counting of memory requests and divergence
``zoo.tools.profile.simulated``             a step counted in the simulator, with the GPU's constants
``zoo.tools.profile.prose``                 what a profile says: sentences, tables, the simulator beside ncu
``zoo.tools.profile.command``               ``zoo profile``'s arguments and its three commands
==========================================  ==================================================================
"""


class ProfileError(RuntimeError):
    """Profiling cannot go on: one line for the user, no traceback."""


def default_size(fam):
    """The size a GPU profile runs at: the spec's PROFILE_SIZE, else its HEADLINE_SIZE, else its largest bench size."""
    for name in ("PROFILE_SIZE", "HEADLINE_SIZE"):
        size = getattr(fam.module, name, None)
        if size is not None:
            return size
    return max(fam.BENCH_SIZES, key=fam.bytes_moved)


def sim_size(fam):
    """The size the simulator counts at by default: the family's largest test size (small by design)."""
    return max(fam.TEST_SIZES, key=fam.bytes_moved)
