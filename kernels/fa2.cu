// fa2.cu -- FlashAttention-2 forward (Dao 2023, "FlashAttention-2", Algorithm 1, forward pass).
//
// Entry: fa2_fwd(Q, K, V, O, LSE, Nq, Nk, H, KVH, scale)          (docs/kernel-contract.md)
//   Q (B,H,Nq,d), K/V (B,KVH,Nk,d), O (B,H,Nq,d): contiguous, elem_t (bf16 or fp16);
//   LSE (B,H,Nq) fp32 = m + log(l) in natural log. Head h reads K/V head h / (H/KVH) (GQA).
//   Causal: query row i sees keys j <= i + off, off = 0 (top-left, torch's is_causal) or, with
//   CAUSAL_BOTTOM_RIGHT, Nk - Nq (FlashAttention 2.1+); a row that sees no key gets O = 0 and
//   LSE = -inf. All offsets are 64-bit.
// Grid (ceil(Nq/BLOCK_M), H, B), NUM_WARPS*32 threads, dynamic shared memory: one Q tile,
//   STAGES K tiles and STAGES V tiles of HEAD_DIM_PAD-element rows (the Q tile is reused to
//   stage O for coalesced stores); the byte count is the KernelSpec's (iosim/kernels.py,
//   SPECS["fa2_fwd"].smem), the tiles the Plan's (iosim/schedules/fa2.py). blockIdx.x = ceil(Nq/BLOCK_M)-1 - m_block: the query tiles
//   run in reverse order, so under causal masking the CTAs with the most key tiles start first.
//   CTA with query tile m_block runs ceil(n_end / BLOCK_N) key tiles, n_end = Nk, or
//   clamp((m_block+1)*BLOCK_M + off, 0, Nk) when causal (0 tiles: O = 0, LSE = -inf), from
//   key tile floor(max(0, m_block*BLOCK_M + off - WINDOW) / BLOCK_N) with a sliding window.
//
// Tile parameters (all -D defines from the Plan): HEAD_DIM (any multiple of 8 up to 256: the
//   row length in HBM), HEAD_DIM_PAD (the row length of the shared tiles: 64, 128 or 256, so
//   that the swizzle has 8, 16 or 32 chunks a row and one pass of the threads covers whole
//   rows; chunks past HEAD_DIM rounded up to 16 are never loaded or read, the chunk past
//   HEAD_DIM up to that is zero-filled), BLOCK_M (query rows per CTA; a multiple of
//   16*NUM_WARPS), BLOCK_N (key rows per tile; a multiple of 16), NUM_WARPS, STAGES (>= 1: K/V
//   cp.async ring depth), IS_CAUSAL (0/1), CAUSAL_BOTTOM_RIGHT (0/1), WINDOW (-1: none; W >= 0:
//   a sliding window, row i sees keys i + off - W <= j <= i + off; needs IS_CAUSAL), and
//   ELEM_BF16=1 or ELEM_FP16=1.
//   Tiles per GPU and head_dim: the Plan's table (iosim/schedules/fa2.py FWD_TILES); measured
//   speeds: reports/ (never copied here).
//
// What it does (per CTA = one query tile of one head):
//   * Q-outer loop order (FA2): the CTA owns BLOCK_M query rows and streams all K/V tiles, so O,
//     m and l never leave registers and O is written once (fa1.cu re-reads and re-writes the
//     fp32 O accumulator, m and l in HBM at every step).
//   * Warps split the query rows (FA2's "split Q"), not the keys: each warp owns BLOCK_M/NUM_WARPS
//     rows as BLOCK_M/(16*NUM_WARPS) m16 tiles, so the softmax statistics need only quad
//     shuffles and there is no inter-warp reduction.
//   * S = Q K^T and O += P V with mma.sync m16n8k16 (fp32 accumulate); operands from shared
//     memory through ldmatrix (.trans for V); P goes from the S accumulators straight into the
//     A fragments of the PV product (no shared-memory round trip).
//   * Shared tiles are XOR-swizzled in 16-byte chunks (chunk ^ (row & 7)): ldmatrix and the
//     cp.async stores are bank-conflict-free, no padding.
//   * cp.async pipeline of K/V tiles, issued in the order K0 V0 K1 V1 ...; with STAGES = S,
//     V_{j+S-1} is issued before S_j is computed and K_{j+S} after P_j V_j (S >= 2; for S = 1,
//     FA2's own single-buffer schedule, before P_j V_j), so the copies overlap the GEMMs.
//   * Online softmax in registers in the log2 domain: p = exp2(s * scale*log2(e) - m) (one FFMA
//     + ex2.approx); the row sum l is kept per thread and reduced across the quad only once at
//     the end; O is rescaled by 1/l once at the end (FA2's "fewer non-matmul FLOPs").
//   * Causal: key tiles entirely above the diagonal are never loaded or computed; only tiles
//     that cross the diagonal (or the ragged Nk edge) pay for masking. Sliding window: key
//     tiles entirely before the window of the CTA's first row are skipped too, and tiles that
//     cross the window's lower edge of its last row are masked.
//   * Ragged Nq/Nk: loads of rows past the end are zero-filled (cp.async src-size 0), masked
//     columns are -inf, stores of rows >= Nq are skipped. Ragged head_dim (not a power of two):
//     the products run over HEAD_DIM rounded up to 16 (the MMA's k), the zero-filled chunk
//     adding nothing; only HEAD_DIM columns of O are stored.
#include "common.cuh"

