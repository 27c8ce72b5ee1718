// fa1.cu -- FlashAttention-1 forward, Algorithm 1 of Dao et al. 2022 ("FlashAttention: Fast and
// Memory-Efficient Exact Attention with IO-Awareness"), implemented faithfully; and its backward,
// Algorithm 4 (below, "backward").
//
// What it implements
//   fa1_init: Algorithm 1 line 2: O = 0 (here Oacc, fp32), l = 0, m = -inf in HBM.
//   fa1_fwd:  Algorithm 1 lines 5-15. One CTA per (query-row split, head, batch) (grid
//     (ceil(Nq/SPLIT_ROWS), H, B)): split s owns query rows [s*SPLIT_ROWS, (s+1)*SPLIT_ROWS), as
//     the FlashAttention-1 library split a head's rows when batch*heads could not fill the GPU
//     (the Plan picks SPLIT_ROWS; Nq <= SPLIT_ROWS: one CTA per head, the paper's algorithm
//     verbatim). Each split runs Algorithm 1's loops over its own rows:
//     for j in blocks of K/V (BLOCK_N = Bc rows):                  outer loop, line 5
//       load K_j, V_j into shared memory                           line 6
//       for i in this split's blocks of Q (BLOCK_M = Br rows):     inner loop, line 7
//         load Q_i (shared), Oacc_i, l_i, m_i (registers) from HBM line 8
//         S_ij = scale * Q_i K_j^T                                 line 9   (mma.sync)
//         m~ = rowmax(S_ij), P~ = exp(S_ij - m~), l~ = rowsum(P~)  line 10
//         m_new = max(m_i, m~), l_new = e^(m_i-m_new) l_i + e^(m~-m_new) l~          line 11
//         Oacc_i = diag(l_new)^-1 (diag(l_i) e^(m_i-m_new) Oacc_i + e^(m~-m_new) P~ V_j)
//                                                                  line 12  (mma.sync)
//         write Oacc_i, l_i = l_new, m_i = m_new to HBM            lines 12-13
//     At the last outer step that visits block i, O_i is written in the input dtype (to O)
//     instead of Oacc_i (l, m are still written). Line 12 is evaluated as
//     Oacc_i = (l_i e^(m_i-m_new) / l_new) Oacc_i + ((e^(m~-m_new) / l_new) P~) V_j, i.e. the
//     P~ V_j product accumulates straight into the rescaled Oacc_i (no second accumulator).
//   Causal (IS_CAUSAL: query r sees keys c <= r + off, off = 0 top-left as torch's is_causal, or
//   Nk - Nq with CAUSAL_BOTTOM_RIGHT as FlashAttention 2.1+): block (i, j) is skipped entirely
//   when j*Bc > i*Br + Br - 1 + off; blocks that straddle the diagonal are masked element-wise.
//   For outer step j the inner loop therefore starts at i = max(0, floor((j*Bc - off) / Br)) (or
//   the split's first block, if later), and
//   block i's last outer step is min(Tc - 1, floor((i*Br + Br - 1 + off) / Bc)). Blocks with no
//   visible key at all (bottom-right, Nq > Nk: last step < 0) get O = 0 before the loop; rows
//   that see no key inside a visited block end with l = 0, O = 0 (LSE = m + log l = -inf).
//
// Layout and launch: docs/kernel-contract.md. Q (B,H,Nq,d), K,V (B,KVH,Nk,d), O (B,H,Nq,d) in the
//   input dtype; Oacc (B,H,Nq,d) fp32; L = l and M = m (natural-log units), (B,H,Nq) fp32.
//   GQA: head h reads K/V head h / (H/KVH). 64-bit offsets. Nq, Nk need not be tile multiples:
//   K/V rows >= Nk are zero-filled and masked, Q rows >= Nq zero-filled and never stored.
//
// Compile-time parameters (from the Plan, -D): FA1_INIT / FA1_FWD (entry), ELEM_BF16 / ELEM_FP16,
//   HEAD_DIM (a multiple of 8 up to 256: the row length in HBM), HEAD_DIM_PAD (HEAD_DIM rounded
//   up to a multiple of 64: the row length of the swizzled shared tiles; the products run over
//   HEAD_DIM rounded up to 16, the MMA's k, with the chunk past HEAD_DIM zero-filled and the rest
//   of the padding never loaded or read), BLOCK_M = Br, BLOCK_N = Bc (multiple of 16),
//   NUM_WARPS (warps split Br: each warp owns Br/NUM_WARPS rows, a multiple of 16), IS_CAUSAL,
//   CAUSAL_BOTTOM_RIGHT, SPLIT_ROWS (fa1_fwd: query rows per CTA, a multiple of BLOCK_M; every
//   split re-reads the K/V blocks its rows see).
//   fa1_init uses HEAD_DIM and BLOCK_M (rows per CTA); its thread count is free (the Plan's).
//
// Shared memory (fa1_fwd, dynamic): K_j, V_j, Q_i of HEAD_DIM_PAD-element rows (XOR swizzle);
//   the byte count: iosim/kernels.py SPECS["fa1_fwd"].smem. fa1_init: none.
// Registers: per thread MI*Bc/2 fp32 for S_ij and MI*d/2 fp32 for Oacc_i (MI = Br/(16*NUM_WARPS)),
//   so the tiles are capped by the register file, not by shared memory:
//   Bc <= 128 for d <= 128, Bc <= 64 for d = 256 (with MI = 1, i.e. NUM_WARPS = Br/16).
//   The tiles: the Plan's (iosim/schedules/fa1.py tiles(), the paper's Bc capped as above).
//
// What limits it: the Oacc/l/m round trip through HBM at every inner step:
//   Tc * Nq * d * 4 bytes read and as many written per (b, h), against Nq*d*2 for Q_i reads
//   and splits*2*Nk*d*2 for K/V (each split reads K/V once); and few CTAs where the Plan keeps
//   few splits (each CTA is sequential over its Tc*(SPLIT_ROWS/Br) steps). The next step's Q_i is prefetched with cp.async during the current
//   step and Oacc_i's loads are issued before S_ij is computed, so their latency overlaps the
//   QK^T product; nothing else overlaps (Algorithm 1 has no pipelining across steps).
//
// Difference from the previous version (naive.cu): S and P never reach HBM; the three kernels
//   become one, tiled so that K_j, V_j, Q_i, S_ij fit on chip, with the online-softmax
//   rescaling of Oacc_i. Its HBM traffic is Theta(N^2 d^2 / M) instead of Theta(N d + N^2).
//   fa2.cu then swaps the loops (Q outer, one CTA per Q block: no Oacc round trips, more CTAs)
//   and defers the 1/l normalisation to the end.
#include "bwd_mma.cuh"

#ifndef HEAD_DIM
#error "HEAD_DIM must be defined (from the Plan)"
#endif
#ifndef BLOCK_M
#error "BLOCK_M must be defined (from the Plan)"
#endif

