// fa2_bwd.cu -- FlashAttention-2 backward (Dao 2023, "FlashAttention-2", Algorithm 2), three
// kernels; per-query-head dK/dV are summed over a GQA group by gqa_reduce.cu.
//
// Entries (one per compile, chosen by the Plan's define):
//   FA2_BWD_PRE      fa2_bwd_pre(O, dO, Dst, dQacc, Nq, H)
//                    D = rowsum(dO ∘ O) in fp32 and dQacc = 0, BLOCK_M rows per CTA,
//                    grid (ceil(Nq/BLOCK_M), H, B), AUX_THREADS threads.
//   FA2_BWD          fa2_bwd(Q, K, V, dO, LSE, Dst, dQacc, dK, dV, Nq, Nk, H, KVH, scale)
//                    one CTA per key block of one head: grid (ceil(Nk/BLOCK_N), H, B),
//                    NUM_WARPS*32 threads.
//   FA2_BWD_CONVERT  fa2_bwd_convert(dQacc, dQ, Nq, H, scale): dQ = scale·dQacc in elem_t,
//                    grid (ceil(Nq/BLOCK_M), H, B), AUX_THREADS threads.
//   Q, dO, O, dQ (B,H,Nq,d) and K, V (B,KVH,Nk,d) elem_t; LSE (the forward's natural-log
//   log-sum-exp, fa2.cu writes it), Dst (B,H,Nq) fp32; dQacc (B,H,Nq,d) fp32; dK, dV
//   (B,H,Nk,d) elem_t: one slice per QUERY head (the launcher passes dK/dV themselves when
//   H == KVH, else per-query-head buffers that gqa_reduce.cu sums). Causal: query row i sees
//   keys j <= i (top-left), or j <= i + Nk - Nq with CAUSAL_BOTTOM_RIGHT; a row that sees no
//   key (LSE = -inf) contributes nothing.
//
// Tile parameters (-D defines from the Plan, iosim/schedules/fa2.py): HEAD_DIM (multiple of 64),
//   BLOCK_M (query rows per step), BLOCK_N (key rows per CTA), NUM_WARPS, STAGES (>= 2: depth
//   of the Q/dO/LSE/D ring), IS_CAUSAL, CAUSAL_BOTTOM_RIGHT, AUX_THREADS (pre and convert
//   kernels). No padding: HEAD_DIM 64, 128 or 256 (asserted; iosim/kernels.py head_dims).
//
// Shared memory of fa2_bwd (dynamic): K, V; the Q, dO ring; Pᵀ, dSᵀ (elem_t); the LSE, D ring
//   (fp32); the byte count: iosim/kernels.py SPECS["fa2_bwd"].smem.
//
// What the main kernel does (per CTA = key block j of one head):
//   * K_j and V_j stay in shared memory for the whole CTA; dK_j and dV_j accumulate in fp32
//     registers. Query blocks i stream through a STAGES-deep cp.async ring (Q_i, dO_i, LSE_i,
//     D_i): block i+STAGES-1 is issued at the top of step i, so its copy overlaps step i.
//   * Causal: the loop starts at the first query block that sees key block j;
//     a key block no query sees writes zeros. Not causal: key block j starts at query block
//     j mod (query blocks) and wraps around, so that the CTAs running at once add into
//     different rows of dQacc (in step, all key blocks of a head met in the same rows).
//   * Step i, phase 1: Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ in one k loop (mma.sync m16n8k16,
//     fp32 accumulate; warps split the key rows, then the query columns). Pᵀ =
//     exp2(Sᵀ·scale·log2e − LSE·log2e) (P recomputed from the stored LSE, no max/sum), dSᵀ =
//     Pᵀ ∘ (dPᵀ − D) from registers; masked entries (causal, ragged Nq/Nk) are 0. Pᵀ and dSᵀ
//     go to shared memory in elem_t.
//   * Phase 2: dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i (warps split the key rows, then d).
//   * Phase 3: dQ_i += dS K_j (warps split the query rows, then d), added to the fp32 dQacc in
//     HBM with vector atomics (red.global.add.v2.f32 on sm_90): the CTAs of all key blocks add
//     into the same dQ_i, so the order of additions (not the result's accuracy) varies by run.
//     Where dQ takes one pass of d (d = 64, 128), phases 2 and 3 share one k loop.
//   * Why the fused loops: with 8 warps (2 per scheduler, 255 registers) the kernel is latency
//     bound (Nsight Compute before: issue active 25-27%, top stalls wait, short_scoreboard); two or
//     three independent GEMMs per fragment load raised H100 bf16 throughput 7-12% at d = 64,
//     3-5% at d = 128 and 256 (`git show 2baace1:reports/data/h100/dev/fa2_bwd/`).
//   * Epilogue: dK_j·scale and dV_j are staged through the K_j/V_j tiles for 16-byte stores.
//   * Tiles are XOR-swizzled in 16-byte chunks (chunk ^ (row & 7)): ldmatrix, ldmatrix.trans
//     and the Pᵀ/dSᵀ stores are bank-conflict free.
//
// Difference from fa2.cu (the forward): the loops are swapped (K/V outer, one CTA per key
//   block) so that dK, dV never leave registers; dQ, the one output every key block touches,
//   is reduced through fp32 atomics instead. Two barriers per step (after phase 1; at the
//   top of the next step).
#include "bwd_mma.cuh"

