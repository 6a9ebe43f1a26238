"""Pipelined ring: each segment sent in pieces on two streams a rank, so one piece's add overlaps the next's copy.

Changes:
    Each segment is cut into up to MAX_PIECES pieces of at least R x MIN_PIECE
    elements (``ring.pieces``, starts still 256-byte aligned). Piece k of every
    step goes on lane k % 2 of the receiver (two streams a rank instead of one),
    into inbox slot k % 2, so a lane's next copy reuses a slot only after its own
    add. ``done`` is now per piece: piece k of step s waits for piece k of step
    s - 1 on the sender, not for the whole segment. ``add_into`` takes the
    inbox slot's first element too.

Why it is faster:
    While one lane adds piece k the other lane's copy of piece k + 1 holds the
    link, so the link no longer idles through the adds; and piece k of the next
    step starts as soon as piece k of this one is done on the sender, so the
    steps overlap too, as NCCL's chunked ring does. The price is an event, a
    copy and a launch per piece: pieces stay large (the host issues each in
    tens of microseconds).
"""

import numpy as np

from zoo.device import cuda, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.memory import load_float4, store_float4
from zoo.errors import OutOfRange
from zoo.kernels.collectives import (
    MIN_PIECE,  # elements a piece, times the rank count
    THREADS,  # threads per block
    ring,
    world,
)

PINNED = True  # timed on page-locked host arrays, like every step of the family
BLOCKS_PER_SM = 8  # 8 x 256 = 2048 threads: a full Hopper SM
LIMIT = 2**31  # elements per rank: counts and indices are uint32, i + stride stays below 2^32
# The host issues a piece on each of the R receivers of a step (a wait, a copy, a launch, a record: about 20 us) in the
# time one piece takes to cross a link (at about 400 GB/s): pieces of less than R x 8 MB would leave the links waiting.
MAX_PIECES = 4  # per segment: more pieces, more issue time per step on the host


@jit
def add_into(dst, dst_start, src, src_start, count):
    quads = count // uint32(4)  # whole float4s; the count % 4 tail apart
    i = uint32(cuda.grid(1))  # the float4 this thread starts at: elements 4i .. 4i + 3 of the piece
    stride = uint32(cuda.gridsize(1))  # every thread of the grid: no float4 is visited twice
    while i < quads:
        d0, d1, d2, d3 = load_float4(dst, dst_start + i * uint32(4))  # both starts multiples of 4: 16-byte aligned
        s0, s1, s2, s3 = load_float4(src, src_start + i * uint32(4))
        store_float4(dst, dst_start + i * uint32(4), d0 + s0, d1 + s1, d2 + s2, d3 + s3)
        i = uint32(i + stride)  # kept 32-bit: numba widens a sum of two uint32 to 64 bits
    tail = quads * uint32(4) + uint32(cuda.grid(1))  # the count % 4 leftovers, one thread each
    if tail < count:
        dst[dst_start + tail] += src[src_start + tail]


def validate(x):
    if x.shape[-1] >= LIMIT:
        raise OutOfRange(
            f"{__name__.rsplit('.', 1)[-1]} indexes with uint32: fewer than 2^31 elements a rank, got {x.shape[-1]}"
        )


def blocks_for(count):
    """Blocks of THREADS threads for ``count`` elements, a float4 a thread: at most a full GPU's worth."""
    return max(1, min((count // 4 + THREADS - 1) // THREADS, BLOCKS_PER_SM * sm_count()))


def allreduce(group, bufs, min_piece=MIN_PIECE, max_pieces=MAX_PIECES):
    """Sum the ranks' buffers (device arrays, one a rank) into every one of them, in place. Ordered after the
    work queued on the group's main streams, and before the work queued there afterwards; the host does not wait."""
    if group.ranks == 1:
        return  # one rank holds the sum already
    segments = ring.segments(bufs[0].size, group.ranks)
    cuts = [ring.pieces(a, b, min_piece * group.ranks, max_pieces) for a, b in segments]  # each segment's pieces
    most = max(len(c) for c in cuts)  # pieces of the longest segment
    slot = ring.aligned(max(ring.longest(c) for c in cuts))  # an inbox slot: the longest piece, 256-byte aligned
    inbox = group.buffers("piece inbox", 2 * slot)  # inbox[q]: two slots on q's GPU, slot k % 2 for piece k
    lanes = (group.streams("even pieces"), group.streams("odd pieces"))  # lanes[k % 2][q]: on q's GPU
    # done[q][(s % 2) * most + k]: q has finished piece k of step s; two sets by parity, as q + 1 may still be
    # waiting on step s - 1's
    done = group.events("piece step", 2 * most)
    group.fork(*lanes)
    for s, (reduce, moves) in enumerate(ring.steps(group.ranks)):
        for sender, receiver, segment in moves:
            with group.on(receiver):
                for k, (start, stop) in enumerate(cuts[segment]):
                    lane = lanes[k % 2][receiver]
                    # piece k on the sender is final once the sender has finished piece k of step s - 1
                    (group.forked[sender] if s == 0 else done[sender][(s - 1) % 2 * most + k]).wait(lane)
                    if reduce:  # into this lane's inbox slot, then added into the receiver's copy
                        first = (k % 2) * slot
                        group.copy(
                            stop - start, (receiver, inbox[receiver], first), (sender, bufs[sender], start), lane
                        )
                        add_into[blocks_for(stop - start), THREADS, lane](
                            bufs[receiver], np.uint32(start), inbox[receiver], np.uint32(first), np.uint32(stop - start)
                        )
                    else:  # the complete sum, straight onto the receiver's copy
                        group.copy(stop - start, (receiver, bufs[receiver], start), (sender, bufs[sender], start), lane)
                    done[receiver][s % 2 * most + k].record(lane)
    group.join(*lanes)


def launch(x, out):
    world.run(x, out, allreduce)  # host arrays: the family sets HOST_INPUTS