#ifndef HEAD_DIM
#error "HEAD_DIM must be defined"
#endif
#ifndef BLOCK_M
#error "BLOCK_M must be defined"
#endif
#ifndef BLOCK_N
#error "BLOCK_N must be defined"
#endif
#ifndef NUM_WARPS
#error "NUM_WARPS must be defined"
#endif
#ifndef STAGES
#error "STAGES must be defined"
#endif
#ifndef IS_CAUSAL
#error "IS_CAUSAL must be defined"
#endif
#ifndef CAUSAL_BOTTOM_RIGHT
#error "CAUSAL_BOTTOM_RIGHT must be defined"
#endif
#ifndef HEAD_DIM_PAD
#error "HEAD_DIM_PAD must be defined"
#endif
#ifndef WINDOW
#error "WINDOW must be defined (-1: no sliding window)"
#endif

namespace fa2 {

constexpr int DG = HEAD_DIM;        // row length in HBM
constexpr int D = HEAD_DIM_PAD;     // row length of the shared tiles
constexpr int DK = (DG + 15) / 16 * 16;  // columns the products run over (the MMA's k is 16)
constexpr int DKCH = DK / 8;        // 16-byte chunks a row that are loaded (the last maybe zero)
constexpr int DGCH = DG / 8;        // 16-byte chunks a row in HBM
constexpr int BM = BLOCK_M;
constexpr int BN = BLOCK_N;
constexpr int NW = NUM_WARPS;
constexpr int NS = STAGES;
constexpr int THREADS = NW * 32;
constexpr int MT = BM / (16 * NW);  // m16 tiles per warp
constexpr int ROWS_W = 16 * MT;     // query rows per warp
constexpr int DCH = D / 8;          // 16-byte chunks per row
constexpr int NT_S = BN / 8;        // n8 tiles of S per m16 tile
constexpr int NT_O = DK / 8;        // n8 tiles of O per m16 tile
constexpr int KS_S = DK / 16;       // k16 steps of Q K^T
constexpr int KS_O = BN / 16;       // k16 steps of P V

static_assert(D % 64 == 0, "HEAD_DIM_PAD must be a multiple of 64 (swizzled rows of >= 8 chunks)");
static_assert(DG % 8 == 0 && DG <= D, "HEAD_DIM must be a multiple of 8, at most HEAD_DIM_PAD");
// The Plan's facts (iosim/kernels.py SPECS["fa2_fwd"]): its shared-memory rows (head_dim_pad)
// and the model's K_j/V_j readers (every warp ldmatrix-reads all of them).
static_assert(D == (DG <= 64 ? 64 : DG <= 128 ? 128 : 256),
              "HEAD_DIM_PAD: the power of two >= HEAD_DIM and >= 64 (SPECS head_dim_pad)");
#ifdef MODEL_KV_READERS
static_assert(MODEL_KV_READERS == NW, "iosim/kernels.py kv_readers: every warp reads K_j, V_j");
#endif
static_assert(BM % (16 * NW) == 0 && MT >= 1, "BLOCK_M must be a multiple of 16*NUM_WARPS");
static_assert(BN % 16 == 0, "BLOCK_N must be a multiple of 16");
static_assert(NS >= 1, "STAGES must be >= 1");
static_assert(WINDOW < 0 || IS_CAUSAL, "a sliding window (WINDOW >= 0) needs IS_CAUSAL");
// cp.async group accounting: one group per K tile and one per V tile, issued K0 V0 K1 V1 ...;
// before S_j (needs K_j) and before P_j V_j (needs V_j) at most 2*STAGES-2 newer groups pend.
constexpr int PENDING = 2 * NS - 2;

// Copy rows [row0, row0+ROWS) of a (rows, DG) tensor slice into a swizzled shared tile of rows of
// D; rows >= nvalid are zero-filled, and so is the chunk past DG (when DG % 16 == 8); chunks from
// DK on are not copied (never read). Thread tid copies chunk (tid % DCH) of rows tid/DCH + i*RSTEP:
// since RSTEP is a multiple of 8, the swizzled shared offset is one per-thread base plus
// compile-time constants (no per-copy index arithmetic).
constexpr int RSTEP = THREADS / DCH;  // rows covered by one pass of all threads
static_assert(THREADS % DCH == 0 && RSTEP % 8 == 0, "NUM_WARPS*32 must cover >= 8 rows per pass");

// rows >= nvalid are zero-filled by cp.async with src-size 0, which reads no global memory, so
// their (past-the-end) source address is never dereferenced.
template <int ROWS>
__device__ __forceinline__ void load_tile(u32 s_addr, const elem_t* __restrict__ g, int row0,
                                          int nvalid, int tid) {
    static_assert(ROWS % RSTEP == 0, "tile rows must be a multiple of NUM_WARPS*32*8/HEAD_DIM");
    const int r = tid / DCH;
    const int ch = tid % DCH;
    if (DK < D && ch >= DKCH) return;  // padding: never read
    const bool in_row = DG == DK || ch < DGCH;
    const u32 s_off = s_addr + 2u * (u32)swz<DCH>(r, ch);
    const elem_t* src0 = g + (size_t)(row0 + r) * DG + ch * 8;
    const int left = nvalid - row0 - r;  // copy i is in bounds iff i*RSTEP < left
#pragma unroll
    for (int i = 0; i < ROWS / RSTEP; ++i)
        cp_async_16(s_off + (u32)(i * RSTEP * D * 2), src0 + i * RSTEP * DG,
                    in_row && i * RSTEP < left);
}

// ldmatrix addressing in a swizzled tile: a lane supplies row `row` (row & 7 == key & 7 for all
// the rows it ever addresses, as tiles step by 16 rows) and chunk 2*kk + c (c = 0/1 per lane).
// lane_base = row byte offset; lane_key = c ^ (row & 7); the physical chunk of logical chunk
// 2*kk + c is (2*kk) ^ lane_key (2*kk is even, c is bit 0), so each address costs one LOP3.
__device__ __forceinline__ u32 chunk_off(u32 lane_key, int kk) {
    return (((u32)(2 * kk)) ^ lane_key) << 4;
}

}  // namespace fa2

