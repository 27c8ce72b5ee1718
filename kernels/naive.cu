// naive.cu -- standard (non-fused) attention, the baseline the FlashAttention papers start from.
//
// What it implements
//   FlashAttention (Dao et al. 2022), Algorithm 0 ("standard attention implementation"):
//     1. S = scale * Q K^T   written to HBM            -> entry `naive_qk`      (tensor-core GEMM)
//     2. P = softmax(S)      read S, write P to HBM    -> entry `naive_softmax` (one CTA per row)
//     3. O = P V             read P, write O           -> entry `naive_pv`      (tensor-core GEMM)
//   S and P are stored in HBM in the input dtype (bf16 / fp16); all arithmetic is fp32.
//   Its HBM traffic is Theta(N d + N^2) (FA1 Theorem 2): the N^2 intermediates S and P are each
//   written once and read once, which is what FlashAttention removes.
//
// Layout and launch: see docs/kernel-contract.md. Q (B,H,Nq,d), K,V (B,KVH,Nk,d), O (B,H,Nq,d),
//   S,P (B,H,Nq,Nk), all contiguous; head h reads K/V head h / (H/KVH) (GQA); 64-bit offsets.
//
// Compile-time parameters (all from the Plan, as -D defines; one entry per compile):
//   NAIVE_QK / NAIVE_SOFTMAX / NAIVE_PV   which entry to build (backward: NAIVE_BWD_DV, _DP,
//                                         _SOFTMAX, _DQ, _DK; see "backward GEMMs" below)
//   ELEM_BF16=1 or ELEM_FP16=1            dtype (common.cuh)
//   HEAD_DIM, IS_CAUSAL,                  every entry (the GEMMs ignore the mask: they compute
//   CAUSAL_BOTTOM_RIGHT                   the full products; only the softmax masks). HEAD_DIM:
//                                         any multiple of 8 (16-byte rows). Causal: row i sees
//                                         keys j <= i + off, off = 0 (top-left, torch's
//                                         is_causal) or Nk - Nq (CAUSAL_BOTTOM_RIGHT, as
//                                         FlashAttention 2.1+); a row that sees no key gets P = 0.
//   BLOCK_M, BLOCK_N, BLOCK_K, STAGES, NUM_WARPS   GEMMs: CTA tile BLOCK_M x BLOCK_N of the
//                                         output, k consumed in BLOCK_K chunks through a
//                                         STAGES-deep cp.async ring (STAGES >= 1), NUM_WARPS warps
//                                         (the warp grid is derived below: the most square warp
//                                         tiles whose sides are multiples of 16).
//   SOFTMAX_THREADS, ROW_IN_SMEM          softmax: threads per row-CTA (multiple of 32, <= 1024);
//                                         stage the row in shared memory (S read once) or not
//                                         (S read twice: online max/sum pass, normalise pass).
//
// GEMM mapping (row-major C = A * B, fp32 accumulators, mma.sync.m16n8k16):
//   naive_qk: A = Q (Nq x d, k-contiguous), B^T = K (Nk x d, k-contiguous: ldmatrix, no trans),
//             k = d; C = S (Nq x Nk), scaled by `scale` in the epilogue.
//   naive_pv: A = P (Nq x Nk, k-contiguous), B = V (Nk x d, n-contiguous: ldmatrix.trans),
//             k = Nk (the long dimension); C = O (Nq x d).
//   Requirements: BLOCK_M % 16 == 0, BLOCK_N % 16 == 0, BLOCK_K % 16 == 0, BLOCK_K / 8 and (for
//   naive_pv) BLOCK_N / 8 in {2, 4} or a multiple of 8 (swizzle). A k (naive_qk: HEAD_DIM) or
//   column count (naive_pv: HEAD_DIM) that is not a multiple of the tile is a ragged edge.
//   Ragged edges: rows/columns/k beyond the matrix are zero-filled (cp.async src-size 0) and
//   never stored. Nk % 8 != 0 (rows of S/P not 16-byte aligned) falls back to element-wise
//   loads of P and element-wise stores of S: correct, slower.
//
// Shared memory (dynamic; byte counts: iosim/kernels.py SPECS[entry].smem and the softmax's
//   Plan): the GEMMs' cp.async ring of A and B k-tiles, re-used by the epilogue to stage the
//   output tile so that global stores are 16-byte and coalesced (no padding: XOR swizzle);
//   naive_softmax: the row of S when ROW_IN_SMEM (+ 256 bytes static for the reduction).
//
// Softmax IO per row i (the Plan's count): reads S[i, 0:nr) once (ROW_IN_SMEM=1) or twice
//   (ROW_IN_SMEM=0), writes P[i, 0:Nk) once (masked entries written as 0), where
//   nr = Nk, or with IS_CAUSAL nr = clamp(i+1+off, 0, Nk) rounded up to a multiple of 8 (capped
//   at Nk) when Nk % 8 == 0 (16-byte vectors), clamp(i+1+off, 0, Nk) otherwise.
//
// Tiles and SOFTMAX_THREADS: the Plan's (iosim/schedules/naive.py QK_TILES, PV_TILES,
//   softmax_threads).
//
// Differences from the previous version: none (this is the baseline). fa1.cu fuses the three
// kernels and never materialises S or P.
#include "common.cuh"

