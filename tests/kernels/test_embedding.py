"""Embedding beyond the generic checks: ids outside the table are refused on the host, zeros on the device."""

import numpy as np
import pytest
from numba import cuda

import zoo

EMBEDDING = zoo.family("embedding")


def test_an_id_outside_the_table_is_refused_before_a_launch():
    table, ids = EMBEDDING.make_inputs((3, 10, 8), 0)
    ids[1] = 10
    with pytest.raises(ValueError, match="token ids"):
        EMBEDDING["v02"](table, ids)


@pytest.mark.parametrize("variant", list(EMBEDDING), ids=lambda v: v.name)
def test_on_the_device_an_outside_id_reads_nothing_and_writes_zeros(variant):
    table, ids = EMBEDDING.make_inputs((3, 10, 16), 0)
    ids[:] = [2, -1, 10]
    out = cuda.to_device(np.full((3, 16), np.nan, np.float32))
    variant.module.launch(cuda.to_device(table), cuda.to_device(ids), out)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[0], table[2].astype(np.float32))
    assert (got[1:] == 0).all()