extern "C" __global__ void __launch_bounds__(fa2::THREADS)
fa2_fwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
        elem_t* __restrict__ O, float* __restrict__ LSE, int Nq, int Nk, int H, int KVH,
        float scale) {
    using namespace fa2;
    extern __shared__ __align__(128) elem_t smem[];
    elem_t* sQ = smem;               // BM x D
    elem_t* sK = sQ + BM * D;        // NS x BN x D
    elem_t* sV = sK + NS * BN * D;   // NS x BN x D

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int m_block = gridDim.x - 1 - blockIdx.x;
    const int h = blockIdx.y;
    const int b = blockIdx.z;
    const int kvh = h / (H / KVH);
    const int m0 = m_block * BM;

    const size_t q_base = ((size_t)b * H + h) * (size_t)Nq * DG;
    const size_t kv_base = ((size_t)b * KVH + kvh) * (size_t)Nk * DG;
    const elem_t* Qg = Q + q_base;
    const elem_t* Kg = K + kv_base;
    const elem_t* Vg = V + kv_base;

    // causal: row i sees keys j <= i + off; this CTA's last row sees keys < m0 + BM + off
    const int off = CAUSAL_BOTTOM_RIGHT ? Nk - Nq : 0;
    int n_end = Nk;
    if (IS_CAUSAL) n_end = max(0, min(Nk, m0 + BM + off));
    const int n_last = (n_end + BN - 1) / BN;
    // sliding window: the first row sees keys >= m0 + off - WINDOW; tiles before are skipped.
    // Tile t of the loop is key tile n_first + t: Kg, Vg start at its rows.
    const int n_first = WINDOW >= 0 ? min(max(0, m0 + off - WINDOW) / BN, n_last) : 0;
    const int n_blocks = n_last - n_first;
    const int kv0 = n_first * BN;
    const int nk_left = Nk - kv0;  // rows of the shifted K/V that exist
    Kg += (size_t)kv0 * DG;
    Vg += (size_t)kv0 * DG;

    // ---- prologue: Q + K0 | V0 | K1 | ... | V_{NS-2} | K_{NS-1}
    load_tile<BM>(smem_u32(sQ), Qg, m0, Nq, tid);
    if (n_blocks > 0) load_tile<BN>(smem_u32(sK), Kg, 0, nk_left, tid);
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < NS - 1; ++s) {
        if (s < n_blocks) load_tile<BN>(smem_u32(sV + s * BN * D), Vg, s * BN, nk_left, tid);
        cp_async_commit();
        if (s + 1 < n_blocks)
            load_tile<BN>(smem_u32(sK + (s + 1) * BN * D), Kg, (s + 1) * BN, nk_left, tid);
        cp_async_commit();
    }

    const float sl2 = scale * IOSIM_LOG2E;
    float o[MT][NT_O][4];
    float m_i[MT][2], l_i[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < NT_O; ++nt)