#ifndef HEAD_DIM
#error "HEAD_DIM must be defined (from the Plan)"
#endif
#ifndef IS_CAUSAL
#error "IS_CAUSAL must be defined (from the Plan)"
#endif
#ifndef CAUSAL_BOTTOM_RIGHT
#error "CAUSAL_BOTTOM_RIGHT must be defined (from the Plan)"
#endif

// ------------------------------------------------------------------ local helpers
// Swizzled element offset of chunk `chunk` (8 elements = 16 bytes) of row `row` for rows of C
// chunks. C a multiple of 8: common.cuh's swz. C = 4 or 2: XOR with the row bits that select
// the 16-byte bank group, so that 8 consecutive rows at one logical chunk (one ldmatrix 8x8
// matrix) land in 8 different bank groups.
template <int C>
__device__ __forceinline__ int nv_swz(int row, int chunk) {
    if constexpr (C % 8 == 0) {
        return swz<C>(row, chunk);
    } else if constexpr (C == 4) {
        return row * 32 + ((chunk ^ ((row >> 1) & 3)) << 3);
    } else {
        static_assert(C == 2, "rows of 2, 4 or a multiple of 8 chunks");
        return row * 16 + ((chunk ^ ((row >> 2) & 1)) << 3);
    }
}

#if defined(NAIVE_QK) || defined(NAIVE_PV) || defined(NAIVE_BWD_DV) || defined(NAIVE_BWD_DP) || \
    defined(NAIVE_BWD_DQ) || defined(NAIVE_BWD_DK)
#define NAIVE_GEMM 1
#if !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(BLOCK_K) || !defined(STAGES) || !defined(NUM_WARPS)
#error "GEMM entries need BLOCK_M, BLOCK_N, BLOCK_K, STAGES, NUM_WARPS"
#endif

// Warp grid: WARPS_M x WARPS_N = NUM_WARPS, warp tile (BLOCK_M/WARPS_M) x (BLOCK_N/WARPS_N),
// both multiples of 16, as square as possible (ties: taller).
constexpr int nv_pick_warps_m(int bm, int bn, int nw) {
    int best = -1, best_cost = 1 << 30;
    for (int wm = 1; wm <= nw; wm *= 2) {
        if (nw % wm) continue;
        int wn = nw / wm;
        if (bm % (wm * 16) || bn % (wn * 16)) continue;
        int tm = bm / wm, tn = bn / wn;
        int cost = tm > tn ? tm - tn : tn - tm;
        if (cost < best_cost || (cost == best_cost && tm > bm / best)) { best = wm; best_cost = cost; }
    }
    return best;
}

namespace gemm {
constexpr int BM = BLOCK_M, BN = BLOCK_N, BK = BLOCK_K, NS = STAGES, NW = NUM_WARPS;
constexpr int THREADS = NW * 32;
constexpr int WARPS_M = nv_pick_warps_m(BM, BN, NW);
static_assert(WARPS_M > 0, "no warp grid with 16-multiple warp tiles for BLOCK_M, BLOCK_N, NUM_WARPS");
constexpr int WARPS_N = NW / WARPS_M;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
constexpr int MI = WM / 16;  // m16 tiles per warp
constexpr int NI = WN / 8;   // n8 tiles per warp (even)
constexpr int KCH = BK / 8;  // 16-byte chunks per row of an A tile / K-major B tile
static_assert(BK % 16 == 0, "BLOCK_K must be a multiple of 16");
static_assert(NS >= 1, "STAGES >= 1");
constexpr int A_ELEMS = BM * BK;
constexpr int B_ELEMS = BN * BK;
constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
// CTAs per SM the register allocation must allow: 128 registers/thread at 256 threads,
// 168 at 128 threads (keeps 2-3 CTAs resident so one CTA's epilogue overlaps another's main loop).
constexpr int MIN_BLOCKS = THREADS >= 512 ? 1 : (THREADS >= 256 ? 2 : 3);
}  // namespace gemm