// ------------------------------------------------------------------ fa1_init
#ifdef FA1_INIT
extern "C" __global__ void fa1_init(float* __restrict__ Oacc, float* __restrict__ L,
                                    float* __restrict__ M, int Nq) {
    const long long bh = (long long)blockIdx.z * gridDim.y + blockIdx.y;  // b * H + h
    const int r0 = blockIdx.x * BLOCK_M;
    const int rows = min(BLOCK_M, Nq - r0);
    if (rows <= 0) return;
    float4* o = reinterpret_cast<float4*>(Oacc + (bh * Nq + r0) * HEAD_DIM);
    const int n4 = rows * (HEAD_DIM / 4);
    for (int x = threadIdx.x; x < n4; x += blockDim.x) o[x] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        L[bh * Nq + r0 + r] = 0.f;
        M[bh * Nq + r0 + r] = IOSIM_NEG_INF;
    }
}
#endif

// ------------------------------------------------------------------ fa1_fwd
#ifdef FA1_FWD
#if !defined(BLOCK_N) || !defined(NUM_WARPS) || !defined(IS_CAUSAL) || \
    !defined(CAUSAL_BOTTOM_RIGHT) || !defined(HEAD_DIM_PAD) || !defined(SPLIT_ROWS)
#error "fa1_fwd needs BLOCK_N, NUM_WARPS, IS_CAUSAL, CAUSAL_BOTTOM_RIGHT, HEAD_DIM_PAD, SPLIT_ROWS"
#endif
namespace fa1 {
constexpr int DG = HEAD_DIM;  // row length in HBM
constexpr int D = HEAD_DIM_PAD, BR = BLOCK_M, BC = BLOCK_N, NW = NUM_WARPS;
constexpr int DK = (DG + 15) / 16 * 16;  // columns the products run over
constexpr int DKCH = DK / 8;             // 16-byte chunks a row that are loaded
constexpr int DGCH = DG / 8;             // 16-byte chunks a row in HBM (the rest zero-filled)
constexpr int THREADS = NW * 32;
constexpr int RW = BR / NW;  // rows per warp
constexpr int MI = RW / 16;  // m16 tiles per warp
constexpr int DCH = D / 8;   // 16-byte chunks per row of Q, K, V
constexpr int NS = BC / 8;   // n8 tiles of S_ij per warp row-tile
constexpr int ND = DK / 8;   // n8 tiles of Oacc_i (even: DK is a multiple of 16)
static_assert(BR % NW == 0 && RW % 16 == 0, "BLOCK_M / NUM_WARPS must be a multiple of 16");
static_assert(BC % 16 == 0, "BLOCK_N must be a multiple of 16");
static_assert(D % 64 == 0, "HEAD_DIM_PAD must be a multiple of 64");
static_assert(DG % 8 == 0 && DG <= D, "HEAD_DIM must be a multiple of 8, at most HEAD_DIM_PAD");
static_assert(D == (DG + 63) / 64 * 64, "HEAD_DIM_PAD: HEAD_DIM rounded up to 64 (iosim/kernels.py)");
// a split owns whole query blocks (the Plan's counts and the executor assume it)
static_assert(SPLIT_ROWS > 0 && SPLIT_ROWS % BR == 0, "SPLIT_ROWS must be a multiple of BLOCK_M");
#ifdef MODEL_KV_READERS
static_assert(MODEL_KV_READERS == NW, "iosim/kernels.py kv_readers: every warp reads K_j, V_j");
#endif
constexpr int QB = SPLIT_ROWS / BR;  // query blocks per split
constexpr bool EARLY_O = MI * (DK / 2 + BC / 2) <= 128;  // Oacc_i + S_ij fp32 registers
}  // namespace fa1

