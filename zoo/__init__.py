"""zoo: CUDA kernels in pure Python with numba.cuda, from naive to fast.

The public face: ``zoo.family(name)`` and ``zoo.families()`` (the registry), ``zoo.graph`` (a step's calls
replayed as a CUDA graph), and ``zoo.MODE`` / ``zoo.SIMULATOR`` (where kernels run, chosen by ``zoo.runtime``
before ``numba.cuda`` is imported).
"""

from zoo.runtime import MODE, SIMULATOR  # first: the target is chosen before numba.cuda is imported

# isort: split
from zoo import registry
from zoo.registry import families, family
from zoo.runtime.graphs import Graph, graph

__all__ = ["families", "family", "graph", "Graph", "registry", "MODE", "SIMULATOR"]