#pragma unroll
            for (int r = 0; r < 4; ++r) o[mt][nt][r] = 0.f;
        m_i[mt][0] = m_i[mt][1] = IOSIM_NEG_INF;
        l_i[mt][0] = l_i[mt][1] = 0.f;
    }

    // Per-lane ldmatrix byte offsets (swizzle: physical chunk = chunk ^ (row & 7)).
    const int wrow0 = warp * ROWS_W;
    // A (Q, x4): matrices (rows 0-7 | 8-15) x (k chunk +0 | +1); the same lane pattern serves
    // B (V, x4.trans): matrices (kv rows 0-7 | 8-15) x (d chunk +0 | +1).
    const int qrow = lane & 15;
    const u32 qkey = (u32)((lane >> 4) ^ (lane & 7));
    // B (K, x4, non-trans): matrices (kv rows 0-7, d +0 | d +1 | kv rows 8-15 ...)
    const int krow = (lane & 7) + ((lane >> 4) << 3);
    const u32 kkey = (u32)(((lane >> 3) & 1) ^ (lane & 7));
    const u32 sQ_a = smem_u32(sQ) + (u32)((wrow0 + qrow) * D * 2);
    const u32 sK_a = smem_u32(sK) + (u32)(krow * D * 2);
    const u32 sV_a = smem_u32(sV) + (u32)(qrow * D * 2);

    auto issue_k = [&](int jk) {
        if (jk < n_blocks) load_tile<BN>(smem_u32(sK + (jk % NS) * BN * D), Kg, jk * BN, nk_left, tid);
        cp_async_commit();
    };

    for (int j = 0; j < n_blocks; ++j) {
        const int stage = j % NS;
        const int n0 = kv0 + j * BN;

        // ---- A_j: K_j landed; every warp is done with P_{j-1} V_{j-1}
        cp_async_wait<PENDING>();
        __syncthreads();
        {
            const int jv = j + NS - 1;  // V_{j+NS-1} into the V buffer P_{j-1}V_{j-1} just freed
            if (jv < n_blocks) load_tile<BN>(smem_u32(sV + (jv % NS) * BN * D), Vg, jv * BN, nk_left, tid);
            cp_async_commit();
        }

        // ---- S = Q K_j^T
        float s[MT][NT_S][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                for (int r = 0; r < 4; ++r) s[mt][nt][r] = 0.f;

        const u32 kst = sK_a + (u32)(stage * BN * D * 2);
#pragma unroll
        for (int kk = 0; kk < KS_S; ++kk) {
            u32 a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                ldmatrix_x4(a[mt], sQ_a + chunk_off(qkey, kk) + (u32)(mt * 16 * D * 2));
#pragma unroll
            for (int nn = 0; nn < BN / 16; ++nn) {
                u32 bk[4];
                ldmatrix_x4(bk, kst + chunk_off(kkey, kk) + (u32)(nn * 16 * D * 2));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_m16n8k16(s[mt][2 * nn], a[mt], bk);
                    mma_m16n8k16(s[mt][2 * nn + 1], a[mt], bk + 2);
                }
            }
        }

        // ---- mask (only tiles crossing the diagonal, the window's lower edge or the ragged Nk edge)
        const bool need_mask = (n0 + BN > Nk) || (IS_CAUSAL && n0 + BN - 1 > m0 + off)
                               || (WINDOW >= 0 && n0 < m0 + BM - 1 + off - WINDOW);
        if (need_mask) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        const int col = n0 + nt * 8 + 2 * (lane & 3) + (r & 1);
                        const int row = m0 + wrow0 + mt * 16 + (lane >> 2) + (r >> 1) * 8;
                        if (col >= Nk || (IS_CAUSAL && col > row + off)
                            || (WINDOW >= 0 && col < row + off - WINDOW))
                            s[mt][nt][r] = IOSIM_NEG_INF;
                    }
        }

        // ---- online softmax (log2 domain), rescale O
        online_softmax(s, m_i, l_i, o, sl2);
        u32 pa[MT][KS_O][4];
        pack_p(s, pa);

        // ---- B_j: V_j landed; every warp is done with K_j
        cp_async_wait<PENDING>();
        __syncthreads();
        // K_{j+NS} goes into the K buffer S_j just freed. With STAGES >= 2 it is issued after
        // P_j V_j (it is needed only NS-1 iterations later, and S_j's registers are dead by
        // then); with STAGES == 1 right here, so that it overlaps P_j V_j.
        if (NS == 1) issue_k(j + NS);

        // ---- O += P V_j
        const u32 vst = sV_a + (u32)(stage * BN * D * 2);