extern "C" __global__ void __launch_bounds__(fa1::THREADS, 1)
fa1_fwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
        float* Oacc, elem_t* __restrict__ O, float* L, float* M, int Nq, int Nk, int H, int KVH,
        float scale) {
    using namespace fa1;
    extern __shared__ __align__(128) unsigned char fa1_smem_raw[];
    elem_t* sK = reinterpret_cast<elem_t*>(fa1_smem_raw);
    elem_t* sV = sK + BC * D;
    elem_t* sQ = sV + BC * D;

    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (H / KVH);
    const long long bh = (long long)b * H + h;
    const long long kvoff = ((long long)b * KVH + kvh) * Nk * DG;
    const elem_t* q = Q + bh * Nq * DG;
    const elem_t* k = K + kvoff;
    const elem_t* v = V + kvoff;
    float* oacc = Oacc + bh * Nq * DG;
    elem_t* o = O + bh * Nq * DG;
    float* lrow = L + bh * Nq;
    float* mrow = M + bh * Nq;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    elem_t* sQw = sQ + warp * RW * D;  // this warp's rows of Q_i
    const u32 sQw_a = smem_u32(sQw), sK_a = smem_u32(sK), sV_a = smem_u32(sV);
    const int Tc = (Nk + BC - 1) / BC, Tr = (Nq + BR - 1) / BR;
    const int i_lo = blockIdx.x * QB, i_hi = min(Tr, i_lo + QB);  // this split's query blocks
    if (i_lo >= Tr) return;
    const float sl2 = scale * IOSIM_LOG2E;  // S in log2 units

    const int off = CAUSAL_BOTTOM_RIGHT ? Nk - Nq : 0;  // row r sees keys c <= r + off
    auto floor_div = [](int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
    auto i_first = [&](int j) { return IS_CAUSAL ? max(i_lo, floor_div(j * BC - off, BR)) : i_lo; };
    auto j_last = [&](int i) {
        return IS_CAUSAL ? min(Tc - 1, floor_div(i * BR + BR - 1 + off, BC)) : Tc - 1;
    };
    // warp-local cp.async of this warp's RW rows of Q block i (rows >= Nq zero-filled, and the
    // chunk past HEAD_DIM)
    auto load_q = [&](int i) {
#pragma unroll
        for (int it = 0; it < RW * DKCH / 32; ++it) {
            const int c = lane + it * 32;
            const int r = c / DKCH, ch = c % DKCH;
            const int gr = i * BR + warp * RW + r;
            const bool ok = gr < Nq && ch < DGCH;
            cp_async_16(sQw_a + 2u * swz<DCH>(r, ch), ok ? q + (long long)gr * DG + ch * 8 : q, ok);
        }
    };

    // Query blocks that see no key (bottom-right, Nq > Nk) are never visited: O = 0 there
    // (this split's rows [i_lo*Br, zero_end)).
    if (IS_CAUSAL) {
        const int zero_end = min(Nq, min(i_first(0), i_hi) * BR);
        for (int c = tid; c < (zero_end - i_lo * BR) * DGCH; c += THREADS)
            *reinterpret_cast<uint4*>(o + (long long)(i_lo * BR + c / DGCH) * DG + (c % DGCH) * 8) =
                make_uint4(0u, 0u, 0u, 0u);
    }

    for (int j = 0; j < Tc; ++j) {
        const int i0 = i_first(j);
        if (i0 >= i_hi) break;  // causal: none of this split's query blocks sees these keys
        __syncthreads();      // K_{j-1}, V_{j-1} no longer read
        // ---- line 6: K_j, V_j -> shared (rows >= Nk zero-filled: P~ is 0 there, V must be finite)
#pragma unroll 4
        for (int c = tid; c < BC * DKCH; c += THREADS) {
            const int r = c / DKCH, ch = c % DKCH;
            const int gr = j * BC + r;
            const bool ok = gr < Nk && ch < DGCH;
            const long long src = ok ? (long long)gr * DG + ch * 8 : 0;
            cp_async_16(sK_a + 2u * swz<DCH>(r, ch), k + src, ok);
            cp_async_16(sV_a + 2u * swz<DCH>(r, ch), v + src, ok);
        }
        if (j == 0) load_q(i0);  // later outer steps: prefetched by the step before
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();

        for (int i = i0; i < i_hi; ++i) {
            const int row0 = i * BR + warp * RW;  // this warp's first query row
            const bool last = (j == j_last(i));
            // next step (for the Q prefetch)
            int ni = i + 1, nj = j;
            if (ni >= i_hi) { nj = j + 1; ni = nj < Tc ? i_first(nj) : i_hi; }
            const bool has_next = nj < Tc && ni < i_hi;

            if (row0 < Nq) {
                // ---- line 8: Oacc_i, l_i, m_i -> registers. For d <= 128 the loads are issued before
                // the QK^T product so that their latency overlaps it; for d = 256 after it (the
                // 128 fp32 registers of Oacc_i cannot stay live across it without spilling).
                float oa[MI][ND][4];
                float m_old[MI][2], l_old[MI][2];
                auto load_o = [&]() {
#pragma unroll
                for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                    for (int hr = 0; hr < 2; ++hr) {
                        const int r = row0 + mi * 16 + g + 8 * hr;
                        const bool ok = r < Nq;
                        m_old[mi][hr] = ok ? mrow[r] : IOSIM_NEG_INF;
                        l_old[mi][hr] = ok ? lrow[r] : 0.f;
                        const float* src = oacc + (long long)r * DG + 2 * t4;
#pragma unroll
                        for (int nd = 0; nd < ND; ++nd) {
                            float2 x = make_float2(0.f, 0.f);
                            if (ok && nd < DGCH) x = *reinterpret_cast<const float2*>(src + nd * 8);
                            oa[mi][nd][2 * hr] = x.x;
                            oa[mi][nd][2 * hr + 1] = x.y;
                        }
                    }

                };
                if constexpr (EARLY_O) load_o();

                // ---- line 9: S_ij = Q_i K_j^T (raw; scaled below)
                cp_async_wait<0>();
                __syncwarp();  // Q_i (copied by all lanes) visible to the warp
                float sacc[MI][NS][4];
#pragma unroll
                for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                    for (int n = 0; n < NS; ++n)
#pragma unroll
                        for (int e = 0; e < 4; ++e) sacc[mi][n][e] = 0.f;
#pragma unroll
                for (int ks = 0; ks < DK / 16; ++ks) {
                    u32 af[MI][4];
#pragma unroll
                    for (int mi = 0; mi < MI; ++mi)
                        ldmatrix_x4(af[mi], sQw_a + 2u * swz<DCH>(mi * 16 + (lane & 15), ks * 2 + (lane >> 4)));
#pragma unroll
                    for (int nj2 = 0; nj2 < NS / 2; ++nj2) {
                        u32 t[4];
                        ldmatrix_x4(t, sK_a + 2u * swz<DCH>(nj2 * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                            ks * 2 + ((lane >> 3) & 1)));
#pragma unroll
                        for (int mi = 0; mi < MI; ++mi) {
                            mma_m16n8k16(sacc[mi][2 * nj2], af[mi], t);
                            mma_m16n8k16(sacc[mi][2 * nj2 + 1], af[mi], t + 2);
                        }
                    }
                }
                __syncwarp();  // all lanes done reading Q_i: its slot may be refilled
                if (has_next) load_q(ni);
                cp_async_commit();
                if constexpr (!EARLY_O) load_o();

                // ---- line 10-11: mask, row max, P~, row sum, new statistics (log2 units)
                float scl_o[MI][2], scl_p[MI][2], m_new[MI][2], l_new[MI][2];
#pragma unroll
                for (int mi = 0; mi < MI; ++mi) {
                    float mt[2] = {IOSIM_NEG_INF, IOSIM_NEG_INF};
#pragma unroll
                    for (int n = 0; n < NS; ++n)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int col = j * BC + n * 8 + 2 * t4 + (e & 1);
                            const int r = row0 + mi * 16 + g + 8 * (e >> 1);
                            const bool ok = col < Nk && (!IS_CAUSAL || col <= r + off);
                            const float x = ok ? sacc[mi][n][e] * sl2 : IOSIM_NEG_INF;
                            sacc[mi][n][e] = x;
                            mt[e >> 1] = fmaxf(mt[e >> 1], x);
                        }
                    mt[0] = quad_max(mt[0]);
                    mt[1] = quad_max(mt[1]);
                    float lt[2] = {0.f, 0.f};
#pragma unroll
                    for (int n = 0; n < NS; ++n)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const float mm = mt[e >> 1];
                            const float p = (mm == IOSIM_NEG_INF) ? 0.f : fast_exp2(sacc[mi][n][e] - mm);
                            sacc[mi][n][e] = p;
                            lt[e >> 1] += p;
                        }
#pragma unroll
                    for (int hr = 0; hr < 2; ++hr) {
                        lt[hr] = quad_sum(lt[hr]);
                        const float mo = m_old[mi][hr] * IOSIM_LOG2E;
                        const float mn = fmaxf(mo, mt[hr]);
                        const float alpha = (mo == IOSIM_NEG_INF) ? 0.f : fast_exp2(mo - mn);
                        const float beta = (mt[hr] == IOSIM_NEG_INF) ? 0.f : fast_exp2(mt[hr] - mn);
                        // (mo = mt = -inf: a row that has seen no key yet; alpha = beta = 0)
                        const float ln = alpha * l_old[mi][hr] + beta * lt[hr];
                        const float inv = ln > 0.f ? 1.0f / ln : 0.f;
                        scl_o[mi][hr] = l_old[mi][hr] * alpha * inv;
                        scl_p[mi][hr] = beta * inv;
                        m_new[mi][hr] = mn;
                        l_new[mi][hr] = ln;
                    }
                }

                // ---- line 12: Oacc_i = scl_o * Oacc_i + (scl_p * P~) V_j
#pragma unroll
                for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                    for (int nd = 0; nd < ND; ++nd) {
                        oa[mi][nd][0] *= scl_o[mi][0];
                        oa[mi][nd][1] *= scl_o[mi][0];
                        oa[mi][nd][2] *= scl_o[mi][1];
                        oa[mi][nd][3] *= scl_o[mi][1];
                    }
#pragma unroll
                for (int kp = 0; kp < BC / 16; ++kp) {
                    u32 pa[MI][4];  // A fragment of P (16 rows x 16 keys) from two n8 tiles of S
#pragma unroll
                    for (int mi = 0; mi < MI; ++mi) {
                        const float s0 = scl_p[mi][0], s1 = scl_p[mi][1];
                        pa[mi][0] = pack2_elem(sacc[mi][2 * kp][0] * s0, sacc[mi][2 * kp][1] * s0);
                        pa[mi][1] = pack2_elem(sacc[mi][2 * kp][2] * s1, sacc[mi][2 * kp][3] * s1);
                        pa[mi][2] = pack2_elem(sacc[mi][2 * kp + 1][0] * s0, sacc[mi][2 * kp + 1][1] * s0);
                        pa[mi][3] = pack2_elem(sacc[mi][2 * kp + 1][2] * s1, sacc[mi][2 * kp + 1][3] * s1);
                    }
#pragma unroll
                    for (int nd2 = 0; nd2 < ND / 2; ++nd2) {
                        u32 t[4];  // V_j stored [key][d]: transposed load gives the k16 x n8 B fragments
                        ldmatrix_x4_trans(t, sV_a + 2u * swz<DCH>(kp * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                                                  nd2 * 2 + (lane >> 4)));
#pragma unroll
                        for (int mi = 0; mi < MI; ++mi) {
                            mma_m16n8k16(oa[mi][2 * nd2], pa[mi], t);
                            mma_m16n8k16(oa[mi][2 * nd2 + 1], pa[mi], t + 2);
                        }
                    }
                }

                // ---- lines 12-13: write Oacc_i (or O_i at block i's last outer step), l_i, m_i
#pragma unroll
                for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                    for (int hr = 0; hr < 2; ++hr) {
                        const int r = row0 + mi * 16 + g + 8 * hr;
                        if (r >= Nq) continue;
                        if (last) {
                            elem_t* dst = o + (long long)r * DG + 2 * t4;
#pragma unroll
                            for (int nd = 0; nd < ND; ++nd)
                                if (nd < DGCH) *reinterpret_cast<u32*>(dst + nd * 8) =
                                    pack2_elem(oa[mi][nd][2 * hr], oa[mi][nd][2 * hr + 1]);
                        } else {
                            float* dst = oacc + (long long)r * DG + 2 * t4;
#pragma unroll
                            for (int nd = 0; nd < ND; ++nd)
                                if (nd < DGCH) *reinterpret_cast<float2*>(dst + nd * 8) =
                                    make_float2(oa[mi][nd][2 * hr], oa[mi][nd][2 * hr + 1]);
                        }
                        if (t4 == 0) {
                            // read back by the other lanes of the quad at a later outer step,
                            // after that step's __syncthreads
                            lrow[r] = l_new[mi][hr];
                            mrow[r] = m_new[mi][hr] * IOSIM_LN2;
                        }
                    }
            } else {
                if (has_next) load_q(ni);
                cp_async_commit();
            }
        }
    }
    cp_async_wait<0>();
}
#endif  // FA1_FWD

