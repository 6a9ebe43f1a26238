"""Programmatic dependent launch: a kernel starts before the kernel ahead of it in the stream has finished.

In a stream, a kernel normally starts once the one before it has finished and its writes are visible: the
GPU drains, then fills again. For a kernel of a few microseconds (a decode step's GEMV reads 34 MB in about
12 us on an H100) that gap, the launch, the first loads' latency and the last blocks' math with the memory
idle, is a tenth of its time. Hopper (sm_90) lets the two overlap:

* the host launches the later kernel with the driver's programmatic stream serialization attribute
  (``jit(dependent_launch=True)``: every launch of that kernel carries it, in a CUDA graph too);
* the earlier kernel calls ``let_next_kernel_start()`` (``griddepcontrol.launch_dependents``) once it has
  asked for its last loads: when every block has called it or exited, the later kernel's blocks may be
  placed on SMs as room frees up, while the earlier kernel's last math runs;
* the later kernel calls ``wait_for_previous_kernel()`` (``griddepcontrol.wait``) before it reads anything
  the earlier kernel writes (x, in a decode step) or writes anything the earlier kernel reads or writes:
  it returns once the earlier kernel has finished and its writes are visible. Before it, the kernel may
  only read what no recent kernel writes: a model's weights. It returns at once where there is nothing to
  wait for (the kernel was launched without the attribute, or after a copy).

A kernel that uses them needs compute capability 9.0 (its step says ``MIN_CC = (9, 0)``). In the
simulator, which runs kernels one after another, both do nothing.
"""

from zoo.runtime import SIMULATOR, backend

if SIMULATOR:

    def wait_for_previous_kernel():
        pass

    def let_next_kernel_start():
        pass

else:
    from numba.cuda.extending import intrinsic

    from zoo.device.mma import bare_instruction  # no operands, a memory clobber: no load or store crosses it

    @intrinsic
    def wait_for_previous_kernel(typingctx):
        return bare_instruction("griddepcontrol.wait;")

    @intrinsic
    def let_next_kernel_start(typingctx):
        return bare_instruction("griddepcontrol.launch_dependents;")


if backend.MLIR:  # numba-cuda-mlir compiles none of the above (llvmlite IR): the same instructions as inline PTX
    from zoo.device.inline_ptx import (  # noqa: F401, F811 (these names, for numba-cuda-mlir)
        let_next_kernel_start,
        wait_for_previous_kernel,
    )
