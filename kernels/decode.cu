// decode.cu -- split-KV decode attention (Flash-Decoding: Dao, Haziza, Massa, Sizov 2023,
// "Flash-Decoding for long-context inference"; FlashAttention's num_splits path): a few query
// rows a sequence (Nq = 1..16) against a long K/V cache.
//
// Entries (docs/kernel-contract.md), one per selector macro:
//   DECODE_PAGED_FWD: decode_paged_fwd(Q, Kc, Vc, BlockTable, O, LSE, Opart, LSEpart, Counter,
//     Nq, Nk, H, KVH, scale): decode_fwd over a paged cache: Kc, Vc (pages, PAGE_SIZE, KVH, d) elem_t (the
//     layout of FlashAttention's and vLLM's paged caches), BlockTable (B, ceil(Nk/PAGE_SIZE))
//     int32: token t of sequence b is row t % PAGE_SIZE of page BlockTable[b][t / PAGE_SIZE].
//     Each K/V row (d elements of one head of one token: the contiguous unit) is gathered by
//     cp.async from its page. PAGE_AHEAD=1 (the Plan's): each thread reads the table entries of
//     its rows of tile t+1 right after issuing tile t's K loads, into registers, and turns them
//     into cache rows when tile t+1's K issues (its V, issued next, reuses them): no load waits
//     on a table read. PAGE_AHEAD=0 (the earlier kernel, kept for the A/B of
//     experiments/decode/pages_probe.py and for replaying rows measured with it): each 16-byte
//     load reads its row's entry as it issues, so the tile's loads wait on table reads in turn
//     (at one CTA an SM the trip's chain: 12-15% slower at 16-token pages on an H100, 40-75%
//     at every page size on an H200: experiments/decode/h100/pages10/, h200/fused/).
//   DECODE_FWD: decode_fwd(Q, K, V, O, LSE, Opart, LSEpart, Counter, Nq, Nk, H, KVH, scale)
//     Q (B,H,Nq,d), K/V (B,KVH,Nk,d), O (B,H,Nq,d) elem_t; LSE (B,H,Nq) fp32, natural log;
//     Opart (B,H,Nq,S,d), LSEpart (B,H,Nq,S) fp32 with S = NUM_SPLITS: each split's O,
//     normalised over its own keys, and its LSE. NUM_SPLITS == 1: O and LSE are written here
//     (Opart, LSEpart, Counter unused); else the partials, and the CTA of a (batch, grid row)
//     that finishes last merges them into O and LSE (combine_last: LSE = log Σ_s e^LSE_s,
//     O = Σ_s e^(LSE_s-LSE) O_s), counted in Counter (B, H) int32: zero before a launch, left
//     zero by it (entry [b][blockIdx.y] used).
//     Grid (NUM_SPLITS, KVH * chunks, B), chunks = (H/KVH) / HEADS_PER_CTA: blockIdx.y = K/V
//     head * chunks + chunk; the CTA packs query heads h0 .. h0 + HEADS_PER_CTA - 1 of that
//     K/V head's group, HEADS_PER_CTA * Nq rows (contiguous in Q and O), padded to BLOCK_M.
//     NUM_WARPS*32 threads; dynamic shared memory: the Q rows and STAGES K and V tiles, reused
//     at the end for the warps' fp32 partial O, m and l (SPECS["decode_fwd"].smem).
//
// Rows are bottom-right aligned: query row i of a head sits at key position Nk - Nq + i; with
// IS_CAUSAL it sees keys j <= Nk - Nq + i, with WINDOW = W >= 0 (needs IS_CAUSAL) also only
// j >= Nk - Nq + i - W. The key tiles some row sees, [t0, t1) with t0 = max(0, Nk-Nq-W)/BLOCK_N
// (0 without a window) and t1 = ceil(Nk/BLOCK_N), are cut into NUM_SPLITS runs of
// ceil((t1-t0)/NUM_SPLITS) tiles (the Plan makes none empty; an empty one writes O = 0,
// LSE = -inf). A row that sees no key of a split gets O = 0, LSE = -inf there.
//
// Tile parameters (-D defines from the Plan, iosim/schedules/decode.py): HEAD_DIM (64, 128,
//   256), BLOCK_M (packed rows: 16 or 32, BLOCK_M/16 * HEAD_DIM <= 256: the fp32 accumulators
//   a thread holds), BLOCK_N (keys a tile, a multiple of 16*NUM_WARPS), NUM_WARPS,
//   STAGES (cp.async ring depth), IS_CAUSAL, WINDOW, HEADS_PER_CTA, NUM_SPLITS; paged: PAGE_SIZE,
//   PAGE_AHEAD (1 if not given); ELEM_BF16=1 or ELEM_FP16=1. The K/V loads' L2 hints, not the
//   Plan's (kernel defaults, overridden only by A/B probes): KV_PREFETCH (256: an L2 miss fetches
//   256 bytes from DRAM; 0, 64, 128) and KV_EVICT_FIRST (1: the streamed lines, read once, are
//   evicted first). At batch 32 on an H100 the two together took 0.2-0.4% off the time, in the
//   same process as the kernel without them and cuDNN (experiments/decode/h100/state11/
//   b32_ab.csv: pf256_ef against base).
//
// What it does (per CTA):
//   * GQA packing: the K/V tiles of a split are read from HBM once for all packed query heads.
//   * The warps split the keys, not the rows: warp w takes keys [w*BN/NW, (w+1)*BN/NW) of every
//     tile, S = Q K^T and O += P V with mma.sync m16n8k16 (fp32 accumulate), its own online
//     softmax (log2 domain), no synchronisation between warps inside the loop but the ring's;
//     the warps' (m, l, O) merged through shared memory at the end.
//   * K/V tiles through a STAGES-deep cp.async ring issued K0 V0 K1 V1 ... (as kernels/fa2.cu),
//     shared tiles XOR-swizzled in 16-byte chunks (bank-conflict-free ldmatrix).
//   * Masking only on tiles that cross the ragged end of K, the first row's diagonal (causal) or
//     the last row's window edge. Rows past Nk: zero-filled loads, -inf scores.
#include "common.cuh"