// ================================================================== backward (Algorithm 4)
// Entries (one per compile, chosen by the Plan's define; iosim/schedules/fa1.py):
//   FA1_BWD_INIT     fa1_bwd_init(dQacc, Nq): dQacc = 0 (fp32), BLOCK_M rows per CTA,
//                    grid (ceil(Nq/BLOCK_M), H, B), any thread count (the Plan's: 128).
//   FA1_BWD          fa1_bwd(Q, K, V, O, dO, L, M, dQacc, dK, dV, Nq, Nk, H, KVH, scale)
//                    one CTA per (key-block split, head, batch): grid (ceil(Nk/SPLIT_COLS), H, B),
//                    NUM_WARPS*32 threads.
//   FA1_BWD_CONVERT  fa1_bwd_convert(dQacc, dQ, Nq): dQ = dQacc in elem_t (already scaled),
//                    grid (ceil(Nq/BLOCK_M), H, B), any thread count (the Plan's: 128).
//   Q, O, dO, dQ (B,H,Nq,d), K, V (B,KVH,Nk,d) elem_t; L = ℓ, M = m (natural log) (B,H,Nq) fp32
//   as fa1_fwd wrote them; dQacc (B,H,Nq,d) fp32; dK, dV (B,H,Nk,d) elem_t: one slice per QUERY
//   head (the launcher passes dK/dV themselves when H == KVH, else per-query-head buffers that
//   gqa_reduce.cu sums). Causal as fa1_fwd (top-left or CAUSAL_BOTTOM_RIGHT); a row that sees no
//   key (ℓ = 0, m = -inf) has P = 0 and dQ = 0.
//
// What fa1_bwd does, Algorithm 4 lines 6-23, per CTA = one split of a (batch, head): split s owns
// key rows [s*SPLIT_COLS, (s+1)*SPLIT_COLS), as the FlashAttention-1 library's backward split a
// head's key blocks across CTAs when batch*heads could not fill the GPU (the Plan picks
// SPLIT_COLS; Nk <= SPLIT_COLS: one CTA per head, the paper's algorithm verbatim):
//   for j in this split's key blocks (BLOCK_N = Bc rows):           outer loop, line 6
//     load K_j, V_j into shared memory; dK_j = dV_j = 0 (fp32 registers)   lines 7-8
//     for i in query blocks (BLOCK_M = Br rows; causal: from the first that sees block j):  line 9
//       load Q_i, dO_i (shared, cp.async), l_i, m_i (shared), O_i (registers),
//         dQacc_i (registers, fp32)                                 line 10
//       S = Q_i K_jᵀ (kept transposed, Sᵀ = K_j Q_iᵀ: the warps split the key rows)   line 11
//       P = exp(scale·S − m_i) / l_i (masked entries 0)             line 13
//       dV_j += Pᵀ dO_i                                             line 16
//       dP = dO_i V_jᵀ (again transposed)                           line 17
//       D_i = rowsum(dO_i ∘ O_i)                                    line 19
//       dS = P ∘ (dP − D_i), stored as scale·dS                     line 20
//       dQacc_i += (scale·dS) K_j in HBM (fp32; atomics when split)  line 21
//       dK_j += (scale·dS)ᵀ Q_i                                     line 22
//     write dK_j, dV_j in elem_t                                    line 24
//   Unlike fa2_bwd.cu there is no preprocessing kernel: D_i is formed at every inner step from
//   O_i (read from HBM into registers: its loads are issued before the step's barrier, and the
//   step before prefetched its rows, and unsplit dQacc_i's, into L2) and dO_i (shared), as the paper's
//   line 19 does (formed first: O_i in registers across Sᵀ beside dK_j, dV_j would spill); P is recomputed from ℓ and m, not from an LSE;
//   and dS is stored pre-scaled, so neither dQ nor dK is scaled after its product. dQ:
//   DQ_ATOMIC = 0 (the Plan's choice when one CTA owns the head; the kernel traps if launched
//   with more splits): each thread loads its dQacc fragment into the dQ product's accumulators
//   and stores it back after; the same thread touches the same elements at every outer step
//   (program order). DQ_ATOMIC = 1 (split): the product starts at 0 and is added into dQacc
//   with red.global.add.v2.f32 (the fragment's two adjacent columns), never read back, so the
//   splits of a head add in any order (fp32 rounding order varies run to run) and the step
//   waits for O_i's loads only. The init kernel (dQacc = 0) ran in an earlier launch and the
//   conversion runs in a later one, after every split's adds.
//   Pipelining: Q_i, dO_i, l_i, m_i of the next inner step stream through a STAGES-deep
//   cp.async ring (issued at the top of each step); nothing crosses outer steps (the ring
//   restarts with K_{j+1}, V_{j+1}).
//   Warp organisation as fa2_bwd.cu (the same three phases): Sᵀ/dPᵀ with the warps splitting
//   the key rows then the query columns; Pᵀ and dSᵀ to shared memory (elem_t; dS is formed
//   from the rounded Pᵀ read back by the thread that wrote it); dV, dK with the warps splitting
//   key rows then d; dQ with the warps splitting query rows then d (dS by ldmatrix.trans).
//   Three barriers per step: after the ring's slot lands, after D_i and Pᵀ, after dSᵀ.
//
// Tile parameters (-D from the Plan): HEAD_DIM (a multiple of 8 up to 256: the row length in
//   HBM), HEAD_DIM_PAD (HEAD_DIM rounded up to 64: the shared rows; chunks past HEAD_DIM are
//   zero-filled, so the dV/dK/dQ products over the padded columns produce zeros that are never
//   stored, and Sᵀ/dPᵀ contract over HEAD_DIM rounded up to 16 only), BLOCK_M (multiple of 64:
//   the Pᵀ/dSᵀ rows are swizzled), BLOCK_N (multiple of 16), NUM_WARPS, STAGES (>= 2),
//   IS_CAUSAL, CAUSAL_BOTTOM_RIGHT, SPLIT_COLS (key rows per CTA, a multiple of BLOCK_N; every
//   key block is loaded by one split only, so the split adds no K/V traffic), DQ_ATOMIC.
//   BLOCK_M / (8 * (NUM_WARPS / W1K)) may be odd (d = 256: BLOCK_N = 32, every warp one n8
//   tile of the query columns): phase 1 then ends with an ldmatrix.x2 tile.
// Shared memory of fa1_bwd (dynamic): K_j, V_j; the Q_i, dO_i ring; Pᵀ, dSᵀ (elem_t); the
//   l_i, m_i ring and D_i (fp32); the byte count: iosim/kernels.py SPECS["fa1_bwd"].smem.
// Registers: dK_j, dV_j in fp32 (2*BLOCK_N*HEAD_DIM_PAD/(32*NUM_WARPS) a thread) beside the
//   Sᵀ/dPᵀ or dQ fragments: the backward's tiles are capped by registers (the Plan's
//   BWD_TILES keep dK_j, dV_j at 64-96 registers: at 128, nvcc 13 spills for some masks).
// What limits it: every inner step reads O_i, l_i, m_i and dQacc_i and writes dQacc_i (fp32) to
//   HBM (an atomic add: the L2 reads and writes the line): Tc*Nq*d*(2 + 8) bytes per (b, h)
//   against FA2's one pass over O; and, where the Plan keeps few splits, few CTAs (each is
//   sequential over its key blocks' steps). Causal: a head's first split has the most query
//   blocks to visit, so splits are unequal (the Plan judges the count by the makespan).

