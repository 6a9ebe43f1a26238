"""Saving a matplotlib figure as a PNG whose bytes depend on the figure alone.

matplotlib writes the PNG's Software text (its version) unless told not to, so the same chart drawn by
another install differs byte for byte, and a report that rewrites every picture shows them all as changed.
``save`` leaves the metadata out, fixes the resolution, and writes the file only when its bytes differ:
``zoo report`` run twice over the same results touches nothing.
"""

import io

NO_METADATA = {"Software": None}  # PNG text chunks: matplotlib adds no date to a PNG, only its version


def save(fig, path, dpi):
    """Write ``fig`` to ``path`` as a PNG at ``dpi``; True when the file is new or its bytes changed."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata=NO_METADATA)
    data = buffer.getvalue()
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True