#ifndef HEAD_DIM
#error "HEAD_DIM must be defined"
#endif
#ifndef NUM_SPLITS
#error "NUM_SPLITS must be defined"
#endif

#if defined(DECODE_FWD) || defined(DECODE_PAGED_FWD)
#if defined(DECODE_PAGED_FWD) && !defined(PAGE_SIZE)
#error "PAGE_SIZE must be defined (tokens a page of the paged cache)"
#endif
#ifndef PAGE_SIZE
#define PAGE_SIZE 0
#endif
#ifndef PAGE_AHEAD
#define PAGE_AHEAD 1
#endif
#ifndef KV_PREFETCH
#define KV_PREFETCH 256
#endif
#ifndef KV_EVICT_FIRST
#define KV_EVICT_FIRST 1
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
#ifndef WINDOW
#error "WINDOW must be defined (-1: no sliding window)"
#endif
#ifndef HEADS_PER_CTA
#error "HEADS_PER_CTA must be defined"
#endif

namespace dec {

constexpr int D = HEAD_DIM;
constexpr int DCH = D / 8;        // 16-byte chunks a row
constexpr int R = BLOCK_M;        // packed query rows (padded)
constexpr int MT = R / 16;        // m16 tiles (every warp holds all of them)
constexpr int BN = BLOCK_N;
constexpr int NW = NUM_WARPS;
constexpr int NS = STAGES;
constexpr int THREADS = NW * 32;
constexpr int KW = BN / NW;       // keys of a tile a warp takes
constexpr int NT_S = KW / 8;      // n8 tiles of a warp's S
constexpr int NT_O = D / 8;       // n8 tiles of O
constexpr int KS_S = D / 16;      // k16 steps of Q K^T
constexpr int KS_O = KW / 16;     // k16 steps of P V
constexpr int PENDING = 2 * NS - 2;

static_assert(D == 64 || D == 128 || D == 256, "HEAD_DIM must be 64, 128 or 256");
static_assert(R % 16 == 0 && MT <= 2 && MT * D <= 256,
              "BLOCK_M: 16 or 32 rows, BLOCK_M/16 * HEAD_DIM at most 256");
static_assert(BN % (16 * NW) == 0, "BLOCK_N must be a multiple of 16*NUM_WARPS");
static_assert(NS >= 1, "STAGES must be >= 1");
static_assert(WINDOW < 0 || IS_CAUSAL, "a sliding window (WINDOW >= 0) needs IS_CAUSAL");
static_assert(NUM_SPLITS >= 1, "NUM_SPLITS must be >= 1");
// the fused combine's weights (R x NUM_SPLITS) and 1/Σ (R) in the ring's shared memory
static_assert(4 * R * (NUM_SPLITS + 1) <= 2 * (R + 2 * NS * BN) * D,
              "the combine's weights must fit the K/V ring (fewer splits or a deeper ring)");

// A K/V cache chunk's 16-byte cp.async with its L2 hints: KV_PREFETCH (64, 128, 256: the bytes
// an L2 miss fetches from DRAM; 0: none given) and KV_EVICT_FIRST (1: the lines, read once, go
// first when the L2 evicts).
#if KV_PREFETCH == 0
#define DEC_KV_PF ""
#elif KV_PREFETCH == 64
#define DEC_KV_PF ".L2::64B"
#elif KV_PREFETCH == 128
#define DEC_KV_PF ".L2::128B"
#elif KV_PREFETCH == 256
#define DEC_KV_PF ".L2::256B"
#else
#error "KV_PREFETCH must be 0, 64, 128 or 256"
#endif
__device__ __forceinline__ void kv_cp_async_16(u32 s_addr, const void* g, bool pred) {
    const int n = pred ? 16 : 0;
#if KV_EVICT_FIRST
    unsigned long long pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    asm volatile("cp.async.cg.shared.global.L2::cache_hint" DEC_KV_PF " [%0], [%1], 16, %2, %3;\n"
                 :: "r"(s_addr), "l"(g), "r"(n), "l"(pol) : "memory");
#else
    asm volatile("cp.async.cg.shared.global" DEC_KV_PF " [%0], [%1], 16, %2;\n"
                 :: "r"(s_addr), "l"(g), "r"(n) : "memory");
#endif
}

// ROWS rows of D elements from g into a swizzled tile; rows >= nvalid zero-filled (cp.async
// with src-size 0 reads nothing, so their addresses are never dereferenced); KV: a K/V tile
// (the cache's hints), else Q's rows.
template <int ROWS, bool KV = true>
__device__ __forceinline__ void load_rows(u32 s_addr, const elem_t* __restrict__ g, int nvalid,
                                          int tid) {
#pragma unroll
    for (int idx = tid; idx < ROWS * DCH; idx += THREADS) {
        const int r = idx / DCH, ch = idx % DCH;
        const u32 dst = s_addr + 2u * (u32)swz<DCH>(r, ch);
        if constexpr (KV)
            kv_cp_async_16(dst, g + (size_t)r * D + ch * 8, r < nvalid);
        else
            cp_async_16(dst, g + (size_t)r * D + ch * 8, r < nvalid);
    }
}

// A paged cache's loads (PAGE_AHEAD): thread tid moves 16-byte chunk tid % DCH of rows
// tid / DCH + i * RSTEP of a tile (i < RPT, the same rows as load_rows). The block-table entries
// of a tile are read a tile ahead, right after the previous tile's K loads issued, into `pg`, so
// no load waits on a table read: `rows_of` turns them into cache rows when the tile's K issues,
// and its V (issued next: the ring goes K_t, V_t, K_t+1, ...) reuses them.
constexpr int RSTEP = THREADS / DCH;        // rows apart a thread's chunks are
constexpr int RPT = BN * DCH / THREADS;     // rows of a tile a thread loads
static_assert(THREADS % DCH == 0 && (BN * DCH) % THREADS == 0, "a thread's chunks: one column");

struct PagedRows {
    int pg[RPT];   // table entries of the next tile (loads in flight until rows_of)
    int row[RPT];  // cache rows ((page * PAGE_SIZE + t % PAGE_SIZE) * KVH + kvh) of the tile
    // the table entries of the tile whose first key is key0 (keys past the last one read the
    // last key's entry: their loads are zero-filled, never dereferenced)
    __device__ __forceinline__ void fetch(const int* __restrict__ bt, int key0, int nk, int tid) {
#pragma unroll
        for (int i = 0; i < RPT; ++i) {
            const int t = min(key0 + tid / DCH + i * RSTEP, nk - 1);
            pg[i] = __ldg(bt + t / max(PAGE_SIZE, 1));
        }
    }
    __device__ __forceinline__ void rows_of(int key0, int nk, int kvh, int KVH, int tid) {
#pragma unroll
        for (int i = 0; i < RPT; ++i) {
            const int t = min(key0 + tid / DCH + i * RSTEP, nk - 1);
            row[i] = (pg[i] * PAGE_SIZE + t % max(PAGE_SIZE, 1)) * KVH + kvh;
        }
    }
    __device__ __forceinline__ void load(u32 s_addr, const elem_t* __restrict__ cache, int nvalid,
                                         int tid) const {
        const int ch = tid % DCH;
#pragma unroll
        for (int i = 0; i < RPT; ++i) {
            const int r = tid / DCH + i * RSTEP;
            kv_cp_async_16(s_addr + 2u * (u32)swz<DCH>(r, ch), cache + (size_t)row[i] * D + ch * 8,
                           r < nvalid);
        }
    }
};

// The earlier gather (PAGE_AHEAD=0, kept for the A/B of experiments/decode/pages_probe.py):
// each row reads its table entry when its load issues (an L1 hit after the first), so every
// tile's loads wait for a table read.
template <int ROWS>
__device__ __forceinline__ void load_rows_paged(u32 s_addr, const elem_t* __restrict__ cache,
                                                const int* __restrict__ bt, int key0, int nvalid,
                                                int kvh, int KVH, int tid) {
    static_assert(PAGE_SIZE > 0, "a paged cache needs PAGE_SIZE > 0");
#pragma unroll
    for (int idx = tid; idx < ROWS * DCH; idx += THREADS) {
        const int r = idx / DCH, ch = idx % DCH;
        const bool ok = r < nvalid;
        const int t = key0 + (ok ? r : 0);
        const int page = __ldg(bt + t / PAGE_SIZE);
        const elem_t* src = cache + (((size_t)page * PAGE_SIZE + t % PAGE_SIZE) * KVH + kvh) * D + ch * 8;
        kv_cp_async_16(s_addr + 2u * (u32)swz<DCH>(r, ch), src, ok);
    }
}

__device__ __forceinline__ u32 chunk_off(u32 lane_key, int kk) {
    return (((u32)(2 * kk)) ^ lane_key) << 4;
}

}  // namespace dec