#ifdef FA1_BWD_INIT
extern "C" __global__ void fa1_bwd_init(float* __restrict__ dQacc, int Nq) {
    const long long bh = (long long)blockIdx.z * gridDim.y + blockIdx.y;  // b * H + h
    const int r0 = blockIdx.x * BLOCK_M;
    const int rows = min(BLOCK_M, Nq - r0);
    if (rows <= 0) return;
    float4* z = reinterpret_cast<float4*>(dQacc + (bh * Nq + r0) * HEAD_DIM);
    const int n4 = rows * (HEAD_DIM / 4);
    for (int x = threadIdx.x; x < n4; x += blockDim.x) z[x] = make_float4(0.f, 0.f, 0.f, 0.f);
}
#endif  // FA1_BWD_INIT

#ifdef FA1_BWD_CONVERT
extern "C" __global__ void fa1_bwd_convert(const float* __restrict__ dQacc, elem_t* __restrict__ dQ,
                                           int Nq) {
    const long long bh = (long long)blockIdx.z * gridDim.y + blockIdx.y;
    const int r0 = blockIdx.x * BLOCK_M;
    const int rows = min(BLOCK_M, Nq - r0);
    if (rows <= 0) return;
    const long long base = (bh * Nq + r0) * HEAD_DIM;
    const int n8 = rows * (HEAD_DIM / 8);
    for (int x = threadIdx.x; x < n8; x += blockDim.x) {
        const float4 a = *reinterpret_cast<const float4*>(dQacc + base + 8 * x);
        const float4 b = *reinterpret_cast<const float4*>(dQacc + base + 8 * x + 4);
        *reinterpret_cast<uint4*>(dQ + base + 8 * x) =
            make_uint4(pack2_elem(a.x, a.y), pack2_elem(a.z, a.w), pack2_elem(b.x, b.y),
                       pack2_elem(b.z, b.w));
    }
}
#endif  // FA1_BWD_CONVERT

#ifdef FA1_BWD
#if !defined(BLOCK_N) || !defined(NUM_WARPS) || !defined(STAGES) || !defined(IS_CAUSAL) || \
    !defined(CAUSAL_BOTTOM_RIGHT) || !defined(HEAD_DIM_PAD) || !defined(SPLIT_COLS) || !defined(DQ_ATOMIC)