#ifndef HEAD_DIM
#error "HEAD_DIM must be defined"
#endif
#ifndef BLOCK_M
#error "BLOCK_M must be defined"
#endif

namespace fb {
constexpr int D = HEAD_DIM;
constexpr int BM = BLOCK_M;
constexpr int DCH = D / 8;  // 16-byte chunks per row of Q, K, V, dO
static_assert(D % 64 == 0, "HEAD_DIM must be a multiple of 64 (swizzled rows of >= 8 chunks)");
static_assert(D == 64 || D == 128 || D == 256, "HEAD_DIM 64, 128 or 256 (iosim/kernels.py head_dims)");
}  // namespace fb
#if (defined(FA2_BWD_PRE) || defined(FA2_BWD_CONVERT)) && !defined(AUX_THREADS)
#error "fa2_bwd_pre and fa2_bwd_convert need AUX_THREADS"
#endif

// ------------------------------------------------------------------ pre: D = rowsum(dO∘O), dQacc = 0
#ifdef FA2_BWD_PRE
static_assert(AUX_THREADS % 32 == 0 && fb::BM % (AUX_THREADS / fb::DCH) == 0,
              "AUX_THREADS/(HEAD_DIM/8) rows per pass must divide BLOCK_M");
extern "C" __global__ void __launch_bounds__(AUX_THREADS)
fa2_bwd_pre(const elem_t* __restrict__ O, const elem_t* __restrict__ dO, float* __restrict__ Dst,
            float* __restrict__ dQacc, int Nq, int H) {
    using namespace fb;
    const int tid = threadIdx.x;
    const size_t base = ((size_t)blockIdx.z * H + blockIdx.y) * (size_t)Nq;
    const int ch = tid % DCH;  // the DCH threads of a row are consecutive lanes of one warp
    for (int r = tid / DCH; r < BM; r += AUX_THREADS / DCH) {
        const int row = blockIdx.x * BM + r;
        float acc = 0.f;
        if (row < Nq) {
            const size_t off = (base + row) * D + ch * 8;
            const uint4 o = *reinterpret_cast<const uint4*>(O + off);
            const uint4 g = *reinterpret_cast<const uint4*>(dO + off);
            const u32 ow[4] = {o.x, o.y, o.z, o.w}, gw[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float o0, o1, g0, g1;
                unpack2_elem(ow[e], o0, o1);
                unpack2_elem(gw[e], g0, g1);
                acc = fmaf(o0, g0, fmaf(o1, g1, acc));
            }
            float4* z = reinterpret_cast<float4*>(dQacc + off);
            z[0] = make_float4(0.f, 0.f, 0.f, 0.f);
            z[1] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int o = DCH / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (ch == 0 && row < Nq) Dst[base + row] = acc;
    }
}
#endif  // FA2_BWD_PRE

// ------------------------------------------------------------------ convert: dQ = scale·dQacc
#ifdef FA2_BWD_CONVERT
extern "C" __global__ void __launch_bounds__(AUX_THREADS)
fa2_bwd_convert(const float* __restrict__ dQacc, elem_t* __restrict__ dQ, int Nq, int H,
                float scale) {
    using namespace fb;
    const size_t base = ((size_t)blockIdx.z * H + blockIdx.y) * (size_t)Nq;
    for (int c = threadIdx.x; c < BM * DCH; c += AUX_THREADS) {
        const int row = blockIdx.x * BM + c / DCH;
        if (row >= Nq) break;  // rows only grow with c
        const size_t off = (base + row) * D + (c % DCH) * 8;
        const float4 a = *reinterpret_cast<const float4*>(dQacc + off);
        const float4 b = *reinterpret_cast<const float4*>(dQacc + off + 4);
        *reinterpret_cast<uint4*>(dQ + off) =
            make_uint4(pack2_elem(a.x * scale, a.y * scale), pack2_elem(a.z * scale, a.w * scale),
                       pack2_elem(b.x * scale, b.y * scale), pack2_elem(b.z * scale, b.w * scale));
    }
}
#endif  // FA2_BWD_CONVERT

// ------------------------------------------------------------------ main kernel
#ifdef FA2_BWD
#if !defined(BLOCK_N) || !defined(NUM_WARPS) || !defined(STAGES) || !defined(IS_CAUSAL) || \
    !defined(CAUSAL_BOTTOM_RIGHT)
#error "fa2_bwd needs BLOCK_N, NUM_WARPS, STAGES, IS_CAUSAL, CAUSAL_BOTTOM_RIGHT"
#endif
namespace fb {
constexpr int BN = BLOCK_N;
constexpr int NW = NUM_WARPS;
constexpr int NS = STAGES;
constexpr int THREADS = NW * 32;
constexpr int MCH = BM / 8;  // 16-byte chunks per row of the Pᵀ / dSᵀ tiles (rows = keys)
constexpr int imin(int a, int b) { return a < b ? a : b; }
// Phase 1, Sᵀ and dPᵀ (BN x BM): W1K warps along the keys (32 rows or more each), W1Q along
// the queries. Phase 2, dV and dK (BN x D): W2K along the keys, W2D along d. Phase 3, dQ
// (BM x D): W3Q along the queries, W3D along d. MTx: m16 tiles per warp; NTx: n8 tiles per warp.
// Warp tiles 32 rows tall (two m16 tiles): each ldmatrix'd fragment feeds twice the MMAs of
// 16-row tiles, and shared-memory bandwidth, not the tensor cores, binds this kernel.
constexpr int WROWS = 32;
constexpr int W1K = imin(NW, BN / WROWS), W1Q = NW / W1K;
constexpr int MT1 = BN / W1K / 16, NT1 = BM / W1Q / 8;
constexpr int W2K = imin(NW, BN / WROWS), W2D = NW / W2K;
constexpr int MT2 = BN / W2K / 16, NT2 = D / W2D / 8;
constexpr int W3Q = imin(NW, BM / WROWS), W3D = NW / W3Q;
constexpr int MT3 = BM / W3Q / 16, NT3 = D / W3D / 8;
constexpr int NT3P = NT3 < 4 ? NT3 : 4;  // n8 tiles of dQ per pass (32 columns at most)
// The model counts shared-memory reads from these warp grids (iosim/kernels.py
// SPECS["fa2_bwd"].bwd_readers); the Plan passes what it assumed and the compile holds the two
// together.
#ifdef MODEL_W1K
static_assert(W1K == MODEL_W1K && W3Q == MODEL_W3Q && W3D * (NT3 / NT3P) == MODEL_DS_DQ,
              "iosim/kernels.py bwd_readers no longer mirrors this kernel's warp grids");
#endif
// Phase 1's fused Sᵀ/dPᵀ k loop: its order and unroll are the ones with no register spills
// for every mask with nvcc 13 (sm_90a; tests/test_kernel_compile.py) and the fastest measured
// on H100 (`git show 2baace1:reports/data/h100/dev/fa2_bwd/`): d = 64 and 256 a k slice of Sᵀ then of dPᵀ,
// unrolled fully (d = 64) or D/32 times; d = 128 interleaved MMA by MMA, not unrolled (twice
// with the bottom-right diagonal, whose run-time offset takes a register more).
constexpr bool P1_BY_SLICE = D != 128;
constexpr int P1_UNROLL = D == 64 ? D / 16 : D == 128 ? 1 + CAUSAL_BOTTOM_RIGHT : D / 32;
static_assert(BN % 16 == 0 && BM % 64 == 0, "BLOCK_N: multiple of 16; BLOCK_M: of 64 (swizzle)");
static_assert(NW % W1K == 0 && BN % (16 * W1K) == 0 && BM % (16 * W1Q) == 0, "phase-1 warp grid");
static_assert(D % (16 * W2D) == 0 && NW % W3Q == 0 && D % (16 * W3D) == 0, "phase-2/3 warp grids");
static_assert(NS >= 2, "STAGES must be >= 2 (the ring issues block i+STAGES-1 during step i)");
static_assert(THREADS >= 2 * BM, "one thread per LSE and per D element of a query block");
static_assert(BN * DCH % THREADS == 0, "the epilogue stores whole passes of 16-byte chunks");
constexpr int RSTEP = THREADS / DCH;  // rows covered by one pass of all threads
static_assert(THREADS % DCH == 0 && RSTEP % 8 == 0 && BM % RSTEP == 0 && BN % RSTEP == 0,
              "NUM_WARPS*32 threads must copy whole 8-row groups of Q, K tiles per pass");

// Copy rows [row0, row0+ROWS) of a (rows, D) slice into a swizzled shared tile; rows >= nvalid
// are zero-filled (cp.async src-size 0 reads no global memory).
template <int ROWS>
__device__ __forceinline__ void load_rows(u32 s_addr, const elem_t* __restrict__ g, int row0,
                                          int nvalid, int tid) {
    const int r = tid / DCH;
    const int ch = tid % DCH;
    const u32 s_off = s_addr + 2u * (u32)swz<DCH>(r, ch);
    const elem_t* src0 = g + (size_t)(row0 + r) * D + ch * 8;
    const int left = nvalid - row0 - r;
#pragma unroll
    for (int i = 0; i < ROWS / RSTEP; ++i)
        cp_async_16(s_off + (u32)(i * RSTEP * D * 2), src0 + i * RSTEP * D, i * RSTEP < left);
}

using bwd_mma::chunk_off;
}  // namespace fb

extern "C" __global__ void __launch_bounds__(fb::THREADS, 1)
fa2_bwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
        const elem_t* __restrict__ dO, const float* __restrict__ LSE,
        const float* __restrict__ Dst, float* __restrict__ dQacc, elem_t* __restrict__ dK,
        elem_t* __restrict__ dV, int Nq, int Nk, int H, int KVH, float scale) {
    using namespace fb;
    extern __shared__ __align__(128) elem_t smem[];
    elem_t* sK = smem;                 // BN x D
    elem_t* sV = sK + BN * D;          // BN x D
    elem_t* sQ = sV + BN * D;          // NS x BM x D
    elem_t* sdO = sQ + NS * BM * D;    // NS x BM x D
    elem_t* sPt = sdO + NS * BM * D;   // BN x BM (Pᵀ: rows = keys)
    elem_t* sdSt = sPt + BN * BM;      // BN x BM (dSᵀ)
    float* sL = reinterpret_cast<float*>(sdSt + BN * BM);  // NS x BM (LSE)
    float* sD = sL + NS * BM;                               // NS x BM (D)

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int h = blockIdx.y;
    const int b = blockIdx.z;
    const int kvh = h / (H / KVH);
    const int n0 = blockIdx.x * BN;

    const size_t q_rows = ((size_t)b * H + h) * (size_t)Nq;
    const size_t kv_rows = ((size_t)b * KVH + kvh) * (size_t)Nk;

    // Causal: query row q sees keys <= q + off. The first query block that sees key n0 is
    // (n0 - off) / BM; none does when the last row does not.
    const int off = CAUSAL_BOTTOM_RIGHT ? Nk - Nq : 0;
    const int m_first = IS_CAUSAL ? (n0 - off > 0 ? (n0 - off) / BM : 0) : 0;
    const int m_blocks = (Nq + BM - 1) / BM;
    const int n_iter = (IS_CAUSAL && Nq - 1 + off < n0) ? 0 : m_blocks - m_first;
    // Not causal: the key blocks of one head start at different query blocks (CTA j at block
    // j mod n_iter, then around), so that the CTAs running at once add into different dQ rows
    // (in step, every key block's fp32 atomics met in the same 32 KB of dQacc). Causal CTAs
    // start on their diagonals, apart already.
    auto q_block = [&](int it) {  // query block of step it
        if (!IS_CAUSAL) return (int)(((unsigned)it + blockIdx.x) % (unsigned)n_iter);
        return m_first + it;
    };

    auto issue = [&](int it) {  // Q, dO, LSE, D of step it into ring slot it % NS
        if (it < n_iter) {
            const int slot = it % NS;
            const int m0 = q_block(it) * BM;
            // (pointers formed here from the kernel parameters: none stays live in the loop)
            load_rows<BM>(smem_u32(sQ + slot * BM * D), Q + q_rows * D, m0, Nq, tid);
            load_rows<BM>(smem_u32(sdO + slot * BM * D), dO + q_rows * D, m0, Nq, tid);
            if (tid < BM)
                cp_async_4(smem_u32(sL + slot * BM + tid), LSE + q_rows + m0 + tid, m0 + tid < Nq);
            else if (tid < 2 * BM)
                cp_async_4(smem_u32(sD + slot * BM + tid - BM), Dst + q_rows + m0 + tid - BM,
                           m0 + tid - BM < Nq);
        }
        cp_async_commit();
    };

    // ---- prologue: K_j, V_j and step 0 in one group, steps 1 .. NS-2 one group each
    if (n_iter > 0) {
        load_rows<BN>(smem_u32(sK), K + kv_rows * D, n0, Nk, tid);
        load_rows<BN>(smem_u32(sV), V + kv_rows * D, n0, Nk, tid);
    }
#pragma unroll
    for (int s = 0; s < NS - 1; ++s) issue(s);

    // Warp positions in the three warp grids.
    const int k1 = (warp % W1K) * MT1 * 16, q1 = (warp / W1K) * NT1 * 8;
    const int k2 = (warp % W2K) * MT2 * 16, d2 = (warp / W2K) * NT2 * 8;
    const int q3 = (warp % W3Q) * MT3 * 16, d3 = (warp / W3Q) * NT3 * 8;
    // ldmatrix lane patterns (as fa2.cu): "A" rows lane & 15, chunk bit lane >> 4 (also the
    // pattern of ldmatrix.trans B operands); "B" rows (lane & 7) + 8 (lane >> 4), chunk bit
    // (lane >> 3) & 1 (also ldmatrix.trans A operands).
    const int arow = lane & 15;
    const u32 akey = (u32)((lane >> 4) ^ (lane & 7));
    const int brow = (lane & 7) + ((lane >> 4) << 3);
    const u32 bkey = (u32)(((lane >> 3) & 1) ^ (lane & 7));
    const float sl2 = scale * IOSIM_LOG2E;

    float dv[MT2][NT2][4], dk[MT2][NT2][4];
#pragma unroll
    for (int mt = 0; mt < MT2; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT2; ++nt)
#pragma unroll
            for (int r = 0; r < 4; ++r) dv[mt][nt][r] = dk[mt][nt][r] = 0.f;

    for (int it = 0; it < n_iter; ++it) {
        const int slot = it % NS;
        const int m0 = q_block(it) * BM;
        cp_async_wait<NS - 2>();
        __syncthreads();  // step it landed; every warp is done with step it-1 (its slot, Pᵀ, dSᵀ)
        issue(it + NS - 1);
        const u32 sQs = smem_u32(sQ + slot * BM * D), sdOs = smem_u32(sdO + slot * BM * D);

        // ---- phase 1: Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ in one k loop (two independent MMA
        // chains per fragment load; with 2 warps a scheduler, one GEMM at a time left the issue
        // slots idle on ldmatrix->mma latency), then Pᵀ and dSᵀ from registers.
        const bool need_mask =
            (n0 + BN > Nk) || (m0 + BM > Nq) || (IS_CAUSAL && n0 + BN - 1 > m0 + off);
        const float* sLs = sL + slot * BM;
        const float* sDs = sD + slot * BM;
        const u32 sKa = smem_u32(sK), sVa = smem_u32(sV);
        float st[MT1][NT1][4], dpt[MT1][NT1][4];
#pragma unroll
        for (int mt = 0; mt < MT1; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT1; ++nt)
#pragma unroll
                for (int r = 0; r < 4; ++r) st[mt][nt][r] = dpt[mt][nt][r] = 0.f;
#pragma unroll(P1_UNROLL)
        for (int kk = 0; kk < D / 16; ++kk) {
            if constexpr (P1_BY_SLICE) {  // a k slice of Sᵀ, then the same slice of dPᵀ
#pragma unroll
                for (int g = 0; g < 2; ++g)
                    bwd_mma::a_bt<MT1, NT1, D, D>(g ? dpt : st, g ? sVa : sKa, k1, g ? sdOs : sQs, q1,
                                                  kk, arow, akey, brow, bkey);
            } else {  // Sᵀ and dPᵀ interleaved MMA by MMA
                u32 ak[MT1][4], av[MT1][4];
#pragma unroll
                for (int mt = 0; mt < MT1; ++mt) {
                    const u32 o = (u32)((k1 + mt * 16 + arow) * D * 2) + chunk_off(akey, kk);
                    ldmatrix_x4(ak[mt], sKa + o);
                    ldmatrix_x4(av[mt], sVa + o);
                }
#pragma unroll
                for (int nn = 0; nn < NT1 / 2; ++nn) {
                    u32 bq[4], bo[4];
                    const u32 o = (u32)((q1 + nn * 16 + brow) * D * 2) + chunk_off(bkey, kk);
                    ldmatrix_x4(bq, sQs + o);
                    ldmatrix_x4(bo, sdOs + o);
#pragma unroll
                    for (int mt = 0; mt < MT1; ++mt) {
                        mma_m16n8k16(st[mt][2 * nn], ak[mt], bq);
                        mma_m16n8k16(st[mt][2 * nn + 1], ak[mt], bq + 2);
                        mma_m16n8k16(dpt[mt][2 * nn], av[mt], bo);
                        mma_m16n8k16(dpt[mt][2 * nn + 1], av[mt], bo + 2);
                    }
                }
            }
        }
        // Pᵀ = exp2(Sᵀ·scale·log2e − LSE·log2e) (P recomputed from the stored LSE, no max/sum),
        // dSᵀ = Pᵀ ∘ (dPᵀ − D) from the fp32 Pᵀ (as FA2; rounding Pᵀ first cost 64 unpack
        // instructions a warp per step, ~5% at d = 64: `git show 2baace1:reports/data/h100/dev/fa2_bwd/tune_bulk.log`);
        // masked entries (causal, ragged Nq/Nk) are 0. Element (mt, nt, r): key row
        // k1 + mt*16 + lane/4 + 8*(r/2), query column q1 + nt*8 + 2*(lane%4) + r%2; its pair
        // (r, r+1) is one u32 in shared.
        {
            const int key0 = n0 + k1 + (lane >> 2), q0 = m0 + q1 + 2 * (lane & 3);
            const int k_left = Nk - key0, q_left = Nq - q0, kq = q0 + off - key0;
#pragma unroll
            for (int nt = 0; nt < NT1; ++nt) {  // a column's LSE and D read once for its rows
                const int qc = q1 + nt * 8 + 2 * (lane & 3);
                const float2 lse = *reinterpret_cast<const float2*>(sLs + qc);
                const float2 dd = *reinterpret_cast<const float2*>(sDs + qc);
                const float l2[2] = {lse.x * IOSIM_LOG2E, lse.y * IOSIM_LOG2E};
                const float dsub[2] = {dd.x, dd.y};
#pragma unroll
                for (int mt = 0; mt < MT1; ++mt) {
                    float pr[4];
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        const int c = r & 1;
                        const float x = fmaf(st[mt][nt][r], sl2, -l2[c]);
                        float p = fast_exp2(x);
                        if (need_mask) {  // key = key0 + dk_, query = q0 + dq_ (constants)
                            const int dk_ = mt * 16 + (r >> 1) * 8, dq_ = nt * 8 + c;
                            if (dk_ >= k_left || dq_ >= q_left || (IS_CAUSAL && dk_ - dq_ > kq))
                                p = 0.f;
                        }
                        pr[r] = p;
                    }
#pragma unroll
                    for (int hr = 0; hr < 2; ++hr) {
                        // rows 8 and 16 apart keep their swizzle key: a constant offset
                        const int e = swz<MCH>(k1 + (lane >> 2), qc >> 3) + (qc & 7) + (mt * 16 + hr * 8) * BM;
                        *reinterpret_cast<u32*>(sPt + e) = pack2_elem(pr[2 * hr], pr[2 * hr + 1]);
                        *reinterpret_cast<u32*>(sdSt + e) =
                            pack2_elem(pr[2 * hr] * (dpt[mt][nt][2 * hr] - dsub[0]),
                                       pr[2 * hr + 1] * (dpt[mt][nt][2 * hr + 1] - dsub[1]));
                    }
                }
            }
        }
        __syncthreads();  // Pᵀ, dSᵀ visible to every warp

        // ---- phases 2 and 3: dV += Pᵀ dO_i and dK += dSᵀ Q_i (k = the block's query rows;
        // warps split the key rows, then d), and dQ_i += dS K_j (k = the key rows; warps split
        // the query rows, then d), fp32 atomics into dQacc. dQ in passes of at most 32 columns
        // of d (fewer live accumulators, no spills; dS fragments re-read per pass); where it
        // takes one pass (d = 64, 128) the three GEMMs share one k loop, for the same reason
        // as phase 1, else dV and dK come first.
        auto phase2_step = [&](float (&acc)[MT2][NT2][4], u32 sA, u32 sB, int kk) {
            bwd_mma::a_b<MT2, NT2, BM, D>(acc, sA, k2, sB, d2 / 16, kk, arow, akey);
        };
        constexpr bool P23 = NT3 == NT3P;  // phases 2 and 3 in one k loop
        constexpr int K2 = BM / 16, K3 = BN / 16, K23 = P23 && K2 > K3 ? K2 : K3;
        if constexpr (!P23) {
#pragma unroll
            for (int kk = 0; kk < K2; ++kk) phase2_step(dv, smem_u32(sPt), sdOs, kk);
#pragma unroll
            for (int kk = 0; kk < K2; ++kk) phase2_step(dk, smem_u32(sdSt), sQs, kk);
        }
#pragma unroll 1
        for (int pass = 0; pass < NT3 / NT3P; ++pass) {
            const int dp = d3 + pass * NT3P * 8;
            float dq[MT3][NT3P][4];
#pragma unroll
            for (int mt = 0; mt < MT3; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT3P; ++nt)
#pragma unroll
                    for (int r = 0; r < 4; ++r) dq[mt][nt][r] = 0.f;
            auto dq_step = [&](int kk) {  // dS from dSᵀ
                bwd_mma::at_b<MT3, NT3P, BM, D>(dq, smem_u32(sdSt), q3, smem_u32(sK), dp / 16, kk,
                                                arow, akey, brow, bkey);
            };
#pragma unroll
            for (int kk = 0; kk < K23; ++kk) {
                if (P23 && kk < K2) {
                    phase2_step(dv, smem_u32(sPt), sdOs, kk);
                    phase2_step(dk, smem_u32(sdSt), sQs, kk);
                }
                if (kk < K3) dq_step(kk);
            }
#pragma unroll
            for (int mt = 0; mt < MT3; ++mt)
#pragma unroll
                for (int hr = 0; hr < 2; ++hr) {
                    const int row = m0 + q3 + mt * 16 + (lane >> 2) + hr * 8;
                    if (row < Nq) {
                        float* dst = dQacc + (q_rows + row) * D + dp + 2 * (lane & 3);
#pragma unroll
                        for (int nt = 0; nt < NT3P; ++nt)
                            red_add_f32x2(dst + nt * 8, dq[mt][nt][2 * hr], dq[mt][nt][2 * hr + 1]);
                    }
                }
        }
    }
    cp_async_wait<0>();
    __syncthreads();  // K_j, V_j no longer read: they stage dK_j, dV_j

    // ---- epilogue: dK = scale·dK, dV in elem_t, through shared memory, 16-byte stores