__device__ __forceinline__ void combine_last(const float* __restrict__ Opart,
                                             const float* __restrict__ LSEpart,
                                             int* __restrict__ Counter, elem_t* __restrict__ O,
                                             float* __restrict__ LSE, size_t q_row0, int M, int tid);

// The loop of both entries; PAGED: K, V are the paged caches and bt the block table.
template <bool PAGED>
__device__ __forceinline__ void decode_body(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                                            const elem_t* __restrict__ V, const int* __restrict__ BT,
                                            elem_t* __restrict__ O, float* __restrict__ LSE,
                                            float* __restrict__ Opart, float* __restrict__ LSEpart,
                                            int* __restrict__ Counter, int Nq, int Nk, int H,
                                            int KVH, float scale) {
    using namespace dec;
    extern __shared__ __align__(128) elem_t smem[];
    elem_t* sQ = smem;              // R x D
    elem_t* sK = sQ + R * D;        // NS x BN x D
    elem_t* sV = sK + NS * BN * D;  // NS x BN x D

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int split = blockIdx.x, b = blockIdx.z;
    const int group = H / KVH, chunks = group / HEADS_PER_CTA;
    const int kvh = blockIdx.y / chunks;
    const int h0 = kvh * group + (blockIdx.y % chunks) * HEADS_PER_CTA;
    const int M = HEADS_PER_CTA * Nq;  // packed rows in use (the Plan keeps M <= R)
    if (M > R) __trap();

    // this split's key tiles [j0, j0 + n)
    const int t0 = WINDOW >= 0 ? max(0, Nk - Nq - WINDOW) / BN : 0;
    const int t1 = (Nk + BN - 1) / BN;
    const int per = (t1 - t0 + NUM_SPLITS - 1) / NUM_SPLITS;
    const int j0 = t0 + split * per;
    const int n = max(0, min(t1, j0 + per) - j0);
    const int kv0 = j0 * BN;
    const int nk_left = Nk - kv0;
    const size_t q_row0 = ((size_t)b * H + h0) * (size_t)Nq;  // the CTA's first packed row
    // tile jt of the split (keys kv0 + jt*BN ...) of K or V into shared memory
    const elem_t* Kg = K + (PAGED ? 0 : (((size_t)b * KVH + kvh) * (size_t)Nk + (size_t)kv0) * D);
    const elem_t* Vg = V + (PAGED ? 0 : (((size_t)b * KVH + kvh) * (size_t)Nk + (size_t)kv0) * D);
    const int* bt = PAGED ? BT + (size_t)b * ((Nk + PAGE_SIZE - 1) / max(PAGE_SIZE, 1)) : nullptr;
    auto load_kv = [&](u32 s_addr, const elem_t* base, int jt) {
        if constexpr (PAGED)
            load_rows_paged<BN>(s_addr, base, bt, kv0 + jt * BN, nk_left - jt * BN, kvh, KVH, tid);
        else
            load_rows<BN>(s_addr, base + (size_t)jt * BN * D, nk_left - jt * BN, tid);
    };
    // K_jt and V_jt of the ring (issued in turn: K_t, V_t, K_t+1, ...); a paged cache's with the
    // table read a tile ahead (PAGE_AHEAD)
    [[maybe_unused]] PagedRows pr;
    auto load_k = [&](u32 s_addr, int jt) {
        if constexpr (PAGED && PAGE_AHEAD) {
            pr.rows_of(kv0 + jt * BN, Nk, kvh, KVH, tid);
            pr.load(s_addr, K, nk_left - jt * BN, tid);
            if (jt + 1 < n) pr.fetch(bt, kv0 + (jt + 1) * BN, Nk, tid);
        } else {
            load_kv(s_addr, Kg, jt);
        }
    };
    auto load_v = [&](u32 s_addr, int jt) {
        if constexpr (PAGED && PAGE_AHEAD)
            pr.load(s_addr, V, nk_left - jt * BN, tid);
        else
            load_kv(s_addr, Vg, jt);
    };

    // ---- prologue: Q + K0 | V0 | K1 | ... | V_{NS-2} | K_{NS-1}
    if constexpr (PAGED && PAGE_AHEAD) {
        if (n > 0) pr.fetch(bt, kv0, Nk, tid);
    }
    load_rows<R, false>(smem_u32(sQ), Q + q_row0 * D, M, tid);
    if (n > 0) load_k(smem_u32(sK), 0);
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < NS - 1; ++s) {
        if (s < n) load_v(smem_u32(sV + s * BN * D), s);
        cp_async_commit();
        if (s + 1 < n) load_k(smem_u32(sK + (s + 1) * BN * D), s + 1);
        cp_async_commit();
    }

    const float sl2 = scale * IOSIM_LOG2E;
    float o[MT][NT_O][4];
    float m_i[MT][2], l_i[MT][2];
    int pos[MT][2];  // each row's diagonal: Nk - Nq + query index (padding rows: the last)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < NT_O; ++nt)
