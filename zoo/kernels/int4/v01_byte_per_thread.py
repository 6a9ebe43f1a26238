"""One byte per thread: unpack two nibbles with shifts, ReLU each, pack them again.

Changes:
    The first step. Thread ``i = cuda.grid(1)`` reads byte i (elements 2i and
    2i+1), sign-extends each nibble by moving it to the top of a 32-bit int and
    shifting it back arithmetically, takes max(q, 0), and writes
    ``lo | hi << 4``. ceil(bytes / 256) blocks of 256 threads; ``if i < size``
    stops the overhang.

Why it is faster:
    It is the starting point. It already moves the fewest bytes, half a byte
    in and half a byte out per element, against 8 for the same ReLU on float32;
    but a warp's load brings only 32 bytes (one L2 sector), so the GPU needs
    four times as many memory instructions in flight as a float32 kernel to
    keep the same bytes moving, and every byte pays for a thread's index
    arithmetic.
"""

from zoo.device import cuda, int32, uint8, uint32
from zoo.device.jit import jit

THREADS_PER_BLOCK = 256


@jit(device=True)
def relu_byte(b):
    w = uint32(b)
    # sign extension: bring the nibble's sign bit (bit 3) to bit 31, then shift right by 28 as a signed int
    lo = int32(w << uint32(28)) >> 28  # bits 0-3: element 2i
    hi = int32(w << uint32(24)) >> 28  # bits 4-7: element 2i+1
    lo = max(lo, 0)
    hi = max(hi, 0)
    # repack: & 15 keeps the low 4 bits of a two's complement code (an op with negative results needs it)
    return uint8((uint32(lo) & uint32(15)) | ((uint32(hi) & uint32(15)) << uint32(4)))


@jit
def relu_kernel(packed, out):
    i = cuda.grid(1)
    if i < packed.size:  # the last block sticks out past the bytes
        out[i] = relu_byte(packed[i])


def launch(packed, out):
    blocks = (packed.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    relu_kernel[blocks, THREADS_PER_BLOCK](packed, out)