#pragma unroll
        for (int kk = 0; kk < KS_O; ++kk) {
#pragma unroll
            for (int dn = 0; dn < DK / 16; ++dn) {
                u32 bv[4];
                ldmatrix_x4_trans(bv, vst + chunk_off(qkey, dn) + (u32)(kk * 16 * D * 2));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_m16n8k16(o[mt][2 * dn], pa[mt][kk], bv);
                    mma_m16n8k16(o[mt][2 * dn + 1], pa[mt][kk], bv + 2);
                }
            }
        }
        if (NS > 1) issue_k(j + NS);
    }
    cp_async_wait<0>();
    // Every thread's copies have landed; the barrier makes them visible before O is staged in
    // this warp's Q rows, which other warps copied. The loop's barriers did that already unless
    // there was no key tile (causal, a CTA that sees no key). Unconditional: a conditional
    // barrier here made ptxas spill at d = 64.
    __syncthreads();

    // ---- epilogue: O /= l, LSE = m*ln2 + log(l); O staged through this warp's own Q rows
    __syncwarp();
    const size_t lse_base = ((size_t)b * H + h) * (size_t)Nq;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const float l = quad_sum(l_i[mt][hr]);
            const float inv = l > 0.f ? 1.f / l : 0.f;
            const int lrow = wrow0 + mt * 16 + (lane >> 2) + hr * 8;
            const int row = m0 + lrow;
            if ((lane & 3) == 0 && row < Nq)
                LSE[lse_base + row] = l > 0.f ? (m_i[mt][hr] * IOSIM_LN2 + __logf(l)) : IOSIM_NEG_INF;
#pragma unroll
            for (int nt = 0; nt < NT_O; ++nt) {
                const u32 v = pack2_elem(o[mt][nt][2 * hr] * inv, o[mt][nt][2 * hr + 1] * inv);
                *reinterpret_cast<u32*>(sQ + swz<DCH>(lrow, nt) + 2 * (lane & 3)) = v;
            }
        }
    __syncwarp();
    elem_t* Og = O + q_base;
#pragma unroll
    for (int i = 0; i < ROWS_W * DCH / 32; ++i) {
        const int c = lane + i * 32;
        const int r = c / DCH;
        const int ch = c % DCH;
        const int lrow = wrow0 + r;
        const int row = m0 + lrow;
        if (row < Nq && (DG == D || ch < DGCH))
            *reinterpret_cast<uint4*>(Og + (size_t)row * DG + ch * 8) =
                *reinterpret_cast<const uint4*>(sQ + swz<DCH>(lrow, ch));
    }
}