#pragma unroll
            for (int r = 0; r < 4; ++r) o[mt][nt][r] = 0.f;
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            m_i[mt][hr] = IOSIM_NEG_INF;
            l_i[mt][hr] = 0.f;
            const int row = mt * 16 + (lane >> 2) + hr * 8;
            pos[mt][hr] = Nk - Nq + (row < M ? row % Nq : Nq - 1);
        }
    }

    const int qrow = lane & 15;
    const u32 qkey = (u32)((lane >> 4) ^ (lane & 7));
    const int krow = (lane & 7) + ((lane >> 4) << 3);
    const u32 kkey = (u32)(((lane >> 3) & 1) ^ (lane & 7));
    const u32 sQ_a = smem_u32(sQ) + (u32)(qrow * D * 2);
    const u32 sK_a = smem_u32(sK) + (u32)((warp * KW + krow) * D * 2);
    const u32 sV_a = smem_u32(sV) + (u32)((warp * KW + qrow) * D * 2);

    auto issue_k = [&](int jk) {
        if (jk < n) load_k(smem_u32(sK + (jk % NS) * BN * D), jk);
        cp_async_commit();
    };

    for (int j = 0; j < n; ++j) {
        const int stage = j % NS;
        const int n0 = kv0 + j * BN;
        cp_async_wait<PENDING>();
        __syncthreads();
        {
            const int jv = j + NS - 1;
            if (jv < n) load_v(smem_u32(sV + (jv % NS) * BN * D), jv);
            cp_async_commit();
        }

        // ---- S = Q K_w^T: this warp's KW keys of the tile, all R rows
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
            for (int nn = 0; nn < KW / 16; ++nn) {
                u32 bk[4];
                ldmatrix_x4(bk, kst + chunk_off(kkey, kk) + (u32)(nn * 16 * D * 2));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_m16n8k16(s[mt][2 * nn], a[mt], bk);
                    mma_m16n8k16(s[mt][2 * nn + 1], a[mt], bk + 2);
                }
            }
        }

        // ---- mask: the ragged end of K, the first row's diagonal, the last row's window edge
        const bool need_mask = (n0 + BN > Nk) || (IS_CAUSAL && n0 + BN - 1 > Nk - Nq)
                               || (WINDOW >= 0 && n0 < Nk - 1 - WINDOW);
        if (need_mask) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        const int col = n0 + warp * KW + nt * 8 + 2 * (lane & 3) + (r & 1);
                        const int p = pos[mt][r >> 1];
                        if (col >= Nk || (IS_CAUSAL && col > p) || (WINDOW >= 0 && col < p - WINDOW))
                            s[mt][nt][r] = IOSIM_NEG_INF;
                    }
        }

        // ---- online softmax of this warp's keys (log2 domain), rescale its O
        online_softmax(s, m_i, l_i, o, sl2);
        u32 pa[MT][KS_O][4];
        pack_p(s, pa);

        // ---- V_j landed; every warp is done with K_j
        cp_async_wait<PENDING>();
        __syncthreads();
        if (NS == 1) issue_k(j + NS);

        // ---- O += P V_w
        const u32 vst = sV_a + (u32)(stage * BN * D * 2);
