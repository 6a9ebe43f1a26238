"""The kernel families: one subpackage each (see zoo.registry).

``ZOO_KERNEL_PATH`` adds folders holding more family packages.
"""

import os

__path__ += [p for p in os.environ.get("ZOO_KERNEL_PATH", "").split(os.pathsep) if p]
