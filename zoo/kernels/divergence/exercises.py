"""Exercises of the divergence family (``python -m zoo exercise list divergence``): host tooling, no step imports it."""

from collections import defaultdict


def mixed_parity_warps(obs):
    """warps whose lanes read elements of both parities (both arms of the branch)"""
    parities = defaultdict(set)
    for launch, block, thread, _, store, address, _, _ in obs.global_records:
        role, index = obs.role_of(address)
        if role == "x" and not store:
            parities[(launch, block, thread // 32)].add(index % 2)
    return sum(1 for found in parities.values() if len(found) > 1)


FIGURES = {"mixed_parity_warps": mixed_parity_warps}

EXERCISES = {
    "v02": {
        "lesson_size": 1000,
        "lesson": (("mixed_parity_warps", "<=", "every warp should take elements of one parity only"),),
    },
}
