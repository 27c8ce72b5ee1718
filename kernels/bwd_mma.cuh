// bwd_mma.cuh -- one k slice of the backward passes' warp GEMMs on swizzled shared tiles,
// shared by fa2_bwd.cu and fa1.cu's fa1_bwd (the same products, tiles and warp grids).
//
// Tiles are row-major in shared memory, XOR-swizzled in 16-byte chunks (chunk ^ (row & 7), see
// swz in common.cuh). acc holds MT m16 tiles by NT n8 tiles of one warp (mma.sync m16n8k16,
// fp32), at k slice kk (16 columns of the contraction). Lane patterns (as fa2.cu): "A" rows
// lane & 15 with key akey = (lane >> 4) ^ (lane & 7); "B" rows (lane & 7) + 8 (lane >> 4) with
// key bkey = ((lane >> 3) & 1) ^ (lane & 7).
#pragma once
#include "common.cuh"

namespace bwd_mma {
// Byte offset of 16-byte chunk pair kk in a swizzled row, for a lane whose key is
// (its chunk bit) ^ (row & 7). The key is < 8, so only the low 3 bits of 2*kk meet it: 4
// run-time values per key, the rest a constant (fewer live registers).
__device__ __forceinline__ u32 chunk_off(u32 lane_key, int kk) {
    return ((u32)((2 * kk) & ~7) << 4) + ((((u32)((2 * kk) & 7)) ^ lane_key) << 4);
}

// acc += A Bᵀ over k slice kk: A rows a0 .. a0+16·MT of a tile with AW elements a row, B rows
// b0 .. b0+8·NT of a tile with BW elements a row (both k along the row; Sᵀ = K Qᵀ, dPᵀ = V dOᵀ).
// An odd NT ends with one n8 tile (ldmatrix_x2: lanes 0-15 address it).
template <int MT, int NT, int AW, int BW>
__device__ __forceinline__ void a_bt(float (&acc)[MT][NT][4], u32 sA, int a0, u32 sB, int b0,
                                     int kk, int arow, u32 akey, int brow, u32 bkey) {
    u32 a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        ldmatrix_x4(a[mt], sA + (u32)((a0 + mt * 16 + arow) * AW * 2) + chunk_off(akey, kk));
#pragma unroll
    for (int nn = 0; nn < NT / 2; ++nn) {
        u32 b[4];
        ldmatrix_x4(b, sB + (u32)((b0 + nn * 16 + brow) * BW * 2) + chunk_off(bkey, kk));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            mma_m16n8k16(acc[mt][2 * nn], a[mt], b);
            mma_m16n8k16(acc[mt][2 * nn + 1], a[mt], b + 2);
        }
    }
    if constexpr (NT % 2 == 1) {
        u32 b[2];
        ldmatrix_x2(b, sB + (u32)((b0 + (NT - 1) * 8 + brow) * BW * 2) + chunk_off(bkey, kk));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) mma_m16n8k16(acc[mt][NT - 1], a[mt], b);
    }
}

// acc += a B: the warp's A fragments a (MT m16 tiles, this k slice) times B, the rows kk·16 ..
// of a tile with BW elements a row, columns from chunk pair bp (ldmatrix.trans).
template <int MT, int NT, int BW>
__device__ __forceinline__ void frag_b(float (&acc)[MT][NT][4], const u32 (&a)[MT][4], u32 sB,
                                       int bp, int kk, int arow, u32 akey) {
#pragma unroll
    for (int dn = 0; dn < NT / 2; ++dn) {
        u32 bt[4];
        ldmatrix_x4_trans(bt, sB + (u32)((kk * 16 + arow) * BW * 2) + chunk_off(akey, bp + dn));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            mma_m16n8k16(acc[mt][2 * dn], a[mt], bt);
            mma_m16n8k16(acc[mt][2 * dn + 1], a[mt], bt + 2);
        }
    }
}

// acc += A B over k slice kk: A rows a0 .. a0+16·MT (AW elements a row, k along it), B as in
// frag_b (dV += Pᵀ dO, dK += dSᵀ Q).
template <int MT, int NT, int AW, int BW>
__device__ __forceinline__ void a_b(float (&acc)[MT][NT][4], u32 sA, int a0, u32 sB, int bp,
                                    int kk, int arow, u32 akey) {
    u32 a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        ldmatrix_x4(a[mt], sA + (u32)((a0 + mt * 16 + arow) * AW * 2) + chunk_off(akey, kk));
    frag_b<MT, NT, BW>(acc, a, sB, bp, kk, arow, akey);
}

// acc += Aᵀ B over k slice kk: A stored transposed (rows = k, AW elements a row; its rows
// a0 .. a0+16·MT are the columns from chunk pair a0/16), B as in frag_b (dQ += dS K from dSᵀ).
template <int MT, int NT, int AW, int BW>
__device__ __forceinline__ void at_b(float (&acc)[MT][NT][4], u32 sA, int a0, u32 sB, int bp,
                                     int kk, int arow, u32 akey, int brow, u32 bkey) {
    u32 a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        ldmatrix_x4_trans(a[mt], sA + (u32)((kk * 16 + brow) * AW * 2) + chunk_off(bkey, (a0 + mt * 16) / 16));
    frag_b<MT, NT, BW>(acc, a, sB, bp, kk, arow, akey);
}
}  // namespace bwd_mma