#pragma unroll
    for (int mt = 0; mt < MT2; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int krow = k2 + mt * 16 + (lane >> 2) + hr * 8;
#pragma unroll
            for (int nt = 0; nt < NT2; ++nt) {
                const int col = d2 + nt * 8 + 2 * (lane & 3);
                const int e = swz<DCH>(krow, col >> 3) + (col & 7);
                *reinterpret_cast<u32*>(sK + e) =
                    pack2_elem(dk[mt][nt][2 * hr] * scale, dk[mt][nt][2 * hr + 1] * scale);
                *reinterpret_cast<u32*>(sV + e) = pack2_elem(dv[mt][nt][2 * hr], dv[mt][nt][2 * hr + 1]);
            }
        }
    __syncthreads();
    const size_t out_rows = ((size_t)b * H + h) * (size_t)Nk;  // per query head
#pragma unroll
    for (int i = 0; i < BN * DCH / THREADS; ++i) {
        const int c = tid + i * THREADS;
        const int r = c / DCH;
        const int ch = c % DCH;
        if (n0 + r < Nk) {
            const size_t off = (out_rows + n0 + r) * D + ch * 8;
            *reinterpret_cast<uint4*>(dK + off) = *reinterpret_cast<const uint4*>(sK + swz<DCH>(r, ch));
            *reinterpret_cast<uint4*>(dV + off) = *reinterpret_cast<const uint4*>(sV + swz<DCH>(r, ch));
        }
    }
}
#endif  // FA2_BWD
