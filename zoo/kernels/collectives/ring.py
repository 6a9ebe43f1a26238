"""The ring all-reduce's schedule: which rank sends which part of the buffer to whom, at each step.

Pure Python, no device: the steps that run a ring (v03 to v05) take their indices from
here, and the tests check the arithmetic for every rank count on irregular sizes
(``simulate`` runs the schedule on NumPy rows).

The buffer of n elements is cut into R segments, one per rank. In the reduce-scatter,
at step s (s = 0 .. R-2) rank r sends segment (r - s) mod R to rank r + 1, which adds it
into its own copy of that segment; the segment a rank sends is the one it has just
added into, so after R - 1 steps rank r holds the complete sum of segment (r + 1) mod R.
In the all-gather, at step s rank r sends segment (r + 1 - s) mod R to rank r + 1,
which overwrites its copy: after R - 1 more steps every rank holds every sum.
Each rank sends and receives (R - 1) / R of the buffer in each phase, whatever R is:
the ring's bus bandwidth does not fall as ranks are added.

Segment starts are multiples of ALIGN elements, so every segment, and every piece of
one (``pieces``), starts on a 256-byte boundary: the add kernels read it as float4s
and the copy engines move whole lines. The last segments may be shorter, or empty
when n < R * ALIGN.
"""

ALIGN = 64  # elements: 256 bytes of float32


def _round_up(count, multiple):
    return -(-count // multiple) * multiple


def segments(n, ranks, align=ALIGN):
    """(start, stop) of the ranks' R segments of [0, n): starts multiples of ``align``, lengths as equal as
    that allows (the first segments full, the last ones shorter or empty)."""
    if n < 0 or ranks < 1 or align < 1:
        raise ValueError(f"segments needs n >= 0, ranks >= 1 and align >= 1, got {n}, {ranks}, {align}")
    per_rank = _round_up(-(-n // ranks), align)  # ceil(n / R), rounded up to the alignment
    return [(min(r * per_rank, n), min((r + 1) * per_rank, n)) for r in range(ranks)]


def pieces(start, stop, min_piece, max_pieces, align=ALIGN):
    """(start, stop) of the pieces a segment is sent in: at most ``max_pieces``, none shorter than
    ``min_piece`` elements (but the last), starts multiples of ``align`` from ``start``; [] when empty."""
    length = stop - start
    if length <= 0:
        return []
    count = max(1, min(max_pieces, length // max(min_piece, 1)))
    size = _round_up(-(-length // count), align)
    return [(a, min(a + size, stop)) for a in range(start, stop, size)]


def buckets(n, bucket, align=ALIGN):
    """(start, stop) of consecutive buckets of ``bucket`` elements (rounded up to ``align``) covering [0, n)."""
    size = _round_up(max(bucket, 1), align)
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def aligned(count, align=ALIGN):
    """count rounded up to a multiple of ``align``: a slot that keeps the next one aligned."""
    return _round_up(count, align)


def longest(spans):
    """The length of the longest (start, stop) span (0 for none)."""
    return max((stop - start for start, stop in spans), default=0)


def reduce_scatter(ranks):
    """[step][move] = (sender, receiver, segment) of the R - 1 reduce-scatter steps: the receiver adds."""
    return [[(r, (r + 1) % ranks, (r - s) % ranks) for r in range(ranks)] for s in range(ranks - 1)]


def all_gather(ranks):
    """[step][move] = (sender, receiver, segment) of the R - 1 all-gather steps: the receiver overwrites."""
    return [[(r, (r + 1) % ranks, (r + 1 - s) % ranks) for r in range(ranks)] for s in range(ranks - 1)]


def steps(ranks):
    """The 2 (R - 1) steps in order, each (reduce, moves): reduce is True in the reduce-scatter (the receiver
    adds what arrives) and False in the all-gather (it overwrites). At step t each rank receives the segment
    its sender received at step t - 1: a step waits for the one before it on the sender, and nothing else."""
    return [(True, m) for m in reduce_scatter(ranks)] + [(False, m) for m in all_gather(ranks)]


def owner(segment, ranks):
    """The rank that holds segment's complete sum after the reduce-scatter."""
    return (segment - 1) % ranks


def simulate(rows, align=ALIGN, min_piece=None, max_pieces=1):
    """Run the schedule on a list of R NumPy rows, in place, segment by segment and piece by piece, as the
    steps do on devices (the receiver's inbox holds a copy of what was sent); returns the rows."""
    ranks, n = len(rows), len(rows[0])
    spans = segments(n, ranks, align)
    for reduce, moves in steps(ranks):
        for sender, receiver, segment in moves:
            for a, b in pieces(*spans[segment], min_piece or n or 1, max_pieces, align):
                inbox = rows[sender][a:b].copy()  # what crosses the link
                if reduce:
                    rows[receiver][a:b] += inbox
                else:
                    rows[receiver][a:b] = inbox
    return rows