// One CTA computes C[m0:m0+BM, n0:n0+BN] = alpha * A[m0:, :K] * B[:K, n0:] and stores it (in elem)
// to Cout (row-major, ldc). A is row-major (lda, k-contiguous). B_KMAJOR: B is given as B^T,
// row-major (N x K, ldb, k-contiguous), else row-major (K x N, ldb, n-contiguous). A_TRANS: A
// is given as A^T, row-major (K x M, lda, m-contiguous: the backward's P^T and dS^T), read
// with ldmatrix.trans.
template <bool B_KMAJOR, bool A_TRANS = false>
__device__ __forceinline__ void gemm_tile(const elem_t* __restrict__ A, long long lda,
                                          const elem_t* __restrict__ B, long long ldb,
                                          elem_t* __restrict__ Cout, long long ldc,
                                          int M, int N, int K, int m0, int n0, float alpha,
                                          elem_t* smem) {
    using namespace gemm;
    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / WARPS_N) * WM;  // warp's first row inside the tile
    const int wn0 = (warp % WARPS_N) * WN;  // warp's first column inside the tile
    // rows of A 16-byte aligned (always for Q; P iff Nk%8==0), and for A^T whole 8-column chunks
    const bool a_vec = (lda % 8) == 0 && (!A_TRANS || M % 8 == 0);
    const bool c_vec = (ldc % 8) == 0;
    const int KT = (K + BK - 1) / BK;

    // ---- global -> shared for k-tile kt into ring slot s
    auto load_tile = [&](int s, int kt) {
        elem_t* sA = smem + s * STAGE_ELEMS;
        elem_t* sB = sA + A_ELEMS;
        const int k0 = kt * BK;
        if constexpr (A_TRANS) {  // A^T tile: BK rows (k) x BM/8 chunks (m)
            constexpr int MCH = BM / 8;
#pragma unroll
            for (int it = 0; it < (BK * MCH + THREADS - 1) / THREADS; ++it) {
                const int c = tid + it * THREADS;
                if ((BK * MCH) % THREADS != 0 && c >= BK * MCH) break;
                const int r = c / MCH, ch = c % MCH;
                const int gk = k0 + r, gm = m0 + ch * 8;
                elem_t* dst = sA + nv_swz<MCH>(r, ch);
                if (a_vec) {
                    const bool ok = gk < K && gm < M;
                    cp_async_16(smem_u32(dst), ok ? A + (long long)gk * lda + gm : A, ok);
                } else {  // element-wise, zero-filled (Nk % 8 != 0)
                    u32 w[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        u32 lo = 0, hi = 0;
                        if (gk < K && gm + 2 * e < M) lo = A[(long long)gk * lda + gm + 2 * e];
                        if (gk < K && gm + 2 * e + 1 < M) hi = A[(long long)gk * lda + gm + 2 * e + 1];
                        w[e] = lo | (hi << 16);
                    }
                    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
                }
            }
        } else {
        // A: BM rows x KCH chunks
#pragma unroll
        for (int it = 0; it < (BM * KCH + THREADS - 1) / THREADS; ++it) {
            const int c = tid + it * THREADS;
            if ((BM * KCH) % THREADS != 0 && c >= BM * KCH) break;
            const int r = c / KCH, ch = c % KCH;
            const int gr = m0 + r, gk = k0 + ch * 8;
            elem_t* dst = sA + nv_swz<KCH>(r, ch);
            if (a_vec) {
                const bool ok = gr < M && gk < K;
                const elem_t* src = ok ? A + (long long)gr * lda + gk : A;
                cp_async_16(smem_u32(dst), src, ok);
            } else {  // element-wise, zero-filled (P with Nk % 8 != 0)
                u32 w[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    u32 lo = 0, hi = 0;
                    if (gr < M && gk + 2 * e < K) lo = A[(long long)gr * lda + gk + 2 * e];
                    if (gr < M && gk + 2 * e + 1 < K) hi = A[(long long)gr * lda + gk + 2 * e + 1];
                    w[e] = lo | (hi << 16);
                }
                *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
        }
        if constexpr (B_KMAJOR) {  // B^T tile: BN rows (n) x KCH chunks (k)
#pragma unroll
            for (int it = 0; it < (BN * KCH + THREADS - 1) / THREADS; ++it) {
                const int c = tid + it * THREADS;
                if ((BN * KCH) % THREADS != 0 && c >= BN * KCH) break;
                const int r = c / KCH, ch = c % KCH;
                const int gn = n0 + r, gk = k0 + ch * 8;
                const bool ok = gn < N && gk < K;
                const elem_t* src = ok ? B + (long long)gn * ldb + gk : B;
                cp_async_16(smem_u32(sB + nv_swz<KCH>(r, ch)), src, ok);
            }
        } else {  // B tile: BK rows (k) x BN/8 chunks (n); N % 8 == 0 (N = head_dim)
            constexpr int NCH = BN / 8;
#pragma unroll
            for (int it = 0; it < (BK * NCH + THREADS - 1) / THREADS; ++it) {
                const int c = tid + it * THREADS;
                if ((BK * NCH) % THREADS != 0 && c >= BK * NCH) break;
                const int r = c / NCH, ch = c % NCH;
                const int gk = k0 + r, gn = n0 + ch * 8;
                const bool ok = gk < K && gn < N;
                const elem_t* src = ok ? B + (long long)gk * ldb + gn : B;
                cp_async_16(smem_u32(sB + nv_swz<NCH>(r, ch)), src, ok);
            }
        }
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    // ---- tensor-core work on one ring slot
    auto compute = [&](int s) {
        const elem_t* sA = smem + s * STAGE_ELEMS;
        const elem_t* sB = sA + A_ELEMS;
        const u32 aBase = smem_u32(sA), bBase = smem_u32(sB);
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            u32 af[MI][4];
            u32 bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                // matrices: (rows 0-7,k 0-7) (rows 8-15,k 0-7) (rows 0-7,k 8-15) (rows 8-15,k 8-15)
                if constexpr (A_TRANS) {  // stored [k][m]: k rows 0-7 | 8-15, m chunk +0 | +1
                    const int r = kk * 16 + (lane & 7) + ((lane >> 4) << 3);
                    const int ch = (wm0 + mi * 16) / 8 + ((lane >> 3) & 1);
                    ldmatrix_x4_trans(af[mi], aBase + 2u * nv_swz<BM / 8>(r, ch));
                } else {
                    const int r = wm0 + mi * 16 + (lane & 15);
                    const int ch = kk * 2 + (lane >> 4);
                    ldmatrix_x4(af[mi], aBase + 2u * nv_swz<KCH>(r, ch));
                }
            }
#pragma unroll
            for (int nj = 0; nj < NI / 2; ++nj) {
                u32 t[4];
                if constexpr (B_KMAJOR) {
                    // matrices: (n 0-7,k 0-7) (n 0-7,k 8-15) (n 8-15,k 0-7) (n 8-15,k 8-15)
                    const int r = wn0 + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
                    const int ch = kk * 2 + ((lane >> 3) & 1);
                    ldmatrix_x4(t, bBase + 2u * nv_swz<KCH>(r, ch));
                } else {
                    // stored [k][n]; matrices: (k 0-7,n 0-7) (k 8-15,n 0-7) (k 0-7,n 8-15) (k 8-15,n 8-15)
                    const int r = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                    const int ch = (wn0 + nj * 16) / 8 + (lane >> 4);
                    ldmatrix_x4_trans(t, bBase + 2u * nv_swz<BN / 8>(r, ch));
                }
                bf[2 * nj][0] = t[0];
                bf[2 * nj][1] = t[1];
                bf[2 * nj + 1][0] = t[2];
                bf[2 * nj + 1][1] = t[3];
            }
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) mma_m16n8k16(acc[mi][ni], af[mi], bf[ni]);
        }
    };

    // ---- main loop: STAGES-deep cp.async ring over k
    if constexpr (NS == 1) {
        for (int kt = 0; kt < KT; ++kt) {
            if (kt) __syncthreads();
            load_tile(0, kt);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();
            compute(0);
        }
    } else {
#pragma unroll
        for (int s = 0; s < NS - 1; ++s) {
            if (s < KT) load_tile(s, s);
            cp_async_commit();
        }
        for (int kt = 0; kt < KT; ++kt) {
            cp_async_wait<NS - 2>();
            __syncthreads();  // tile kt visible to all; slot (kt-1)%NS free
            const int nk = kt + NS - 1;
            if (nk < KT) load_tile(nk % NS, nk);
            cp_async_commit();
            compute(kt % NS);
        }
        cp_async_wait<0>();
    }
    __syncthreads();  // ring no longer read: re-use it for the output tile

    // ---- epilogue: fragments -> shared (swizzled) -> 16-byte coalesced global stores
    constexpr int CCH = BN / 8;
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int r = wm0 + mi * 16 + g;
            const int ch = (wn0 + ni * 8) >> 3;
            *reinterpret_cast<u32*>(smem + nv_swz<CCH>(r, ch) + 2 * t4) =
                pack2_elem(acc[mi][ni][0] * alpha, acc[mi][ni][1] * alpha);
            *reinterpret_cast<u32*>(smem + nv_swz<CCH>(r + 8, ch) + 2 * t4) =
                pack2_elem(acc[mi][ni][2] * alpha, acc[mi][ni][3] * alpha);
        }
    __syncthreads();
