"""Exceptions a user of zoo may want to catch."""


class OutOfRange(ValueError):
    """A valid input that this particular variant cannot take (e.g. more than one block's worth).

    The checks skip such sizes for that variant instead of failing it; a caller
    gets an ordinary ValueError.
    """
