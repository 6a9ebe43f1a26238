"""Buckets overlapped with their producer: each bucket's ring starts once that bucket exists, all joined at the end.

Changes:
    v04's pipelined ring runs on a range of the buffers, a bucket
    (``allreduce_bucket``): the ring's segments are the bucket's, and it forks
    from the main streams at the moment it is called, so it waits only for the
    work that produced that bucket, and is not joined: ``finish`` joins every
    bucket at once. The inbox is kept at its largest (a smaller last bucket
    must not reallocate it under the buckets still in flight). ``launch`` copies the stack in bucket by bucket (BUCKET
    elements, ``ring.buckets``), starting each bucket's ring right after its
    copy in. In a training step the producer is the backward pass: a layer's
    gradients are a bucket, started while the next layer computes
    (``python -m zoo dataparallel``).

Why it is faster:
    The all-reduce no longer waits for the whole buffer: bucket b crosses the
    links while bucket b + 1 is still being produced (copied in here, computed
    in training), so the exchange hides behind the work that feeds it and only
    the last bucket's ring is left when the producer finishes. Buckets, like
    pieces, stay large: each costs the host a fork and a ring's worth of issues.
"""

import numpy as np

from zoo.device import cuda, sm_count, uint32
from zoo.device.jit import jit
from zoo.device.memory import load_float4, store_float4
from zoo.errors import OutOfRange
from zoo.kernels.collectives import (
    BUCKET,  # elements: 64 MB a bucket (PyTorch's DDP takes 25 MB)
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


def lanes_of(group):
    """The two streams a rank, (even pieces, odd pieces), that every bucket's ring runs on."""
    return group.streams("even pieces"), group.streams("odd pieces")


def allreduce_bucket(group, bufs, lo, hi, min_piece=MIN_PIECE, max_pieces=MAX_PIECES):
    """Start the all-reduce of bufs[lo:hi] (lo a multiple of ring.ALIGN): ordered after the work queued on the
    main streams so far, not before anything queued there later (``finish`` orders that)."""
    if group.ranks == 1:
        return  # one rank holds the sum already
    segments = [(lo + a, lo + b) for a, b in ring.segments(hi - lo, group.ranks)]  # the bucket's, 256-byte aligned
    cuts = [ring.pieces(a, b, min_piece * group.ranks, max_pieces) for a, b in segments]  # each segment's pieces
    most = max(len(c) for c in cuts)  # pieces of the longest segment
    need = ring.aligned(max(ring.longest(c) for c in cuts))  # the longest piece, 256-byte aligned
    # inbox[q]: two slots on q's GPU, slot k % 2 for piece k, kept at their largest: a bucket of another size must not
    # free and allocate them while earlier buckets are in flight (a free may wait for the whole device)
    inbox = group.buffers_at_least("bucket inbox", 2 * need)
    slot = inbox[0].size // 2
    lanes = lanes_of(group)  # lanes[k % 2][q]: on q's GPU
    # done[q][(s % 2) * most + k]: q has finished piece k of step s; two sets by parity, as q + 1 may still be
    # waiting on step s - 1's
    done = group.events("piece step", 2 * most)
    group.fork(*lanes)  # this bucket waits for what the main streams hold now: its producer, and no later work
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


def finish(group):
    """Order the work queued on the main streams from now on after every bucket started so far."""
    group.join(*lanes_of(group))


def allreduce(group, bufs, bucket=BUCKET, min_piece=MIN_PIECE, max_pieces=MAX_PIECES):
    """The whole buffers, bucket after bucket, then joined: what v04's ``allreduce`` does, in buckets."""
    for lo, hi in ring.buckets(bufs[0].size, bucket):
        allreduce_bucket(group, bufs, lo, hi, min_piece, max_pieces)
    finish(group)


def run(x, out, bucket=BUCKET):
    """out[r] = the sum over ranks of x (host arrays): each bucket's ring starts right after its copy in."""
    world.check_run(x, out)
    group = world.group(x.shape[0])
    try:
        bufs = group.buffers("data", x.shape[1])
        for lo, hi in ring.buckets(x.shape[1], bucket):
            group.place(x, start=lo, stop=hi)  # bucket lo:hi of every rank, on its main stream
            allreduce_bucket(group, bufs, lo, hi)  # crosses the links while the next bucket is copied in
        finish(group)
        return group.collect(bufs, out)
    except BaseException:
        group.synchronize()  # nothing still in flight may touch a buffer once the error has left
        raise


def launch(x, out):
    run(x, out)  # host arrays: the family sets HOST_INPUTS