#pragma unroll
    for (int it = 0; it < (BM * CCH + THREADS - 1) / THREADS; ++it) {
        const int c = tid + it * THREADS;
        if ((BM * CCH) % THREADS != 0 && c >= BM * CCH) break;
        const int r = c / CCH, ch = c % CCH;
        const int gr = m0 + r, gc = n0 + ch * 8;
        if (gr >= M || gc >= N) continue;
        const uint4 v = *reinterpret_cast<const uint4*>(smem + nv_swz<CCH>(r, ch));
        elem_t* dst = Cout + (long long)gr * ldc + gc;
        if (c_vec) {
            *reinterpret_cast<uint4*>(dst) = v;
        } else {
            const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 8; ++e)
                if (gc + e < N) dst[e] = (elem_t)((w[e >> 1] >> (16 * (e & 1))) & 0xffffu);
        }
    }
}
#endif  // NAIVE_GEMM

// ------------------------------------------------------------------ naive_qk: S = scale * Q K^T
#ifdef NAIVE_QK
static_assert(HEAD_DIM % 8 == 0, "naive_qk: HEAD_DIM must be a multiple of 8 (16-byte rows)");
extern "C" __global__ void __launch_bounds__(gemm::THREADS, gemm::MIN_BLOCKS)
naive_qk(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, elem_t* __restrict__ S,
         int Nq, int Nk, int H, int KVH, float scale) {
    extern __shared__ __align__(128) unsigned char nv_smem_raw[];
    elem_t* smem = reinterpret_cast<elem_t*>(nv_smem_raw);
    const int bh = blockIdx.z;
    const int b = bh / H, h = bh % H;
    const int kvh = h / (H / KVH);
    const long long d = HEAD_DIM;
    const elem_t* q = Q + (long long)bh * Nq * d;
    const elem_t* k = K + ((long long)b * KVH + kvh) * Nk * d;
    elem_t* s = S + (long long)bh * Nq * Nk;
    gemm_tile<true>(q, d, k, d, s, Nk, Nq, Nk, HEAD_DIM, blockIdx.y * BLOCK_M, blockIdx.x * BLOCK_N,
                    scale, smem);
}
#endif

