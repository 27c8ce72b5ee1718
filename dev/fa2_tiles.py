"""Tile candidates measured by dev/fa2_check.py while developing kernels/fa2.cu (a dev record;

The Plan (iosim/plan.py) owns tiling; this table records what was measured fastest on the GPU
(dev/fa2_check.py) so the Plan and the tests can start from it. The shared-memory formula must
match the header of kernels/fa2.cu.
"""

from __future__ import annotations

from typing import NamedTuple


class Fa2Tiles(NamedTuple):
    block_m: int
    block_n: int
    num_warps: int
    stages: int


# head_dim -> tiles; measured on H100 SXM (bf16, batch*seqlen = 16384, heads*head_dim = 2048).
FA2_TILES: dict[int, Fa2Tiles] = {
    64: Fa2Tiles(128, 64, 4, 2),
    128: Fa2Tiles(128, 32, 4, 2),
    256: Fa2Tiles(128, 64, 8, 1),
}


def fa2_smem_bytes(head_dim: int, block_m: int, block_n: int, stages: int, elem_bytes: int = 2) -> int:
    """Dynamic shared memory of fa2_fwd: one Q tile plus `stages` K and `stages` V tiles."""
    return (block_m + 2 * stages * block_n) * head_dim * elem_bytes


def fa2_defines(head_dim: int, causal: bool, tiles: Fa2Tiles | None = None) -> dict[str, int]:
    """The -D defines of fa2_fwd for `head_dim` (tiles default to FA2_TILES)."""
    t = tiles or FA2_TILES[head_dim]
    return {"HEAD_DIM": head_dim, "BLOCK_M": t.block_m, "BLOCK_N": t.block_n,
            "NUM_WARPS": t.num_warps, "STAGES": t.stages, "IS_CAUSAL": int(bool(causal))}