#pragma unroll
        for (int kk = 0; kk < KS_O; ++kk) {
#pragma unroll
            for (int dn = 0; dn < D / 16; ++dn) {
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
    __syncthreads();  // the ring is free: reused for the warps' partial results

    // ---- merge the warps: each stores its unnormalised O, m (log2) and l in fp32
    float* sO = reinterpret_cast<float*>(smem);  // NW x R x D
    float* sM = sO + NW * R * D;                 // NW x R
    float* sL = sM + NW * R;                     // NW x R
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int row = mt * 16 + (lane >> 2) + hr * 8;
            const float l = quad_sum(l_i[mt][hr]);
            if ((lane & 3) == 0) {
                sM[warp * R + row] = m_i[mt][hr];
                sL[warp * R + row] = l;
            }
#pragma unroll
            for (int nt = 0; nt < NT_O; ++nt)
                *reinterpret_cast<float2*>(sO + (warp * R + row) * D + nt * 8 + 2 * (lane & 3)) =
                    make_float2(o[mt][nt][2 * hr], o[mt][nt][2 * hr + 1]);
        }
    __syncthreads();
    // per row (thread r): the warps' weights 2^(m_w - m*) into sM, 1/Σ weight·l into sL[0..R)
    float lse_r = 0.f;
    if (tid < R) {
        float top = IOSIM_NEG_INF;
#pragma unroll
        for (int w = 0; w < NW; ++w) top = fmaxf(top, sM[w * R + tid]);
        const float use = top == IOSIM_NEG_INF ? 0.f : top;
        float tot = 0.f;
#pragma unroll
        for (int w = 0; w < NW; ++w) {
            const float wt = fast_exp2(sM[w * R + tid] - use);
            sM[w * R + tid] = wt;
            tot = fmaf(wt, sL[w * R + tid], tot);
        }
        lse_r = tot > 0.f ? use * IOSIM_LN2 + __logf(tot) : IOSIM_NEG_INF;
        sL[tid] = tot > 0.f ? 1.f / tot : 0.f;  // each thread reads and rewrites its own row only
    }
    __syncthreads();
    if (tid < M) {
        if (NUM_SPLITS == 1)
            LSE[q_row0 + tid] = lse_r;
        else
            LSEpart[(q_row0 + tid) * NUM_SPLITS + split] = lse_r;
    }
    // O rows: 8 columns a thread a pass
    for (int idx = tid; idx < M * DCH; idx += THREADS) {
        const int r = idx / DCH, c8 = (idx % DCH) * 8;
        float acc[8];
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[c] = 0.f;
#pragma unroll
        for (int w = 0; w < NW; ++w) {
            const float wt = sM[w * R + r];
            const float4 x0 = *reinterpret_cast<const float4*>(sO + (w * R + r) * D + c8);
            const float4 x1 = *reinterpret_cast<const float4*>(sO + (w * R + r) * D + c8 + 4);
            acc[0] = fmaf(wt, x0.x, acc[0]); acc[1] = fmaf(wt, x0.y, acc[1]);
            acc[2] = fmaf(wt, x0.z, acc[2]); acc[3] = fmaf(wt, x0.w, acc[3]);
            acc[4] = fmaf(wt, x1.x, acc[4]); acc[5] = fmaf(wt, x1.y, acc[5]);
            acc[6] = fmaf(wt, x1.z, acc[6]); acc[7] = fmaf(wt, x1.w, acc[7]);
        }
        const float inv = sL[r];
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[c] *= inv;
        if (NUM_SPLITS == 1) {
            uint4 v;
            v.x = pack2_elem(acc[0], acc[1]); v.y = pack2_elem(acc[2], acc[3]);
            v.z = pack2_elem(acc[4], acc[5]); v.w = pack2_elem(acc[6], acc[7]);
            *reinterpret_cast<uint4*>(O + (q_row0 + r) * D + c8) = v;
        } else {
            float* dst = Opart + ((q_row0 + r) * NUM_SPLITS + split) * D + c8;
            *reinterpret_cast<float4*>(dst) = make_float4(acc[0], acc[1], acc[2], acc[3]);
            *reinterpret_cast<float4*>(dst + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
        }
    }
    if constexpr (NUM_SPLITS > 1) combine_last(Opart, LSEpart, Counter, O, LSE, q_row0, M, tid);
}

// ---- the combine, fused: the CTA of a (batch, head chunk) that finishes last merges the
// splits' partials of its rows (a second kernel would cost a launch and its tail; Flash-
// Decoding's and FlashInfer's merge do the same work). Each CTA makes its partial visible
// (fence), then counts itself in Counter[b][blockIdx.y]; the one that counts NUM_SPLITS resets
// the count (left zero for the next launch) and reads the partials through L2 (ld.cg: another
// SM wrote them). LSE = log Σ_s e^LSE_s, O = Σ_s e^(LSE_s - LSE) O_s.
__device__ __forceinline__ void combine_last(const float* __restrict__ Opart,
                                             const float* __restrict__ LSEpart,
                                             int* __restrict__ Counter, elem_t* __restrict__ O,
                                             float* __restrict__ LSE, size_t q_row0, int M,
                                             int tid) {
    using namespace dec;
    extern __shared__ __align__(128) elem_t smem[];
    __shared__ int last;
    __threadfence();  // this thread's partial stores, before the count below
    __syncthreads();
    if (tid == 0) {
        int* c = Counter + (size_t)blockIdx.z * gridDim.y + blockIdx.y;
        last = atomicAdd(c, 1) == NUM_SPLITS - 1;
        if (last) atomicExch(c, 0);
    }
    __syncthreads();
    if (!last) return;
    __threadfence();  // the other CTAs' partials, counted before ours, are visible from here
    float* sW = reinterpret_cast<float*>(smem);  // M x NUM_SPLITS weights, then M 1/Σ
    float* sInv = sW + R * NUM_SPLITS;
    if (tid < M) {
        const float* lp = LSEpart + (q_row0 + tid) * NUM_SPLITS;
        float top = IOSIM_NEG_INF;
        for (int s = 0; s < NUM_SPLITS; ++s) top = fmaxf(top, __ldcg(lp + s));
        const float use = top == IOSIM_NEG_INF ? 0.f : top;
        float tot = 0.f;
        for (int s = 0; s < NUM_SPLITS; ++s) {
            const float wt = __expf(__ldcg(lp + s) - use);
            sW[tid * NUM_SPLITS + s] = wt;
            tot += wt;
        }
        sInv[tid] = tot > 0.f ? 1.f / tot : 0.f;
        LSE[q_row0 + tid] = tot > 0.f ? use + __logf(tot) : IOSIM_NEG_INF;
    }
    __syncthreads();
    for (int idx = tid; idx < M * DCH; idx += THREADS) {  // 8 columns of a row a thread a pass
        const int r = idx / DCH, c8 = (idx % DCH) * 8;
        const float* op = Opart + (q_row0 + r) * NUM_SPLITS * D + c8;
        float acc[8];
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[c] = 0.f;
        for (int s = 0; s < NUM_SPLITS; ++s) {
            const float wt = sW[r * NUM_SPLITS + s];
            const float4 x0 = __ldcg(reinterpret_cast<const float4*>(op + s * D));
            const float4 x1 = __ldcg(reinterpret_cast<const float4*>(op + s * D + 4));
            acc[0] = fmaf(wt, x0.x, acc[0]); acc[1] = fmaf(wt, x0.y, acc[1]);
            acc[2] = fmaf(wt, x0.z, acc[2]); acc[3] = fmaf(wt, x0.w, acc[3]);
            acc[4] = fmaf(wt, x1.x, acc[4]); acc[5] = fmaf(wt, x1.y, acc[5]);
            acc[6] = fmaf(wt, x1.z, acc[6]); acc[7] = fmaf(wt, x1.w, acc[7]);
        }
        const float inv = sInv[r];
        uint4 v;
        v.x = pack2_elem(acc[0] * inv, acc[1] * inv); v.y = pack2_elem(acc[2] * inv, acc[3] * inv);
        v.z = pack2_elem(acc[4] * inv, acc[5] * inv); v.w = pack2_elem(acc[6] * inv, acc[7] * inv);
        *reinterpret_cast<uint4*>(O + (q_row0 + r) * D + c8) = v;
    }
}
#endif  // DECODE_FWD || DECODE_PAGED_FWD

#if defined(DECODE_FWD)
extern "C" __global__ void __launch_bounds__(dec::THREADS, 1)
decode_fwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
           const elem_t* __restrict__ V, elem_t* __restrict__ O, float* __restrict__ LSE,
           float* __restrict__ Opart, float* __restrict__ LSEpart, int* __restrict__ Counter,
           int Nq, int Nk, int H, int KVH, float scale) {
    decode_body<false>(Q, K, V, nullptr, O, LSE, Opart, LSEpart, Counter, Nq, Nk, H, KVH, scale);
}
#endif  // DECODE_FWD

#if defined(DECODE_PAGED_FWD)
extern "C" __global__ void __launch_bounds__(dec::THREADS, 1)
decode_paged_fwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ Kc,
                 const elem_t* __restrict__ Vc, const int* __restrict__ BlockTable,
                 elem_t* __restrict__ O, float* __restrict__ LSE, float* __restrict__ Opart,
                 float* __restrict__ LSEpart, int* __restrict__ Counter, int Nq, int Nk, int H,
                 int KVH, float scale) {
    decode_body<true>(Q, Kc, Vc, BlockTable, O, LSE, Opart, LSEpart, Counter, Nq, Nk, H, KVH,
                      scale);
}
#endif  // DECODE_PAGED_FWD
