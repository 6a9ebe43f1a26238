"""Exceptions a user of zoo may want to catch."""


class OutOfRange(ValueError):
    """A valid input that this particular variant cannot take (e.g. more than one block's worth).

    The checks skip such sizes for that variant instead of failing it; a caller
    gets an ordinary ValueError.
    """


class Unsupported(RuntimeError):
    """This step needs more of the GPU than the one present has: a newer compute capability (its ``MIN_CC``).

    ``zoo check``, ``zoo run``, asv and the GPU tests skip the step and show the message, which names what
    the step needs, why, and what this GPU has.
    """


class Unavailable(RuntimeError):
    """A library row (an extra baseline) whose library this machine lacks, such as PyTorch.

    ``zoo run`` leaves the row out and says why; asv skips it. Only an extra baseline may raise it: the
    main baseline is what every row is compared with.
    """
