// fa1.cu -- FlashAttention-1 forward, Algorithm 1 of Dao et al. 2022 ("FlashAttention: Fast and
// Memory-Efficient Exact Attention with IO-Awareness"), implemented faithfully.
//
// What it implements
//   fa1_init: Algorithm 1 line 2: O = 0 (here Oacc, fp32), l = 0, m = -inf in HBM.
//   fa1_fwd:  Algorithm 1 lines 5-15. One CTA per (batch, head) (grid (1, H, B)).
//     for j in blocks of K/V (BLOCK_N = Bc rows):                  outer loop, line 5
//       load K_j, V_j into shared memory                           line 6
//       for i in blocks of Q (BLOCK_M = Br rows):                  inner loop, line 7
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
//   For outer step j the inner loop therefore starts at i = max(0, floor((j*Bc - off) / Br)), and
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
//   CAUSAL_BOTTOM_RIGHT.
//   fa1_init uses HEAD_DIM and BLOCK_M (rows per CTA); its thread count is free (the Plan's).
//
// Shared memory (fa1_fwd, dynamic; the Plan computes the same):
//   (2 * BLOCK_N + BLOCK_M) * HEAD_DIM_PAD * sizeof(elem)   = K_j + V_j + Q_i (XOR swizzle).
//   fa1_init: none.
// Registers: per thread MI*Bc/2 fp32 for S_ij and MI*d/2 fp32 for Oacc_i (MI = Br/(16*NUM_WARPS)),
//   so the tiles are capped by the register file, not by shared memory:
//   Bc <= 128 for d <= 128, Bc <= 64 for d = 256 (with MI = 1, i.e. NUM_WARPS = Br/16).
// Recommended tiles (H100/H200, M = 227 KB of SRAM: Bc = floor16(ceil(M/4d)) capped as above,
//   Br = min(Bc, d), NUM_WARPS = Br/16):
//   d=64:  Bc=128, Br=64,  NUM_WARPS=4  (smem 40 KB)
//   d=128: Bc=128, Br=128, NUM_WARPS=8  (smem 96 KB)
//   d=256: Bc=64,  Br=64,  NUM_WARPS=4  (smem 96 KB)
//
// What limits it: only B*H CTAs (one per (batch, head), each on one SM, sequential over its
//   Tc*Tr steps), and the Oacc/l/m round trip through HBM at every inner step:
//   Tc * Nq * d * 4 bytes read and as many written per (b, h), against Nq*d*2 for Q_i reads
//   and 2*Nk*d*2 for K/V. The next step's Q_i is prefetched with cp.async during the current
//   step and Oacc_i's loads are issued before S_ij is computed, so their latency overlaps the
//   QK^T product; nothing else overlaps (Algorithm 1 has no pipelining across steps).
//
// Difference from the previous version (naive.cu): S and P never reach HBM; the three kernels
//   become one, tiled so that K_j, V_j, Q_i, S_ij fit on chip, with the online-softmax
//   rescaling of Oacc_i. Its HBM traffic is Theta(N^2 d^2 / M) instead of Theta(N d + N^2).
//   fa2.cu then swaps the loops (Q outer, one CTA per Q block: no Oacc round trips, more CTAs)
//   and defers the 1/l normalisation to the end.
#include "common.cuh"

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
    !defined(CAUSAL_BOTTOM_RIGHT) || !defined(HEAD_DIM_PAD)
#error "fa1_fwd needs BLOCK_N, NUM_WARPS, IS_CAUSAL, CAUSAL_BOTTOM_RIGHT, HEAD_DIM_PAD"
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
    const float sl2 = scale * IOSIM_LOG2E;  // S in log2 units

    const int off = CAUSAL_BOTTOM_RIGHT ? Nk - Nq : 0;  // row r sees keys c <= r + off
    auto floor_div = [](int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
    auto i_first = [&](int j) { return IS_CAUSAL ? max(0, floor_div(j * BC - off, BR)) : 0; };
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

    // Query blocks that see no key (bottom-right, Nq > Nk) are never visited: O = 0 there.
    if (IS_CAUSAL) {
        const int zero_rows = min(Nq, i_first(0) * BR);
        for (int c = tid; c < zero_rows * DGCH; c += THREADS)
            *reinterpret_cast<uint4*>(o + (long long)(c / DGCH) * DG + (c % DGCH) * 8) =
                make_uint4(0u, 0u, 0u, 0u);
    }

    for (int j = 0; j < Tc; ++j) {
        const int i0 = i_first(j);
        if (i0 >= Tr) break;  // causal, Nk > Nq: no query block sees these keys
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

        for (int i = i0; i < Tr; ++i) {
            const int row0 = i * BR + warp * RW;  // this warp's first query row
            const bool last = (j == j_last(i));
            // next step (for the Q prefetch)
            int ni = i + 1, nj = j;
            if (ni >= Tr) { nj = j + 1; ni = nj < Tc ? i_first(nj) : Tr; }
            const bool has_next = nj < Tc && ni < Tr;

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
