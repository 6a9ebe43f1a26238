"""Horner's form: one fused multiply-add per term instead of a multiply and an add.

Changes:
    Each of the four chains evaluates its share of the series by Horner's rule
    in y = x^4 with its first power c_r = x^(r+1) as every coefficient:
    q_r <- q_r * y + c_r, one ``fma.rn.f32``. After n_r steps
    q_r = c_r + c_r*y + ... + c_r*y^(n_r - 1) = x^(r+1) + x^(r+5) + ..., exactly
    chain r's terms, and the sum is q_0 + q_1 + q_2 + q_3. (With coefficient 1
    and the x^(r+1) factor applied at the end, the four chains would be the same
    computation: NVVM merges them and runs a quarter of the FMAs, a smaller
    algorithm rather than a faster kernel. Distinct coefficients keep four real
    chains.)

Why it is faster:
    The power form needs two instructions per term (p *= y, s += p); Horner
    needs one FMA, so the same series takes half the issue slots and can reach
    the FMA peak instead of half of it. The FLOP count reported stays the
    seed's 2k per element: k FMAs at 2 FLOPs each, so GFLOP/s here and in v01
    mean the same work. (Horner also rounds once per term instead of twice.)
"""

import functools

from zoo.device import cuda, float32, uint32
from zoo.device.jit import jit
from zoo.kernels.roofline import K_DEFAULT, check_k

THREADS_PER_BLOCK = 256
CHAINS = 4
UNROLL = 32  # steps per unrolled block: 32 x 4 chains = 128 FMAs


@functools.cache
def kernel_for(k):
    """The kernel with k built in (one compilation per k, cached)."""
    blocks_of_steps, leftover = divmod(k // CHAINS, UNROLL)
    extra = k % CHAINS  # chains 0 .. extra-1 take one more term

    @jit
    def horner_kernel(a, b):
        i = cuda.grid(1)
        if i < b.size:
            x = a[i]
            c0 = x
            c1 = x * x
            c2 = c1 * x
            c3 = c2 * x
            y = c1 * c1  # x^4: the step of every chain
            q0 = float32(0.0)  # the first step makes each q its coefficient: 0 * y + c
            q1 = float32(0.0)
            q2 = float32(0.0)
            q3 = float32(0.0)
            t = uint32(0)
            while t < uint32(blocks_of_steps):
                for _ in range(UNROLL):  # constant trip count: unrolled into 4 interleaved FMA chains
                    q0 = q0 * y + c0
                    q1 = q1 * y + c1
                    q2 = q2 * y + c2
                    q3 = q3 * y + c3
                t = uint32(t + uint32(1))  # uint32 + uint32 types as 64-bit in numba: cast back
            for _ in range(leftover):
                q0 = q0 * y + c0
                q1 = q1 * y + c1
                q2 = q2 * y + c2
                q3 = q3 * y + c3
            if extra > 0:  # compile-time constants: the untaken branches vanish
                q0 = q0 * y + c0
            if extra > 1:
                q1 = q1 * y + c1
            if extra > 2:
                q2 = q2 * y + c2
            b[i] = (q0 + q1) + (q2 + q3)

    return horner_kernel


horner_kernel = kernel_for(K_DEFAULT)  # the benchmark's kernel, so the harness can report its registers


def validate(a, k=K_DEFAULT):
    check_k(k)


def launch(a, out, k=K_DEFAULT):
    blocks = (out.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    kernel_for(int(k))[blocks, THREADS_PER_BLOCK](a, out)
