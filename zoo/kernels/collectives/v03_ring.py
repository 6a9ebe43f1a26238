"""Ring all-reduce: a reduce-scatter then an all-gather, a segment a step, one stream per link of the ring.

Changes:
    The buffer is cut into R segments (``ring.segments``, starts 256-byte
    aligned). In 2 (R - 1) steps (``ring.steps``) every rank receives one
    segment from its left neighbour into an inbox on its own GPU, over its own
    link, on its own stream (``links[q]``), and in the reduce-scatter adds it
    into its copy (``add_into`` now takes the segment's first element); in the
    all-gather the segment is copied straight over its copy. A step waits on
    the sender's event for the step before (``done``), and on nothing else:
    there is no global barrier between steps.

Why it is faster:
    Every rank sends and receives (R - 1) / R of the buffer in each phase, the
    same on every link, so all links run at once and none carries more than
    its share: busbw no longer falls with R. Within a step, though, a segment's
    add starts only when the whole segment has arrived, and the next step's copy
    only when the add has finished: the link idles while the GPU adds.
"""

import numpy as np

from zoo.device import cuda, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.memory import load_float4, store_float4
from zoo.errors import OutOfRange
from zoo.kernels.collectives import (
    THREADS,  # threads per block
    ring,
    world,
)

PINNED = True  # timed on page-locked host arrays, like every step of the family
BLOCKS_PER_SM = 8  # 8 x 256 = 2048 threads: a full Hopper SM
LIMIT = 2**31  # elements per rank: counts and indices are uint32, i + stride stays below 2^32


@jit
def add_into(dst, dst_start, src, count):
    quads = count // uint32(4)  # whole float4s; the count % 4 tail apart
    i = uint32(cuda.grid(1))  # the float4 this thread starts at: elements 4i .. 4i + 3 of the segment
    stride = uint32(cuda.gridsize(1))  # every thread of the grid: no float4 is visited twice
    while i < quads:
        d0, d1, d2, d3 = load_float4(dst, dst_start + i * uint32(4))  # dst_start a multiple of 4: 16-byte aligned
        s0, s1, s2, s3 = load_float4(src, i * uint32(4))
        store_float4(dst, dst_start + i * uint32(4), d0 + s0, d1 + s1, d2 + s2, d3 + s3)
        i = uint32(i + stride)  # kept 32-bit: numba widens a sum of two uint32 to 64 bits
    tail = quads * uint32(4) + uint32(cuda.grid(1))  # the count % 4 leftovers, one thread each
    if tail < count:
        dst[dst_start + tail] += src[tail]


def validate(x):
    if x.shape[-1] >= LIMIT:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: fewer than 2^31 elements a rank, got {x.shape[-1]}"
        )


def blocks_for(count):
    """Blocks of THREADS threads for ``count`` elements, a float4 a thread: at most a full GPU's worth."""
    return max(1, min((count // 4 + THREADS - 1) // THREADS, BLOCKS_PER_SM * sm_count()))


def allreduce(group, bufs):
    """Sum the ranks' buffers (device arrays, one a rank) into every one of them, in place. Ordered after the
    work queued on the group's main streams, and before the work queued there afterwards; the host does not wait."""
    if group.ranks == 1:
        return  # one rank holds the sum already
    segments = ring.segments(bufs[0].size, group.ranks)
    inbox = group.buffers("ring inbox", ring.longest(segments))  # inbox[q]: on q's GPU, what q - 1 sent it
    links = group.streams("link from the left")  # links[q]: on q's GPU, everything q receives
    # done[q][s % 2]: q has finished step s; two by parity, as q + 1 may still be waiting on step s - 1's
    done = group.events("ring step", 2)
    group.fork(links)
    for s, (reduce, moves) in enumerate(ring.steps(group.ranks)):
        for sender, receiver, segment in moves:
            start, stop = segments[segment]
            link = links[receiver]
            with group.on(receiver):
                # the segment on the sender is the one it finished at step s - 1 (or its own data at step 0)
                (group.forked[sender] if s == 0 else done[sender][(s - 1) % 2]).wait(link)
                if reduce:  # over the link into the inbox, then added into the receiver's copy
                    group.copy(stop - start, (receiver, inbox[receiver], 0), (sender, bufs[sender], start), link)
                    if stop > start:
                        add_into[blocks_for(stop - start), THREADS, link](
                            bufs[receiver], np.uint32(start), inbox[receiver], np.uint32(stop - start)
                        )
                else:  # the complete sum, over the link straight onto the receiver's copy
                    group.copy(stop - start, (receiver, bufs[receiver], start), (sender, bufs[sender], start), link)
                done[receiver][s % 2].record(link)
    group.join(links)


def launch(x, out):
    world.run(x, out, allreduce)  # host arrays: the family sets HOST_INPUTS