// ------------------------------------------------------------------ naive_pv: O = P V
#ifdef NAIVE_PV
static_assert(HEAD_DIM % 8 == 0, "naive_pv: HEAD_DIM must be a multiple of 8");
extern "C" __global__ void __launch_bounds__(gemm::THREADS, gemm::MIN_BLOCKS)
naive_pv(const elem_t* __restrict__ P, const elem_t* __restrict__ V, elem_t* __restrict__ O,
         int Nq, int Nk, int H, int KVH) {
    extern __shared__ __align__(128) unsigned char nv_smem_raw[];
    elem_t* smem = reinterpret_cast<elem_t*>(nv_smem_raw);
    const int bh = blockIdx.z;
    const int b = bh / H, h = bh % H;
    const int kvh = h / (H / KVH);
    const long long d = HEAD_DIM;
    const elem_t* p = P + (long long)bh * Nq * Nk;
    const elem_t* v = V + ((long long)b * KVH + kvh) * Nk * d;
    elem_t* o = O + (long long)bh * Nq * d;
    gemm_tile<false>(p, Nk, v, d, o, d, Nq, HEAD_DIM, Nk, blockIdx.y * BLOCK_M, blockIdx.x * BLOCK_N,
                     1.0f, smem);
}
#endif

// ------------------------------------------------------------------ naive_softmax: P = softmax(S)
#ifdef NAIVE_SOFTMAX
#if !defined(SOFTMAX_THREADS) || !defined(ROW_IN_SMEM)
#error "naive_softmax needs SOFTMAX_THREADS and ROW_IN_SMEM"
#endif
static_assert(SOFTMAX_THREADS % 32 == 0 && SOFTMAX_THREADS <= 1024, "SOFTMAX_THREADS: multiple of 32, <= 1024");