#error "fa1_bwd needs BLOCK_N, NUM_WARPS, STAGES, IS_CAUSAL, CAUSAL_BOTTOM_RIGHT, HEAD_DIM_PAD, SPLIT_COLS, DQ_ATOMIC"
#endif
namespace fa1b {
constexpr int DG = HEAD_DIM;                 // row length in HBM
constexpr int D = HEAD_DIM_PAD;              // row length of the shared tiles
constexpr int DK = (DG + 15) / 16 * 16;      // columns Sᵀ and dPᵀ contract over
constexpr int DCH = D / 8, DGCH = DG / 8;    // 16-byte chunks a shared row, an HBM row
constexpr int BM = BLOCK_M, BN = BLOCK_N, NW = NUM_WARPS, NS = STAGES;
constexpr int THREADS = NW * 32;
constexpr int MCH = BM / 8;  // 16-byte chunks per row of the Pᵀ / dSᵀ tiles (rows = keys)
constexpr int imin(int a, int b) { return a < b ? a : b; }
// Warp grids as fa2_bwd.cu: phase 1 (Sᵀ, dPᵀ: BN x BM) W1K warps along keys, W1Q along
// queries; phase 2 (dV, dK: BN x D) W2K along keys, W2D along d; phase 3 (dQ: BM x D) W3Q
// along queries, W3D along d. MTx: m16 tiles per warp; NTx: n8 tiles per warp.
constexpr int WROWS = 32;
constexpr int W1K = imin(NW, BN / WROWS > 0 ? BN / WROWS : 1), W1Q = NW / W1K;
constexpr int MT1 = BN / W1K / 16, NT1 = BM / W1Q / 8;
constexpr int W2K = W1K, W2D = NW / W2K;
constexpr int MT2 = BN / W2K / 16, NT2 = D / W2D / 8;
constexpr int W3Q = imin(NW, BM / WROWS), W3D = NW / W3Q;
constexpr int MT3 = BM / W3Q / 16, NT3 = D / W3D / 8;
constexpr int NT3P = NT3 % 4 == 0 ? 4 : 2;  // n8 tiles of dQ per pass
// Phase 1's k loop unrolled twice: the unroll with no register spills for every head_dim and
// mask with nvcc 13 (DK/32, as fa2_bwd.cu, spills at d = 128 beside this kernel's outer loop).
constexpr int P1_UNROLL = 2;
// D_i: 8 consecutive lanes per query row, each summing the chunks lane%8 + 8k of it.
constexpr int DROWS = THREADS / 8;  // rows per pass
constexpr int DPASS = BM / DROWS, DCHL = DCH / 8;
static_assert(D % 64 == 0 && DG % 8 == 0 && DG <= D, "HEAD_DIM_PAD: HEAD_DIM rounded up to 64");
static_assert(D == (DG + 63) / 64 * 64, "HEAD_DIM_PAD: HEAD_DIM rounded up to 64 (iosim/kernels.py)");
// The model counts shared-memory reads from these warp grids (iosim/kernels.py
// SPECS["fa1_bwd"].bwd_readers); the Plan passes what it assumed and the compile holds the two
// together.
#ifdef MODEL_W1K
static_assert(W1K == MODEL_W1K && W3Q == MODEL_W3Q && W3D * (NT3 / NT3P) == MODEL_DS_DQ,
              "iosim/kernels.py bwd_readers no longer mirrors fa1_bwd's warp grids");
#endif
static_assert(BN % 16 == 0 && BM % 64 == 0, "BLOCK_N: multiple of 16; BLOCK_M: of 64 (swizzle)");
static_assert(NW % W1K == 0 && BN % (16 * W1K) == 0 && BM % (8 * W1Q) == 0, "phase-1 warp grid");
static_assert(D % (16 * W2D) == 0 && NW % W3Q == 0 && D % (16 * W3D) == 0 && NT3 % NT3P == 0,
              "phase-2/3 warp grids");
static_assert(NS >= 2, "STAGES must be >= 2 (the ring issues step it+STAGES-1 during step it)");
static_assert(THREADS >= 2 * BM, "one thread per l and per m element of a query block");
static_assert(BM % DROWS == 0, "D_i: whole passes of THREADS/8 rows");
// a split owns whole key blocks (the Plan's counts and the executor assume it)
static_assert(SPLIT_COLS > 0 && SPLIT_COLS % BN == 0, "SPLIT_COLS must be a multiple of BLOCK_N");
constexpr int KB = SPLIT_COLS / BN;  // key blocks per split

// Rows [row0, row0+ROWS) of a (rows, DG) slice into a swizzled (ROWS, D) shared tile; rows >=
// nvalid and chunks >= DGCH are zero-filled (cp.async src-size 0 reads no global memory).
template <int ROWS>
__device__ __forceinline__ void load_tile(u32 s_addr, const elem_t* __restrict__ g, int row0,
                                          int nvalid, int tid) {
    constexpr int N = ROWS * DCH;
#pragma unroll
    for (int i = 0; i < (N + THREADS - 1) / THREADS; ++i) {
        const int c = tid + i * THREADS;
        if (N % THREADS == 0 || c < N) {
            const int r = c / DCH, ch = c % DCH;
            const bool ok = row0 + r < nvalid && ch < DGCH;
            cp_async_16(s_addr + 2u * (u32)swz<DCH>(r, ch),
                        ok ? g + (long long)(row0 + r) * DG + ch * 8 : g, ok);
        }
    }
}

// Next step's O_i and dQacc_i rows [row0, row0+BM) into L2 (prefetch.global.L2, one per 128-byte
// line): their plain loads then wait for L2, not HBM. No registers, no shared memory.
__device__ __forceinline__ void prefetch_rows(const elem_t* O, const float* dQacc, long long rows0,
                                              int row0, int Nq, int tid) {
    // lines a row of O, of dQacc (atomics: dQacc is never read by the CTA)
    constexpr int OL = (DG * 2 + 127) / 128, AL = DQ_ATOMIC ? 0 : (DG * 4 + 127) / 128;
    for (int c = tid; c < BM * (OL + AL); c += THREADS) {
        const int r = c / (OL + AL), l = c % (OL + AL);
        if (row0 + r >= Nq) break;  // rows only grow with c
        const char* p = l < OL ? reinterpret_cast<const char*>(O + (rows0 + row0 + r) * DG) + l * 128
                               : reinterpret_cast<const char*>(dQacc + (rows0 + row0 + r) * DG) + (l - OL) * 128;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
    }
}

}  // namespace fa1b

