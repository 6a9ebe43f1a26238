"""Exercises of the gemv family (``python -m zoo exercise list gemv``): host tooling, no step imports it."""


def scale_loads(obs):
    """loads of the scales from global memory into registers, one call (cp.async copies into shared memory are
    not loads a thread waits on, and are not counted)"""
    return sum(1 for r in obs.global_records if not r[4] and obs.role_of(r[5])[0] == "scales")


FIGURES = {"scale_loads": scale_loads}

EXERCISES = {
    "v02": {
        "hints": (
            "Lane l of a warp takes columns l, l + 32, l + 64, ... of the warp's row: one load of the warp reads "
            "32 neighbouring weights.",
            "cuda.shfl_xor_sync(FULL_MASK, s, offset) for offsets 16, 8, 4, 2, 1 leaves every lane holding the "
            "sum of the 32 partial sums; lane 0 writes it.",
        ),
        "lesson_size": (33, 320),
        "lesson": (
            (
                "load_sectors_per_request",
                "<=",
                "the lanes of a warp should read neighbouring weights of one row, not one weight of 32 rows",
            ),
            ("shuffles", ">=", "the lanes' partial sums meet in registers, through warp shuffles"),
        ),
    },
    "v08": {
        "kinds": ("int4", "int4_g64"),  # the ring is int4's; the family's test sizes keep v07's kernel (few runs)
        # 1344 columns: five runs of 256 and one last block; 1216: four runs and three last blocks. 33 rows: one
        # warp turns the ring through every run; 3 rows: two warps share the runs
        "sizes": ((33, 1344), (3, 1216)),
        "lesson_size": (33, 1344),
        "hints": (
            "A warp's ring is STAGES slots of dynamic shared memory (cuda.shared.array(0, uint8), sized by the "
            "launch): a slot holds a run, the 32 rows' 128 bytes of 256 columns, then x of those columns.",
            "cp_async16 asks for 16 bytes without a register: lane l copies chunk l % 8 of row 4 i + l // 8, so "
            "each instruction covers four whole 128-byte lines. cp_async_commit closes a group, and "
            "cp_async_wait_group with STAGES - 2 waits until only the newer runs are in flight.",
            "Rows 128 bytes apart start on the same bank: store chunk c of row r at (c ^ (r % 8)) x 16 and read it "
            "back from the same place, so the eight rows a read touches spread over every bank.",
        ),
        "lesson": (
            (
                "global_loads_per_output",
                "<=",
                "the codes reach shared memory by cp.async, a run ahead, not through the registers of the lanes "
                "that wait for them",
            ),
            ("shared_ways", "<=", "a slot's 16-byte chunks are swizzled by row, so reading a run has no bank conflict"),
        ),
    },
    "v10": {  # the weights in the kernel's own layout: a pack function beside the kernel (Variant.packed)
        "kinds": ("int4", "int4_g64"),  # its kernel's formats, in whole runs; the family's test sizes go to v09's
        # 512 columns: two runs of 256; 1280: five. 33 rows: two groups of 32, the second padded with zeros; 3 rows:
        # two warps share a group's runs
        "sizes": ((33, 512), (3, 1280)),
        "lesson_size": (33, 512),
        "hints": (
            "Write pack(W, x, scales): reshape W (rows padded to a multiple of 32) to [group of 32 rows][row][run]"
            "[128 bytes], swap the row and run axes and make it contiguous, so that a run of a warp's 32 rows is "
            "4 KB in one piece; the scales likewise, a run's 32 x 2 (or 4) in one piece. The step's launch then "
            "gets packed arrays wherever it runs (Variant.packed).",
            "Give the packed W a shape the row-major one cannot have, (rows / 32, 16 in), so that launch can tell "
            "them apart and refuse a W that was not packed instead of computing a wrong answer.",
            "In the kernel the addresses change: copy instruction i of lane l reads bytes 512 i + 16 l of the "
            "run, the run at 4096 x its index in the warp's group. A slot grows by the run's scales, one cp.async "
            "of 4 bytes a lane (groups of 128) or 8 (64), lane l's right after lane l - 1's, in the commit group of "
            "the run's codes; each lane reads its row's scales out of the slot, and the slot is refilled once the "
            "run is in registers, before its math.",
        ),
        "lesson": (
            (
                "copy_pieces_per_request",
                "<=",
                "each warp-wide copy reads one piece of memory: the codes' 512 bytes and the 32 rows' scales lie "
                "one after another in the packed layout, not a row apart",
            ),
        ),
    },
}
