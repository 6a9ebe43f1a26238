"""TMA's tensor maps, made on the host: ``tensor_map_2d`` encodes a matrix's map with the driver
(``cuTensorMapEncodeTiled``, 128-byte swizzle) and copies it to global memory, where ``zoo.device.wgmma``'s
``tma_load_2d`` reads it (that module's docstring says why there, not as a kernel parameter). In the simulator a
map is a key to the matrix (``zoo.simulator.hopper``).
"""

import numpy as np
from numba import cuda

from zoo import runtime
from zoo.runtime import SIMULATOR
from zoo.runtime.arrays import address

if SIMULATOR:
    from zoo.simulator import hopper

TENSOR_MAP_WORDS = 16  # a CUtensorMap is 128 bytes
# the element types a map may name, by the dtype a matrix has here: bfloat16 and float8 travel as their bits (uint16,
# uint8), which TMA copies as they are (it reads a type only to size an element and fill what lies outside)
DATA_TYPES = {np.dtype(np.float16): "FLOAT16", np.dtype(np.uint16): "UINT16", np.dtype(np.float32): "FLOAT32"}
DATA_TYPES[np.dtype(np.uint8)] = "UINT8"


def tensor_map_2d(matrix, box_rows, box_cols, shape=None):
    """The TMA descriptor of a C-contiguous matrix on the device (float16, uint16, float32 or uint8: DATA_TYPES):
    boxes of box_rows x box_cols (at most 128 bytes a row), 128-byte swizzled, zeros outside the matrix. Returns a
    device array of 16 uint64 (the 128-byte CUtensorMap, 64-byte aligned as cudaMalloc aligns), for ``tma_load_2d``.

    ``shape`` is (rows, cols) when ``matrix`` is a flat view of it (the arrays a step's ``run_tiled`` hands
    over are flat): the map needs the matrix's address and shape only, so no 2-D view is made each call."""
    rows, cols = matrix.shape if shape is None else shape
    if matrix.size != rows * cols:
        raise ValueError(f"a {rows} x {cols} tensor map over an array of {matrix.size} elements")
    dtype = np.dtype(matrix.dtype)
    if dtype not in DATA_TYPES:
        raise ValueError(f"tensor_map_2d takes {', '.join(map(str, DATA_TYPES))}, not {dtype}")
    size = dtype.itemsize
    if box_cols * size > 128 or box_cols * size % 16 or not 0 < box_rows <= 256:
        raise ValueError(
            f"tensor_map_2d takes boxes of 1..256 rows of 16..128 bytes, not {box_rows} x {box_cols} {dtype}"
        )
    if cols * size % 16:
        raise ValueError(
            f"TMA needs rows 16-byte aligned: {cols} columns of {dtype} are not a multiple of {16 // size}"
        )
    if SIMULATOR:
        return hopper.tensor_map(matrix, rows, cols, box_rows, box_cols)
    return _encode(matrix, rows, cols, box_rows, box_cols, size, DATA_TYPES[dtype])


_MAPS = {}  # (address, rows, cols, box) -> the map on the device: encoded and copied once, kept
# Maps kept before the cache starts over. A model's step reads each layer's weights through maps of their own
# (zoo.llm: five GEMMs a layer, 32 layers, the lm_head: 161 weight maps), so a smaller cache would be cleared within
# every step and encode again, each encode a synchronous copy to the device that waits for the GPU; 128 bytes a map
MAX_MAPS = 1024


def _encode(matrix, rows, cols, box_rows, box_cols, size, data_type):
    if runtime.OFFLINE:  # compiled without a driver (zoo show): the map's bytes are never read
        return cuda.to_device(np.zeros(TENSOR_MAP_WORDS, np.uint64))
    key = (address(matrix), rows, cols, box_rows, box_cols, data_type)  # all that the encoding depends on
    found = _MAPS.get(key)
    if found is not None:
        return found
    from cuda.bindings import driver as cu

    err, tmap = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{data_type}"),
        2,
        key[0],
        [cu.cuuint64_t(cols), cu.cuuint64_t(rows)],  # innermost dimension first
        [cu.cuuint64_t(cols * size)],  # bytes from one row to the next
        [cu.cuuint32_t(box_cols), cu.cuuint32_t(box_rows)],
        [cu.cuuint32_t(1), cu.cuuint32_t(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,  # zeros outside the matrix
    )
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled of a {rows} x {cols} matrix, box {box_rows} x {box_cols}: {err!r}")
    if len(_MAPS) >= MAX_MAPS:
        _MAPS.clear()
    found = _MAPS[key] = cuda.to_device(np.array([int(w) for w in tmap.opaque], np.uint64))
    return found