extern "C" __global__ void __launch_bounds__(fa1b::THREADS, 1)
fa1_bwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
        const elem_t* __restrict__ O, const elem_t* __restrict__ dO, const float* __restrict__ L,
        const float* __restrict__ M, float* dQacc, elem_t* __restrict__ dK,
        elem_t* __restrict__ dV, int Nq, int Nk, int H, int KVH, float scale) {
    using namespace fa1b;
    extern __shared__ __align__(128) elem_t fa1b_smem[];
    elem_t* sK = fa1b_smem;            // BN x D
    elem_t* sV = sK + BN * D;          // BN x D
    elem_t* sQ = sV + BN * D;          // NS x BM x D
    elem_t* sdO = sQ + NS * BM * D;    // NS x BM x D
    elem_t* sPt = sdO + NS * BM * D;   // BN x BM (Pᵀ: rows = keys)
    elem_t* sdSt = sPt + BN * BM;      // BN x BM (dSᵀ)
    float* sL = reinterpret_cast<float*>(sdSt + BN * BM);  // NS x BM (ℓ)
    float* sM = sL + NS * BM;                               // NS x BM (m)
    float* sD = sM + NS * BM;                               // BM (D_i of the current step)

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (H / KVH);
    const long long q_rows = ((long long)b * H + h) * Nq;      // first row of this head's Q, O, dO
    const long long kv_rows = ((long long)b * KVH + kvh) * Nk;  // of its K, V
    const long long out_rows = ((long long)b * H + h) * Nk;     // of its dK, dV (per query head)
    const int Tc = (Nk + BN - 1) / BN, Tm = (Nq + BM - 1) / BM;
    const int off = CAUSAL_BOTTOM_RIGHT ? Nk - Nq : 0;  // query row r sees keys c <= r + off
    const float sl2 = scale * IOSIM_LOG2E;

    // Warp positions in the three warp grids, ldmatrix lane patterns (as fa2_bwd.cu).
    const int k1 = (warp % W1K) * MT1 * 16, q1 = (warp / W1K) * NT1 * 8;
    const int k2 = (warp % W2K) * MT2 * 16, d2 = (warp / W2K) * NT2 * 8;
    const int q3 = (warp % W3Q) * MT3 * 16, d3 = (warp / W3Q) * NT3 * 8;
    const int arow = lane & 15;
    const u32 akey = (u32)((lane >> 4) ^ (lane & 7));
    const int brow = (lane & 7) + ((lane >> 4) << 3);
    const u32 bkey = (u32)(((lane >> 3) & 1) ^ (lane & 7));
    // D_i: this thread's row within a pass and first chunk
    const int drow = tid >> 3, dch = tid & 7;
    // this split's key blocks [j_lo, j_hi); without atomics only one CTA may own a head's dQ
    const int j_lo = blockIdx.x * KB, j_hi = min(Tc, j_lo + KB);
    if (!DQ_ATOMIC && gridDim.x > 1) __trap();

    for (int j = j_lo; j < j_hi; ++j) {
        const int n0 = j * BN;
        // Causal: the first query block that sees key n0; none does when the last row does not.
        const int m_first = IS_CAUSAL ? (n0 - off > 0 ? (n0 - off) / BM : 0) : 0;
        const int n_iter = (IS_CAUSAL && Nq - 1 + off < n0) ? 0 : Tm - m_first;
        if (n_iter <= 0) {  // no query sees this split's keys n0 .. (causal): dK = dV = 0 there
            for (int c = tid; c < (min(Nk, j_hi * BN) - n0) * DGCH; c += THREADS) {
                const long long o = (out_rows + n0 + c / DGCH) * DG + (c % DGCH) * 8;
                *reinterpret_cast<uint4*>(dK + o) = make_uint4(0u, 0u, 0u, 0u);
                *reinterpret_cast<uint4*>(dV + o) = make_uint4(0u, 0u, 0u, 0u);
            }
            break;
        }
        __syncthreads();  // the previous outer step's epilogue no longer reads sK, sV

        auto issue = [&](int it) {  // Q_i, dO_i, l_i, m_i of inner step it into ring slot it % NS
            if (it < n_iter) {
                const int slot = it % NS;
                const int m0 = (m_first + it) * BM;
                load_tile<BM>(smem_u32(sQ + slot * BM * D), Q + q_rows * DG, m0, Nq, tid);
                load_tile<BM>(smem_u32(sdO + slot * BM * D), dO + q_rows * DG, m0, Nq, tid);
                if (tid < BM)
                    cp_async_4(smem_u32(sL + slot * BM + tid), L + q_rows + m0 + tid, m0 + tid < Nq);
                else if (tid < 2 * BM)
                    cp_async_4(smem_u32(sM + slot * BM + tid - BM), M + q_rows + m0 + tid - BM,
                               m0 + tid - BM < Nq);
            }
            cp_async_commit();
        };
        // ---- lines 7-8: K_j, V_j -> shared with step 0 in one group, steps 1 .. NS-2 one each
        load_tile<BN>(smem_u32(sK), K + kv_rows * DG, n0, Nk, tid);
        load_tile<BN>(smem_u32(sV), V + kv_rows * DG, n0, Nk, tid);
#pragma unroll
        for (int s = 0; s < NS - 1; ++s) issue(s);

        float dv[MT2][NT2][4], dk[MT2][NT2][4];
#pragma unroll
        for (int mt = 0; mt < MT2; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT2; ++nt)
#pragma unroll
                for (int r = 0; r < 4; ++r) dv[mt][nt][r] = dk[mt][nt][r] = 0.f;

        for (int it = 0; it < n_iter; ++it) {
            const int slot = it % NS;
            const int m0 = (m_first + it) * BM;
            // ---- line 10: O_i -> registers (plain loads, 8 lanes per row; the step before
            // prefetched its rows into L2), consumed by D_i once the ring's slot has landed
            uint4 oreg[DPASS][DCHL];
#pragma unroll
            for (int ps = 0; ps < DPASS; ++ps) {
                const int row = m0 + ps * DROWS + drow;
#pragma unroll
                for (int k = 0; k < DCHL; ++k) {
                    const int ch = dch + 8 * k;
                    oreg[ps][k] = make_uint4(0u, 0u, 0u, 0u);
                    if (row < Nq && ch < DGCH)
                        oreg[ps][k] = *reinterpret_cast<const uint4*>(O + (q_rows + row) * DG + ch * 8);
                }
            }
            cp_async_wait<NS - 2>();
            __syncthreads();  // step it landed; every warp is done with step it-1 (slot, Pᵀ, dSᵀ, D)
            const u32 sQs = smem_u32(sQ + slot * BM * D), sdOs = smem_u32(sdO + slot * BM * D);
            const float* sLs = sL + slot * BM;
            const float* sMs = sM + slot * BM;
            // ---- line 19: D_i = rowsum(dO_i ∘ O_i) (fp32), to shared
#pragma unroll
            for (int ps = 0; ps < DPASS; ++ps) {
                const int r = ps * DROWS + drow;
                float acc = 0.f;
#pragma unroll
                for (int k = 0; k < DCHL; ++k) {
                    const int ch = dch + 8 * k;
                    if (ch < DGCH) {
                        const uint4 g = *reinterpret_cast<const uint4*>(sdO + slot * BM * D + swz<DCH>(r, ch));
                        const u32 ow[4] = {oreg[ps][k].x, oreg[ps][k].y, oreg[ps][k].z, oreg[ps][k].w};
                        const u32 gw[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            float o0, o1, g0, g1;
                            unpack2_elem(ow[e], o0, o1);
                            unpack2_elem(gw[e], g0, g1);
                            acc = fmaf(o0, g0, fmaf(o1, g1, acc));
                        }
                    }
                }
                acc += __shfl_xor_sync(0xffffffffu, acc, 1);
                acc += __shfl_xor_sync(0xffffffffu, acc, 2);
                acc += __shfl_xor_sync(0xffffffffu, acc, 4);
                if (dch == 0) sD[r] = acc * scale;  // scale·D_i: dS is formed scaled
            }
            issue(it + NS - 1);
            if (it + 1 < n_iter) prefetch_rows(O, dQacc, q_rows, m0 + BM, Nq, tid);

            // ---- lines 11, 17: Sᵀ = K_j Q_iᵀ, dPᵀ = V_j dO_iᵀ (raw products over DK columns)
            auto phase1 = [&](float (&acc)[MT1][NT1][4], u32 sA, u32 sB) {
#pragma unroll
                for (int mt = 0; mt < MT1; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NT1; ++nt)
#pragma unroll
                        for (int r = 0; r < 4; ++r) acc[mt][nt][r] = 0.f;
#pragma unroll(P1_UNROLL)
                for (int kk = 0; kk < DK / 16; ++kk)
                    bwd_mma::a_bt<MT1, NT1, D, D>(acc, sA, k1, sB, q1, kk, arow, akey, brow, bkey);
            };
            const bool need_mask = (n0 + BN > Nk) || (m0 + BM > Nq) || (IS_CAUSAL && n0 + BN - 1 > m0 + off);
            // element (mt, nt, r) of a phase-1 tile: key row k1 + mt*16 + lane/4 + 8*(r/2),
            // query column q1 + nt*8 + 2*(lane%4) + r%2; its pair (r, r+1) is one u32 in shared.
            auto tile_off = [&](int mt, int nt, int hr) {
                const int qc = q1 + nt * 8 + 2 * (lane & 3);
                return swz<MCH>(k1 + mt * 16 + (lane >> 2) + hr * 8, qc >> 3) + (qc & 7);
            };
            {
                const int key0 = n0 + k1 + (lane >> 2), q0 = m0 + q1 + 2 * (lane & 3);
                const int k_left = Nk - key0, q_left = Nq - q0, kq = q0 + off - key0;
                float st[MT1][NT1][4];
                phase1(st, smem_u32(sK), sQs);
#pragma unroll
                for (int nt = 0; nt < NT1; ++nt) {
                    // ---- line 13: P = exp(scale·S − m_i) / ℓ_i; ℓ = 0 (no key seen): P = 0
                    const int qc = q1 + nt * 8 + 2 * (lane & 3);
                    const float2 mm = *reinterpret_cast<const float2*>(sMs + qc);
                    const float2 ll = *reinterpret_cast<const float2*>(sLs + qc);
                    const float m2[2] = {mm.x == IOSIM_NEG_INF ? -IOSIM_NEG_INF : mm.x * IOSIM_LOG2E,
                                         mm.y == IOSIM_NEG_INF ? -IOSIM_NEG_INF : mm.y * IOSIM_LOG2E};
                    const float il[2] = {ll.x > 0.f ? 1.0f / ll.x : 0.f, ll.y > 0.f ? 1.0f / ll.y : 0.f};
#pragma unroll
                    for (int mt = 0; mt < MT1; ++mt) {
#pragma unroll
                        for (int r = 0; r < 4; ++r) {
                            const int c = r & 1;
                            float p = fast_exp2(fmaf(st[mt][nt][r], sl2, -m2[c])) * il[c];
                            if (need_mask) {  // key = key0 + dk_, query = q0 + dq_ (constants)
                                const int dk_ = mt * 16 + (r >> 1) * 8, dq_ = nt * 8 + c;
                                if (dk_ >= k_left || dq_ >= q_left || (IS_CAUSAL && dk_ - dq_ > kq))
                                    p = 0.f;
                            }
                            st[mt][nt][r] = p;
                        }
#pragma unroll
                        for (int hr = 0; hr < 2; ++hr)
                            *reinterpret_cast<u32*>(sPt + tile_off(mt, nt, hr)) =
                                pack2_elem(st[mt][nt][2 * hr], st[mt][nt][2 * hr + 1]);
                    }
                }
            }
            __syncthreads();  // D_i visible to every warp; Pᵀ written
            {
                // ---- line 20: dSᵀ = Pᵀ ∘ (dPᵀ − D_i), stored scaled (scale·dSᵀ: dK_j and
                // dQacc_i need no scaling after their products), with the rounded Pᵀ (the one
                // dV uses) read back by the thread that wrote it
                float dpt[MT1][NT1][4];
                phase1(dpt, smem_u32(sV), sdOs);
#pragma unroll
                for (int mt = 0; mt < MT1; ++mt)
#pragma unroll
                    for (int nt = 0; nt < NT1; ++nt) {
                        const int qc = q1 + nt * 8 + 2 * (lane & 3);
                        const float2 dd = *reinterpret_cast<const float2*>(sD + qc);
#pragma unroll
                        for (int hr = 0; hr < 2; ++hr) {
                            const int e = tile_off(mt, nt, hr);
                            float p0, p1;
                            unpack2_elem(*reinterpret_cast<const u32*>(sPt + e), p0, p1);
                            *reinterpret_cast<u32*>(sdSt + e) =
                                pack2_elem(p0 * fmaf(dpt[mt][nt][2 * hr], scale, -dd.x),
                                           p1 * fmaf(dpt[mt][nt][2 * hr + 1], scale, -dd.y));
                        }
                    }
            }
            __syncthreads();  // Pᵀ, dSᵀ visible to every warp

            // ---- lines 16, 22: dV_j += Pᵀ dO_i, dK_j += (scale·dS)ᵀ Q_i (k = the block's query rows)
            auto phase2 = [&](float (&acc)[MT2][NT2][4], u32 sA, u32 sB) {
#pragma unroll
                for (int kk = 0; kk < BM / 16; ++kk)
                    bwd_mma::a_b<MT2, NT2, BM, D>(acc, sA, k2, sB, d2 / 16, kk, arow, akey);
            };
            phase2(dv, smem_u32(sPt), sdOs);
            phase2(dk, smem_u32(sdSt), sQs);

            // ---- line 21: dQacc_i += (scale·dS) K_j, in passes of NT3P n8 tiles. DQ_ATOMIC = 0
            // (one CTA per head): this thread's fp32 fragment of dQacc_i is loaded from HBM into
            // the product's accumulators and stored back after it (the step before prefetched
            // the rows into L2). DQ_ATOMIC = 1 (key-block splits: the CTAs of a head's splits
            // add into the same dQacc_i): the product starts at 0 and is added with vector fp32
            // reductions (red.global.add.v2.f32), nothing read back.
#pragma unroll 1
            for (int pass = 0; pass < NT3 / NT3P; ++pass) {
                const int dp = d3 + pass * NT3P * 8;
                if (dp >= DG) break;  // padded columns only (warp-uniform)
                float dq[MT3][NT3P][4];
#pragma unroll
                for (int mt = 0; mt < MT3; ++mt)
#pragma unroll
                    for (int hr = 0; hr < 2; ++hr) {
                        const int row = m0 + q3 + mt * 16 + (lane >> 2) + hr * 8;
                        const float* src = dQacc + (q_rows + row) * DG + dp + 2 * (lane & 3);
#pragma unroll
                        for (int nt = 0; nt < NT3P; ++nt) {
                            float2 x = make_float2(0.f, 0.f);
                            if (!DQ_ATOMIC && row < Nq && (DG % (NT3P * 8) == 0 || dp + nt * 8 < DG))
                                x = *reinterpret_cast<const float2*>(src + nt * 8);
                            dq[mt][nt][2 * hr] = x.x;
                            dq[mt][nt][2 * hr + 1] = x.y;
                        }
                    }
#pragma unroll
                for (int kk = 0; kk < BN / 16; ++kk)  // dS from dSᵀ
                    bwd_mma::at_b<MT3, NT3P, BM, D>(dq, smem_u32(sdSt), q3, smem_u32(sK), dp / 16, kk,
                                                    arow, akey, brow, bkey);
#pragma unroll
                for (int mt = 0; mt < MT3; ++mt)
#pragma unroll
                    for (int hr = 0; hr < 2; ++hr) {
                        const int row = m0 + q3 + mt * 16 + (lane >> 2) + hr * 8;
                        float* dst = dQacc + (q_rows + row) * DG + dp + 2 * (lane & 3);
#pragma unroll
                        for (int nt = 0; nt < NT3P; ++nt)
                            if (row < Nq && (DG % (NT3P * 8) == 0 || dp + nt * 8 < DG)) {
                                if (DQ_ATOMIC)
                                    red_add_f32x2(dst + nt * 8, dq[mt][nt][2 * hr], dq[mt][nt][2 * hr + 1]);
                                else
                                    *reinterpret_cast<float2*>(dst + nt * 8) =
                                        make_float2(dq[mt][nt][2 * hr], dq[mt][nt][2 * hr + 1]);
                            }
                    }
            }
        }
        cp_async_wait<0>();
        __syncthreads();  // K_j, V_j no longer read: they stage dK_j, dV_j

        // ---- line 24: dK_j, dV_j in elem_t, through shared memory, 16-byte stores
#pragma unroll
        for (int mt = 0; mt < MT2; ++mt)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                const int krow = k2 + mt * 16 + (lane >> 2) + hr * 8;
#pragma unroll
                for (int nt = 0; nt < NT2; ++nt) {
                    const int col = d2 + nt * 8 + 2 * (lane & 3);
                    const int e = swz<DCH>(krow, col >> 3) + (col & 7);
                    *reinterpret_cast<u32*>(sK + e) = pack2_elem(dk[mt][nt][2 * hr], dk[mt][nt][2 * hr + 1]);
                    *reinterpret_cast<u32*>(sV + e) = pack2_elem(dv[mt][nt][2 * hr], dv[mt][nt][2 * hr + 1]);
                }
            }
        __syncthreads();
        for (int c = tid; c < BN * DCH; c += THREADS) {
            const int r = c / DCH, ch = c % DCH;
            if (n0 + r < Nk && ch < DGCH) {
                const long long o = (out_rows + n0 + r) * DG + ch * 8;
                *reinterpret_cast<uint4*>(dK + o) = *reinterpret_cast<const uint4*>(sK + swz<DCH>(r, ch));
                *reinterpret_cast<uint4*>(dV + o) = *reinterpret_cast<const uint4*>(sV + swz<DCH>(r, ch));
            }
        }
    }
}
#endif  // FA1_BWD