// 16-byte read of S that does not allocate in L1 (S is streamed; it is read once, or, with
// ROW_IN_SMEM=0, a second time from L2).
__device__ __forceinline__ uint4 sm_ld16(const elem_t* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// Merge (m, s) pairs of the online softmax, in log2 units: s is a sum of 2^(x - m).
__device__ __forceinline__ void sm_merge(float& m, float& s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    if (mn == IOSIM_NEG_INF) { m = mn; s = 0.f; return; }
    s = s * fast_exp2(m - mn) + s2 * fast_exp2(m2 - mn);
    m = mn;
}

// Fold 8 values (log2 units; masked ones = -inf) into the running (m, s).
__device__ __forceinline__ void sm_fold8(float& m, float& s, const float* x) {
    float vm = x[0];
#pragma unroll
    for (int e = 1; e < 8; ++e) vm = fmaxf(vm, x[e]);
    const float mn = fmaxf(m, vm);
    if (mn == IOSIM_NEG_INF) return;
    float acc = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc += fast_exp2(x[e] - mn);
    s = s * fast_exp2(m - mn) + acc;
    m = mn;
}

extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)
naive_softmax(const elem_t* __restrict__ S, elem_t* __restrict__ P, int Nq, int Nk) {
    constexpr int T = SOFTMAX_THREADS;
    constexpr int NWARP = T / 32;
    constexpr int UNROLL = 4;
    extern __shared__ __align__(16) unsigned char nv_smem_raw[];
    __shared__ float red_m[32], red_s[32];
    const int tid = threadIdx.x;
    const int i = blockIdx.x;  // query row
    const long long row = (long long)blockIdx.y * Nq + i;
    const elem_t* srow = S + row * Nk;
    elem_t* prow = P + row * Nk;
    const int off = CAUSAL_BOTTOM_RIGHT ? Nk - Nq : 0;   // row i sees keys j <= i + off
    const int nvalid = IS_CAUSAL ? max(0, min(Nk, i + 1 + off)) : Nk;  // keys j < nvalid
    float m = IOSIM_NEG_INF, s = 0.f;  // log2 units

    const bool vec = (Nk % 8) == 0;
    if (vec) {
        uint4* rs = reinterpret_cast<uint4*>(nv_smem_raw);
        const int nvr = (nvalid + 7) >> 3;  // vectors read
        // ---- pass 1: load (and stage), running max / sum
        for (int v0 = tid; v0 < nvr; v0 += UNROLL * T) {
            uint4 x[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (v0 + u * T < nvr) x[u] = sm_ld16(srow + 8LL * (v0 + u * T));
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int v = v0 + u * T;
                if (v < nvr) {
                    if (ROW_IN_SMEM) rs[v] = x[u];
                    const u32 w[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
                    float f[8];
#pragma unroll
                    for (int e = 0; e < 4; ++e) unpack2_elem(w[e], f[2 * e], f[2 * e + 1]);
#pragma unroll
                    for (int e = 0; e < 8; ++e)
                        f[e] = (8 * v + e < nvalid) ? f[e] * IOSIM_LOG2E : IOSIM_NEG_INF;
                    sm_fold8(m, s, f);
                }
            }
        }
    } else {
        elem_t* rs = reinterpret_cast<elem_t*>(nv_smem_raw);
        for (int j0 = tid * 8; j0 < nvalid; j0 += 8 * T) {
            float f[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int j = j0 + e;
                f[e] = IOSIM_NEG_INF;
                if (j < nvalid) {
                    const elem_t x = srow[j];
                    if (ROW_IN_SMEM) rs[j] = x;
                    f[e] = elem_to_float(x) * IOSIM_LOG2E;
                }
            }
            sm_fold8(m, s, f);
        }
    }

    // ---- block reduction of (m, s)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        sm_merge(m, s, m2, s2);
    }
    if (NWARP > 1) {
        if ((tid & 31) == 0) { red_m[tid >> 5] = m; red_s[tid >> 5] = s; }
        __syncthreads();
        m = red_m[0];
        s = red_s[0];
#pragma unroll
        for (int w = 1; w < NWARP; ++w) sm_merge(m, s, red_m[w], red_s[w]);
    } else if (ROW_IN_SMEM) {
        __syncthreads();  // staged row visible to all threads
    }
    const float inv = 1.0f / s;

    // ---- pass 2: normalise and write the whole row (masked entries are 0)
    if (vec) {
        const uint4* rs = reinterpret_cast<const uint4*>(nv_smem_raw);
        const int nvr = (nvalid + 7) >> 3, nvt = Nk >> 3;
        for (int v0 = tid; v0 < nvt; v0 += UNROLL * T) {
            uint4 x[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int v = v0 + u * T;
                x[u] = make_uint4(0u, 0u, 0u, 0u);
                if (v < nvr) x[u] = ROW_IN_SMEM ? rs[v] : sm_ld16(srow + 8LL * v);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int v = v0 + u * T;
                if (v < nvt) {
                    const u32 w[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
                    u32 o[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        float lo, hi;
                        unpack2_elem(w[e], lo, hi);
                        const int j = 8 * v + 2 * e;
                        lo = (j < nvalid) ? fast_exp2(lo * IOSIM_LOG2E - m) * inv : 0.f;
                        hi = (j + 1 < nvalid) ? fast_exp2(hi * IOSIM_LOG2E - m) * inv : 0.f;
                        o[e] = pack2_elem(lo, hi);
                    }
                    *reinterpret_cast<uint4*>(prow + 8LL * v) = make_uint4(o[0], o[1], o[2], o[3]);
                }
            }
        }
    } else {
        const elem_t* rs = reinterpret_cast<const elem_t*>(nv_smem_raw);
        for (int j = tid; j < Nk; j += T) {
            float p = 0.f;
            if (j < nvalid) {
                const elem_t x = ROW_IN_SMEM ? rs[j] : srow[j];
                p = fast_exp2(elem_to_float(x) * IOSIM_LOG2E - m) * inv;
            }
            prow[j] = float_to_elem(p);
        }
    }
}
#endif  // NAIVE_SOFTMAX

// ------------------------------------------------------------------ backward GEMMs
// FlashAttention-1 paper, Algorithm 3 (standard attention backward) from the stored P:
//   naive_bwd_dv: dV = P^T dO    A = P^T (P stored Nq x Nk: A_TRANS), B = dO (n-contiguous)
//   naive_bwd_dp: dP = dO V^T    A = dO, B^T = V (k-contiguous), as naive_qk
//   naive_bwd_dq: dQ = scale dS K  A = dS (k-contiguous), B = K (n-contiguous), as naive_pv
//   naive_bwd_dk: dK = scale dS^T Q  A = dS^T (A_TRANS), B = Q (n-contiguous)
// dV, dK go to one (Nk x d) slice per query head (B,H,Nk,d): the output itself when H == KVH,
// else buffers that gqa_reduce.cu sums over each group. Grid (d or Nk tiles, M tiles, B*H).
#if defined(NAIVE_BWD_DV) || defined(NAIVE_BWD_DK)
extern "C" __global__ void __launch_bounds__(gemm::THREADS, gemm::MIN_BLOCKS)
#ifdef NAIVE_BWD_DV
naive_bwd_dv(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C,
             int Nq, int Nk, int H, int KVH) {
    const float alpha = 1.0f;
#else
naive_bwd_dk(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C,
             int Nq, int Nk, int H, int KVH, float alpha) {
#endif
    extern __shared__ __align__(128) unsigned char nv_smem_raw[];
    const long long bh = blockIdx.z, d = HEAD_DIM;
    // A: P or dS (Nq x Nk) of this query head, used transposed; B: dO or Q (Nq x d)
    gemm_tile<false, true>(A + bh * Nq * Nk, Nk, B + bh * Nq * d, d, C + bh * Nk * d, d, Nk,
                           HEAD_DIM, Nq, blockIdx.y * BLOCK_M, blockIdx.x * BLOCK_N, alpha,
                           reinterpret_cast<elem_t*>(nv_smem_raw));
}
#endif

#ifdef NAIVE_BWD_DP
extern "C" __global__ void __launch_bounds__(gemm::THREADS, gemm::MIN_BLOCKS)
naive_bwd_dp(const elem_t* __restrict__ dO, const elem_t* __restrict__ V, elem_t* __restrict__ dP,
             int Nq, int Nk, int H, int KVH) {
    extern __shared__ __align__(128) unsigned char nv_smem_raw[];
    const int bh = blockIdx.z;
    const int b = bh / H, h = bh % H;
    const long long d = HEAD_DIM;
    const elem_t* v = V + ((long long)b * KVH + h / (H / KVH)) * Nk * d;
    gemm_tile<true>(dO + (long long)bh * Nq * d, d, v, d, dP + (long long)bh * Nq * Nk, Nk, Nq, Nk,
                    HEAD_DIM, blockIdx.y * BLOCK_M, blockIdx.x * BLOCK_N, 1.0f,
                    reinterpret_cast<elem_t*>(nv_smem_raw));
}
#endif

#ifdef NAIVE_BWD_DQ
extern "C" __global__ void __launch_bounds__(gemm::THREADS, gemm::MIN_BLOCKS)
naive_bwd_dq(const elem_t* __restrict__ dS, const elem_t* __restrict__ K, elem_t* __restrict__ dQ,
             int Nq, int Nk, int H, int KVH, float scale) {
    extern __shared__ __align__(128) unsigned char nv_smem_raw[];
    const int bh = blockIdx.z;
    const int b = bh / H, h = bh % H;
    const long long d = HEAD_DIM;
    const elem_t* k = K + ((long long)b * KVH + h / (H / KVH)) * Nk * d;
    gemm_tile<false>(dS + (long long)bh * Nq * Nk, Nk, k, d, dQ + (long long)bh * Nq * d, d, Nq,
                     HEAD_DIM, Nk, blockIdx.y * BLOCK_M, blockIdx.x * BLOCK_N, scale,
                     reinterpret_cast<elem_t*>(nv_smem_raw));
}
#endif

// ------------------------------------------------------------------ naive_bwd_softmax
// dS = P ∘ (dP − rowsum(P ∘ dP)), one CTA per row (grid (Nq, B*H)), fp32 math. The causal
// mask needs nothing here: P is 0 where masked, so dS is too. With ROW_IN_SMEM the rows of P
// and dP are staged in shared memory (each read once), else re-read for the second pass.
#ifdef NAIVE_BWD_SOFTMAX
#if !defined(SOFTMAX_THREADS) || !defined(ROW_IN_SMEM)
#error "naive_bwd_softmax needs SOFTMAX_THREADS and ROW_IN_SMEM"
#endif
__device__ __forceinline__ uint4 bw_ld16(const elem_t* p) {  // streamed: no L1 allocation
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ float bw_dot8(uint4 a, uint4 b) {
    const u32 wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w};
    float s = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float a0, a1, b0, b1;
        unpack2_elem(wa[e], a0, a1);
        unpack2_elem(wb[e], b0, b1);
        s = fmaf(a0, b0, fmaf(a1, b1, s));
    }
    return s;
}

__device__ __forceinline__ uint4 bw_ds8(uint4 a, uint4 b, float di) {  // p ∘ (dp − di)
    const u32 wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w};
    u32 o[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float a0, a1, b0, b1;
        unpack2_elem(wa[e], a0, a1);
        unpack2_elem(wb[e], b0, b1);
        o[e] = pack2_elem(a0 * (b0 - di), a1 * (b1 - di));
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
}

extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)
naive_bwd_softmax(const elem_t* __restrict__ P, const elem_t* __restrict__ dP,
                  elem_t* __restrict__ dS, int Nq, int Nk) {
    constexpr int T = SOFTMAX_THREADS;
    constexpr int NWARP = T / 32;
    constexpr int UNROLL = 2;
    extern __shared__ __align__(16) unsigned char nv_smem_raw[];
    __shared__ float red[32];
    const int tid = threadIdx.x;
    const long long row = (long long)blockIdx.y * Nq + blockIdx.x;
    const elem_t* prow = P + row * Nk;
    const elem_t* dprow = dP + row * Nk;
    elem_t* dsrow = dS + row * Nk;
    float acc = 0.f;
    const bool vec = (Nk % 8) == 0;
    const int nv = Nk >> 3;
    if (vec) {  // ---- pass 1: D_i = Σ P∘dP (and stage the rows)
        uint4* sp = reinterpret_cast<uint4*>(nv_smem_raw);
        uint4* sdp = sp + nv;
        for (int v0 = tid; v0 < nv; v0 += UNROLL * T) {
            uint4 a[UNROLL], g[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (v0 + u * T < nv) {
                    a[u] = bw_ld16(prow + 8LL * (v0 + u * T));
                    g[u] = bw_ld16(dprow + 8LL * (v0 + u * T));
                }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (v0 + u * T < nv) {
                    if (ROW_IN_SMEM) { sp[v0 + u * T] = a[u]; sdp[v0 + u * T] = g[u]; }
                    acc += bw_dot8(a[u], g[u]);
                }
        }
    } else {
        elem_t* sp = reinterpret_cast<elem_t*>(nv_smem_raw);
        elem_t* sdp = sp + Nk;
        for (int j = tid; j < Nk; j += T) {
            const elem_t a = prow[j], g = dprow[j];
            if (ROW_IN_SMEM) { sp[j] = a; sdp[j] = g; }
            acc = fmaf(elem_to_float(a), elem_to_float(g), acc);
        }
    }
    acc = warp_sum(acc);
    if (NWARP > 1) {
        if ((tid & 31) == 0) red[tid >> 5] = acc;
        __syncthreads();
        acc = 0.f;
#pragma unroll
        for (int w = 0; w < NWARP; ++w) acc += red[w];
    } else if (ROW_IN_SMEM) {
        __syncthreads();  // staged rows visible to all threads
    }
    const float di = acc;
    // ---- pass 2: dS = P ∘ (dP − D_i)
    if (vec) {
        const uint4* sp = reinterpret_cast<const uint4*>(nv_smem_raw);
        const uint4* sdp = sp + nv;
        for (int v = tid; v < nv; v += T) {
            const uint4 a = ROW_IN_SMEM ? sp[v] : bw_ld16(prow + 8LL * v);
            const uint4 g = ROW_IN_SMEM ? sdp[v] : bw_ld16(dprow + 8LL * v);
            *reinterpret_cast<uint4*>(dsrow + 8LL * v) = bw_ds8(a, g, di);
        }
    } else {
        const elem_t* sp = reinterpret_cast<const elem_t*>(nv_smem_raw);
        const elem_t* sdp = sp + Nk;
        for (int j = tid; j < Nk; j += T) {
            const float a = elem_to_float(ROW_IN_SMEM ? sp[j] : prow[j]);
            const float g = elem_to_float(ROW_IN_SMEM ? sdp[j] : dprow[j]);
            dsrow[j] = float_to_elem(a * (g - di));
        }
    }
}
#endif  // NAIVE_BWD_SOFTMAX
