// fa3.cu -- FlashAttention-3 forward on Hopper (Shah et al. 2024, "FlashAttention-3", Algorithm 1:
// warp-specialised producer/consumer with TMA and wgmma), sm_90a only.
//
// Entry: fa3_fwd(tmQ, tmK, tmV, O, LSE, Nq, Nk, H, KVH, scale)      (docs/kernel-contract.md)
//   (FP8_E4M3=1: fa3_fwd_fp8(tmQ8, tmK8, tmVt8, O, LSE, Nq, Nk, H, KVH, scale, Qs, Ks, Vs, B),
//   see below; B, the batch, is read by PERSISTENT only.)
//   tmQ / tmK / tmV: CUtensorMaps (iosim/gpu/tma.py) of Q (B,H,Nq,d) and K, V (B,KVH,Nk,d) seen
//   as 3-D tensors (d, N, B*heads), boxes of 64 columns x BLOCK_M (Q) or BLOCK_N (K, V) rows x 1,
//   128-byte swizzle; O (B,H,Nq,d) elem_t; LSE (B,H,Nq) fp32 = m + log(l), natural log. Head h
//   reads K/V head h / (H/KVH) (GQA). Causal: query row i sees keys j <= i (top-left aligned),
//   or j <= i + Nk - Nq with CAUSAL_BOTTOM_RIGHT=1; a row that sees no key gets O = 0, LSE = -inf.
// Grid (ceil(Nq/BLOCK_M), H, B), query tiles in reverse order (the longest causal CTAs first)
//   (PERSISTENT, FP8 non-causal: (G, 1, 1), below),
// (BLOCK_M/64 + 1) * 128 threads, dynamic shared memory: Q, STAGES K tiles, STAGES V tiles and
//   1024 bytes to align them to the swizzle period (the byte count: iosim/kernels.py
//   SPECS["fa3_fwd"].smem).
//
// Tile parameters (-D defines from the Plan, iosim/schedules/fa3.py): HEAD_DIM (64/128/256),
//   BLOCK_M (64 query rows per consumer warpgroup), BLOCK_N (key rows per tile; a multiple of
//   16, at most 256), NUM_WARPS (consumer warps = BLOCK_M/16), STAGES (K/V ring depth),
//   PINGPONG (0/1; 1 needs two consumer warpgroups), IS_CAUSAL, CAUSAL_BOTTOM_RIGHT,
//   FP8_E4M3 (0/1), ELEM_BF16=1 or ELEM_FP16=1 (the type of O, and of Q, K, V unless FP8_E4M3).
//
// FP8_E4M3=1 (entry fa3_fwd_fp8): Q, K and V are e4m3 (kernels/fp8_quant.cu writes them from
//   bf16) with one descale factor per tile of rows per head: Qs[(b*H + h)*Tq + query tile],
//   Ks, Vs[(b*KVH + kv head)*Tk + key tile], Tq = ceil(Nq/BLOCK_M), Tk = ceil(Nk/BLOCK_N)
//   (per-tensor scaling: every tile the same). Q's factor and K_j's multiply the softmax scale
//   of tile j; V_j's is folded into the online-softmax rescale (O is kept in units of the last
//   V tile's factor: alpha *= s_v(j-1) / s_v(j) before P_j V_j is added, O *= s_v(last) at
//   the end), so P stays in [0, 1] for its e4m3 rounding. The producer reads the factors and
//   puts each stage's beside its tiles in shared memory (the consumers at d = 256 have no
//   register to spare for them). O is bf16. 8-bit
//   wgmma (m64nNk32) takes B K-major only, so V comes transposed, Vt (B,KVH,d,Nk16) with Nk16 =
//   Nk rounded up to 16, and within each 16 keys in the order 0 1 8 9 2 3 10 11 4 5 12 13 6 7
//   14 15: then the fp32 S accumulators of a thread (columns 2q, 2q+1, 8+2q, 9+2q of each 16)
//   are exactly the four e4m3 values its P register needs (k = 4q..4q+3), no shuffles.
//   Its tensor map has boxes of VT_KEYS keys x d rows: 128 (128-byte swizzle), or 64 / 32 (64- /
//   32-byte swizzle) where BLOCK_N is a multiple of 32 but not of 128 (192, 224). Q8 and K8 rows are 128-byte panels at d = 128 and 256; at d = 64 a row is 64 bytes
//   and its tiles use TMA's 64-byte swizzle and 64-byte-swizzle descriptors (SW below). O is
//   stored from registers.
//
// What it adds over fa2.cu:
//   * Warp specialisation: warpgroup 0 is the producer: one thread issues TMA copies
//     (cp.async.bulk.tensor) of Q once and of K_j, V_j into a STAGES-deep ring, each completing
//     on a "full" mbarrier with its byte count; consumers free a slot by arriving on its "empty"
//     mbarrier. setmaxnreg hands the producer's registers to the consumers.
//   * Consumer warpgroups of 64 query rows each run S = Q K_j^T with wgmma m64nBLOCK_Nk16 (Q and
//     K from shared memory through descriptors) and O += P V_j with wgmma m64nHEAD_DIMk16 (P from
//     registers: the S accumulators are in the mma.sync layout per warp, so fa2's online softmax
//     and its P packing port unchanged; V from shared memory as it lies, MN-major).
//   * Intra-warpgroup overlap (FA3 Sec. 3.2): S_j = Q K_j^T is issued together with
//     O += P_{j-1} V_{j-1}, and the softmax of S_j runs while the latter may still be on the
//     tensor cores (two wgmma commit groups; O is rescaled just before its GEMM is issued).
//     FA3's FP8 orders (O rescaled after the P V wait, K/V waited for by the first warpgroup
//     only) measured slower here: experiments/fp8/speed15/README.md (fa3.cu at 4b5851f).
//   * Ping-pong (FA3 Sec. 3.1, PINGPONG=1): named barriers give the two consumer warpgroups
//     turns at issuing their GEMMs, so one's softmax runs under the other's GEMMs.
//   * Shared tiles are 64-column panels of 128-byte rows, 16-byte chunks XOR-swizzled by
//     (row & 7): what TMA's 128B swizzle writes and what the wgmma descriptors read.
//   Not here: TMA store of O (O is staged through shared memory and stored 16 bytes a thread),
//   a persistent grid for bf16/fp16 or causal attention.
//
// Causal: key tiles past the query tile's last row are neither loaded nor computed; tiles that
// cross the diagonal or the ragged Nk edge are masked. WINDOW (-1: none; W >= 0, needs
// IS_CAUSAL): a sliding window, row i sees keys i + diag - W <= j <= i + diag; key tiles before
// the first row's window are skipped, tiles crossing the last row's lower edge are masked. Ragged Nq/Nk: TMA zero-fills rows past
// the end of a head; O rows >= Nq are not stored.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "fa3.cu needs -arch=sm_90a (wgmma, setmaxnreg); it does not run on other GPUs"
#endif

#include "common.cuh"
#include "hopper.cuh"
#include "wgmma.cuh"

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
#ifndef PINGPONG
#error "PINGPONG must be defined"
#endif
#ifndef FP8_E4M3
#error "FP8_E4M3 must be defined"
#endif
#ifndef WINDOW
#error "WINDOW must be defined (-1: no sliding window)"
#endif
// LAZY_RESCALE=1 (FP8 only; 0 when not defined; the Plan sets it at d = 256, where it measured
//   faster: experiments/fp8/h100/speed12): the running max m moves only when a row's new max
//   passes it by more than LAZY_THR (log2 units), so P <= 2^LAZY_THR (e4m3 holds up to 448) and
//   in most trips O is left alone (a warp-uniform skip); V_j's factor enters P as 2^lr
//   (lr = log2(s_v(j) / s_v max) <= 0, folded into the exponent's offset), so O stays in units
//   of the largest V factor of the CTA's tiles, and the row sum takes P's own values back
//   (ir = 2^-lr).
#ifndef LAZY_RESCALE
#define LAZY_RESCALE 0
#endif
#if LAZY_RESCALE && !FP8_E4M3
#error "LAZY_RESCALE is fa3_fwd_fp8's (FP8_E4M3=1)"
#endif
// PERSISTENT=1 (FP8 non-causal only; 0 when not defined): grid (G, 1, 1), G = the SMs'
//   resident CTAs at most; CTA x runs tiles x, x + G, ... of the one-tile grid's order (query
//   tile fastest, reversed; then head, then batch: the B argument gives the count). The
//   producer's thread 0 loads a tile's Q once the consumers' last S GEMM of the tile before
//   has read Q (an "empty" mbarrier) and continues the K/V ring across tiles, so the next
//   tile's loads run under this one's last softmax, P V and epilogue (O is stored from
//   registers); its warp 1 writes each stage's descale factors (and scans the tile's V factors
//   for the lazy rescale, while Q's copy is under way) and arrives on the stage's full barrier
//   too (count 2): one thread doing both spills at 24 registers. A body of its own (below):
//   PERSISTENT=0 compiles to the session-12 kernel's SASS, instruction for instruction.
//   Measured (experiments/fp8/h100/speed13): faster at d = 256 (N = 4096, 8192), slower at
//   d = 64 and 128; the Plan takes it at d = 256 (iosim/schedules/fa3.py FP8_PERSISTENT).
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
// PV_WAIT_TOP=1 (FP8 only; 0 when not defined): the wait for P_{j-1} V_{j-1} (and V_{j-1}'s
//   release and P_j's packing) at the top of the next trip instead of after the softmax of S_j.
//   Both orders are the same in PTX, but ptxas's scheduler puts a wgmma wait first in its basic
//   block as soon as anything after it depends on it (P's packing writes the registers the
//   in-flight P V reads; ptxas also reuses two of them as row-sum temporaries): after the
//   softmax, that hoists the wait to the softmax's top (its block starts after the mask's
//   branch), so the softmax never ran under the P V GEMM (FA3 Sec. 3.2's overlap lost:
//   experiments/fp8/speed14c/depbar_check.py counts the exponentials between the P V issue and
//   its wait: 0). At the next trip's top, the loop's back edge keeps the softmax above it (all
//   of them). P is then packed there, from the softmax's fp32 P left in the S registers.
//   Measured (experiments/fp8/h100/speed14c/c1): faster at d = 128 in every round, slower at
//   d = 64 and 256; the Plan takes it at d = 128 (iosim/schedules/fa3.py FP8_PV_WAIT_TOP).
#ifndef PV_WAIT_TOP
#define PV_WAIT_TOP 0
#endif
#if PV_WAIT_TOP && !FP8_E4M3
#error "PV_WAIT_TOP is fa3_fwd_fp8's (FP8_E4M3=1)"
#endif
#if PERSISTENT && !FP8_E4M3
#error "PERSISTENT is fa3_fwd_fp8's (FP8_E4M3=1: its epilogue leaves Q's shared memory alone)"
#endif
#if PERSISTENT && IS_CAUSAL
#error "PERSISTENT is non-causal only (tiles of unequal length, handed out round-robin, would leave SMs idle; and its factor warp spills there)"
#endif
#if defined(HEAD_DIM_PAD) && HEAD_DIM_PAD != HEAD_DIM
#error "fa3.cu keeps rows unpadded: HEAD_DIM_PAD must equal HEAD_DIM (64, 128 or 256)"
#endif

namespace fa3 {

constexpr bool defined_bf16_out() {
#if defined(ELEM_BF16)
    return true;
#else
    return false;
#endif
}

constexpr int D = HEAD_DIM;
constexpr int BM = BLOCK_M;
constexpr int BN = BLOCK_N;
constexpr int NS = STAGES;
constexpr int NC = BM / 64;  // consumer warpgroups
constexpr int THREADS = 128 * (NC + 1);
constexpr int EB = FP8_E4M3 ? 1 : 2;  // bytes per element of Q, K, V
// Q and K rows are stored in panels SW bytes wide, swizzled over that span: 128 bytes, or 64
// where a whole row is 64 bytes (e4m3 at d = 64: TMA's 64-byte swizzle, sw_desc<64>)
constexpr int SW = D * EB < 128 ? D * EB : 128;
constexpr int PANEL = SW / EB;        // elements per panel row
constexpr int KSTEP = 32 / EB;        // k of one wgmma: 32 bytes of each operand row
constexpr int KPP = SW / 32;          // wgmma k steps per panel row
constexpr int PANELS = D / PANEL;     // panels per Q / K row
constexpr int Q_PANEL = BM * SW;      // bytes of one Q panel
constexpr int KV_PANEL = BN * SW;     // bytes of one K panel (and V panel unless FP8)
#if FP8_E4M3
// keys per Vt panel row: 128 (128-byte swizzle), or 64 / 32 (64- / 32-byte swizzle) where
// BLOCK_N is no multiple of 128 (e.g. 192, 224)
constexpr int VT_KEYS = BN % 128 == 0 ? 128 : BN % 64 == 0 ? 64 : 32;
constexpr int VT_PANEL = D * VT_KEYS;  // bytes of one Vt panel (d rows of VT_KEYS keys)
#endif
constexpr int Q_BYTES = PANELS * Q_PANEL;
constexpr int KV_BYTES = BN * D * EB;  // one K (or V) stage
constexpr int NT_S = BN / 8;  // n8 column tiles of S per thread (4 floats each)
constexpr int NT_O = D / 8;

static_assert(BM % 64 == 0 && NC >= 1 && NC <= 3, "BLOCK_M must be 64, 128 or 192");
static_assert(NUM_WARPS == 4 * NC, "NUM_WARPS must be BLOCK_M/16 (one warpgroup per 64 rows)");
// The model's K_j/V_j readers (iosim/kernels.py SPECS["fa3_fwd"].kv_readers): every consumer
// warpgroup's wgmma reads all of them.
#ifdef MODEL_KV_READERS
static_assert(MODEL_KV_READERS == NC, "iosim/kernels.py kv_readers: one read per consumer warpgroup");
#endif
static_assert(D % 64 == 0 && D <= 256, "HEAD_DIM must be 64, 128 or 256");
static_assert(BN % 16 == 0 && BN <= 256, "BLOCK_N must be a multiple of 16, at most 256");
static_assert(!FP8_E4M3 || BN % 32 == 0, "FP8: BLOCK_N must be a multiple of 32 (Vt panels)");
static_assert(!FP8_E4M3 || defined_bf16_out(), "FP8: O is bf16 (compile with ELEM_BF16=1)");
static_assert(NS >= 1, "STAGES must be >= 1");
static_assert(FP8_E4M3 || SW == 128, "16-bit rows are 128-byte panels (the epilogue stages O in them)");
static_assert(WINDOW < 0 || IS_CAUSAL, "a sliding window (WINDOW >= 0) needs IS_CAUSAL");

// Registers per thread after setmaxnreg: the producer keeps a few, the consumers share the rest
// of the CTA's allocation at launch.
// setmaxnreg moves registers within that allocation (what ptxas gives a thread under
// __launch_bounds__(THREADS, 1), at most 64K / THREADS rounded down to 8, times THREADS:
// 168 x 384 with two consumers, not the whole 64K file): an increase that the decreases do not
// pay for waits forever (a producer at 32 with two consumers at 240 hung the kernel:
// experiments/fp8/h100/speed10/round2_hang).
constexpr int LAUNCH_REGS = (65536 / THREADS > 255 ? 255 : 65536 / THREADS) / 8 * 8;
constexpr int PRODUCER_REGS = NC == 3 ? 32 : 24;
constexpr int CONSUMER_REGS_RAW = (((NC + 1) * LAUNCH_REGS - PRODUCER_REGS) / NC) / 8 * 8;
constexpr int CONSUMER_REGS = CONSUMER_REGS_RAW > 240 ? 240 : CONSUMER_REGS_RAW;
static_assert(PRODUCER_REGS + NC * CONSUMER_REGS <= (NC + 1) * LAUNCH_REGS,
              "setmaxnreg: the consumers' increase exceeds what the producer's decrease frees");

// Barrier slots in static shared memory.
enum { BAR_Q = 0, BAR_FULL_K = 1, BAR_FULL_V = 1 + NS, BAR_EMPTY_K = 1 + 2 * NS,
       BAR_EMPTY_V = 1 + 3 * NS, BAR_EMPTY_Q = 1 + 4 * NS, N_BARS = 1 + 4 * NS + PERSISTENT };
// Named barriers (0 is __syncthreads): one per consumer warpgroup for its epilogue, and, with
// PINGPONG, one per warpgroup that it waits on before issuing its GEMMs.
constexpr int NB_EPILOGUE = 1;           // + consumer index
constexpr int NB_TURN = NB_EPILOGUE + 3;  // + consumer index
static_assert(!PINGPONG || NC == 2, "PINGPONG takes two consumer warpgroups (BLOCK_M = 128)");

// Ping-pong (FA3 Sec. 3.1): warpgroup c issues its GEMMs only on its turn and then hands the
// turn to the other, so one warpgroup's softmax runs while the other's GEMMs hold the tensor
// cores. 256 threads per barrier: the 128 that wait and the 128 that arrive.
__device__ __forceinline__ void turn_wait(int c) {
    if (PINGPONG) named_bar_sync(NB_TURN + c, 256);
}
__device__ __forceinline__ void turn_pass(int c) {
    if (PINGPONG) asm volatile("bar.arrive %0, 256;\n" ::"r"(NB_TURN + (c ^ 1)) : "memory");
}

// The wgmma of the input type: m64nNk16 (bf16/fp16) or m64nNk32 (e4m3).
template <bool F8, int N>
struct MmaOf {
    using type = Wgmma<N>;
};
template <int N>
struct MmaOf<true, N> {
    using type = Wgmma8<N>;
};
template <int N>
using Mma = typename MmaOf<FP8_E4M3 != 0, N>::type;
constexpr int KP = BN / KSTEP;  // k steps of P V (registers of P: KP x 4)

// Issue S = Q K^T for one K stage (64 x BN per warpgroup; each k step walks 32 bytes within an
// SW-byte panel row, then the next panel). Fences first: the softmax rewrote `s`.
__device__ __forceinline__ void issue_qk(float (&s)[NT_S * 4], u32 q_rows, u32 k_tile) {
    fence_regs<NT_S * 4>(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / KSTEP; ++kk) {
        const u32 off = (u32)((kk % KPP) * 32);
        const u64 da = sw_desc<SW>(q_rows + (u32)((kk / KPP) * Q_PANEL) + off, 16);
        const u64 db = sw_desc<SW>(k_tile + (u32)((kk / KPP) * KV_PANEL) + off, 16);
        Mma<BN>::ss(s, da, db, kk > 0);
    }
    wgmma_commit();
}

// Issue O += P V for one V stage. bf16/fp16: V rows are the k dimension (16 rows = 2048 bytes
// per step), its columns the n dimension, panels BN*128 bytes apart (the descriptor's LBO).
// FP8: Vt rows are the n dimension (d), keys the k dimension: K-major like K in Q K^T.
__device__ __forceinline__ void issue_pv(float (&o)[NT_O * 4], const u32 (&pa)[KP][4],
                                         u32 v_tile) {
    fence_regs<NT_O * 4>(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KP; ++kk) {
#if FP8_E4M3
        constexpr int SPP = VT_KEYS / 32;  // k steps per Vt panel row
        const u64 db = sw_desc<VT_KEYS>(v_tile + (u32)((kk / SPP) * VT_PANEL + (kk % SPP) * 32), 16);
#else
        const u64 db = sw128_desc(v_tile + (u32)(kk * 16 * 128), KV_PANEL);
#endif
        Mma<D>::rs(o, pa[kk], db, 1);
    }
    wgmma_commit();
}

// Mask (tiles crossing the diagonal or the ragged Nk edge only), then the online softmax in
// the log2 domain: s becomes P (unnormalised), m and l are updated, alpha = exp2(m_old - m_new)
// is what O must be scaled by before P V is added. LAZY_RESCALE (above): lr, ir of V_j.
// Every exp2 on the MUFU: part of them as an f16x2 polynomial off it measured slower
// (experiments/fp8/speed15h/README.md, fa3.cu at 40e79ec).
#if LAZY_RESCALE
constexpr float LAZY_THR = 8.f;
#endif
__device__ __forceinline__ void softmax(float (&s)[NT_S * 4], float (&m)[2], float (&l)[2],
                                        float (&alpha)[2], int n0, int r0, int lane, int Nk,
                                        bool need_mask, int diag, float sl2, float lr = 0.f,
                                        float ir = 1.f) {
    if (need_mask) {
#pragma unroll
        for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int col = n0 + nt * 8 + 2 * (lane & 3) + (r & 1);
                const int row = r0 + (r >> 1) * 8;
                if (col >= Nk || (IS_CAUSAL && col > row + diag)
                    || (WINDOW >= 0 && col < row + diag - WINDOW))
                    s[nt * 4 + r] = IOSIM_NEG_INF;
            }
    }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        float mx = IOSIM_NEG_INF;
#pragma unroll
        for (int nt = 0; nt < NT_S; ++nt)
            mx = fmaxf(mx, fmaxf(s[nt * 4 + 2 * hr], s[nt * 4 + 2 * hr + 1]));
        mx = quad_max(mx);
#if LAZY_RESCALE
        const float m_new = mx * sl2 > m[hr] + LAZY_THR ? mx * sl2 : m[hr];
        const float m_use = (m_new == IOSIM_NEG_INF) ? 0.f : m_new;
        alpha[hr] = m_new == m[hr] ? 1.f : fast_exp2(m[hr] - m_use);
        const float off = m_use - lr;
#else
        const float m_new = fmaxf(m[hr], mx * sl2);
        const float m_use = (m_new == IOSIM_NEG_INF) ? 0.f : m_new;
        alpha[hr] = fast_exp2(m[hr] - m_use);
        const float off = m_use;
#endif
        m[hr] = m_new;
        float rs = 0.f;
#pragma unroll
        for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float pv = fast_exp2(fmaf(s[nt * 4 + 2 * hr + e], sl2, -off));
                s[nt * 4 + 2 * hr + e] = pv;
                rs += pv;
            }
        l[hr] = l[hr] * alpha[hr] + (LAZY_RESCALE ? rs * ir : rs);
    }
}

__device__ __forceinline__ void rescale(float (&o)[NT_O * 4], const float (&alpha)[2]) {
#if LAZY_RESCALE
    // a warp's rows all kept their max: nothing to do (the branch is warp-uniform)
    if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#endif
#pragma unroll
    for (int nt = 0; nt < NT_O; ++nt)
#pragma unroll
        for (int r = 0; r < 4; ++r) o[nt * 4 + r] *= alpha[r >> 1];
}

// P in the wgmma A-register layout. bf16/fp16 (per warp the mma.sync m16n8k16 A fragment): the
// S accumulators of n8 tiles 2kk and 2kk+1 make k16 step kk. FP8 (m16n8k32 layout: register i
// holds k = 4q..4q+3 of row r (i = 0), r+8 (1), k + 16 (2, 3)): n8 tiles 4kk..4kk+3 make k32
// step kk, columns 2q, 2q+1, 8+2q, 9+2q of each 16 in k order (Vt's keys are permuted to match).
__device__ __forceinline__ void pack_p(const float (&s)[NT_S * 4], u32 (&pa)[KP][4]) {
#pragma unroll
    for (int kk = 0; kk < KP; ++kk) {
#if FP8_E4M3
        const float* b = s + 16 * kk;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int c = 8 * (i >> 1) + 2 * (i & 1);  // tile pair (i >> 1), row half (i & 1)
            pa[kk][i] = pack4_e4m3(b[c], b[c + 1], b[c + 4], b[c + 5]);
        }
#else
#pragma unroll
        for (int i = 0; i < 4; ++i) pa[kk][i] = pack2_elem(s[8 * kk + 2 * i], s[8 * kk + 2 * i + 1]);
#endif
    }
}

}  // namespace fa3
#if defined(FP8_E4M3) && FP8_E4M3
extern "C" __global__ void __launch_bounds__(fa3::THREADS, 1)
fa3_fwd_fp8(const __grid_constant__ TmaDesc tmQ, const __grid_constant__ TmaDesc tmK,
            const __grid_constant__ TmaDesc tmV, elem_t* __restrict__ O, float* __restrict__ LSE,
            int Nq, int Nk, int H, int KVH, float scale, const float* __restrict__ Qs,
            const float* __restrict__ Ks, const float* __restrict__ Vs, int B) {
#else
extern "C" __global__ void __launch_bounds__(fa3::THREADS, 1)
fa3_fwd(const __grid_constant__ TmaDesc tmQ, const __grid_constant__ TmaDesc tmK,
        const __grid_constant__ TmaDesc tmV, elem_t* __restrict__ O, float* __restrict__ LSE,
        int Nq, int Nk, int H, int KVH, float scale) {
#endif
#if PERSISTENT
    // ================================================================ the persistent grid
    using namespace fa3;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ __align__(8) u64 bars[N_BARS];
    // per stage: scale * log2(e) * Q's factor * K_j's (K stage), V_{j-1}'s factor / V_j's and
    // the units of O after P_j V_j: V_j's factor (LAZY_RESCALE: the tile's largest) (V stage);
    // written by the producer's factor warp before its arrival on the stage's full barrier
    __shared__ float fac_sl2[NS], fac_vr[NS], fac_v[NS];
    // LAZY_RESCALE: per K stage (written with fac_sl2) log2(s_v(j) / s_v max) and its inverse
    // power
#if LAZY_RESCALE
    __shared__ float fac_lr[NS], fac_ir[NS];
#endif

    // Tiles start at the first 1024-byte boundary (the swizzle pattern repeats every 8 rows
    // of 128 bytes; descriptors and TMA agree on it only from such a boundary).
    const u32 base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const u32 sQ = base;
    const u32 sK = sQ + Q_BYTES;
    const u32 sV = sK + NS * KV_BYTES;
    const u32 bar0 = smem_u32(bars);
    auto bar = [&](int i) { return bar0 + 8u * (u32)i; };

    // The CTA's tiles: linear index t over (query tile, head, batch), query tile fastest and
    // reversed (t = 0 is a head's last query tile), as the one-tile grid's CTAs; grid (G, 1, 1),
    // CTA x takes t = x, x + G, ... (computed in each role, after setmaxnreg: values live across
    // it cost the producer spills)
    struct Sched {
        int tq, n_tiles, t_first;
    };
    // the step, the grid size, read where it is added (volatile: a value kept in a register
    // across the producer's loops is one that its 24 registers spill)
    auto grid_step = [&](const Sched&) {
        u32 n;
        asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(n));
        return (int)n;
    };
    auto sched = [&]() {
        const int tq = (Nq + BM - 1) / BM;
        return Sched{tq, tq * H * B, (int)blockIdx.x};
    };
    const int diag = CAUSAL_BOTTOM_RIGHT ? Nk - Nq : 0;  // row i sees keys j <= i + diag
    // a tile's query block, head, batch and key tiles: trip t runs key tile n_first + t (tiles
    // before the first row's sliding window are skipped); stages and phases count trips, over
    // the CTA's tiles
    struct TileOf {
        int m_block, h, b, m0, n_first, n_last, n_blocks, kv0;
    };
    auto tile_of = [&](int t, int tq) {
        TileOf r;
        r.m_block = tq - 1 - t % tq;
        r.h = (t / tq) % H;
        r.b = t / (tq * H);
        r.m0 = r.m_block * BM;
        int n_end = Nk;
        if (IS_CAUSAL) n_end = max(0, min(Nk, r.m0 + BM + diag));
        r.n_last = (n_end + BN - 1) / BN;
        r.n_first = WINDOW >= 0 ? min(max(0, r.m0 + diag - WINDOW) / BN, r.n_last) : 0;
        r.n_blocks = r.n_last - r.n_first;
        r.kv0 = r.n_first * BN;
        return r;
    };

    const int wg = threadIdx.x / 128;  // 0: producer, 1..NC: consumers

    if (threadIdx.x == 0) {
        mbar_init(bar(BAR_Q), 1);
        mbar_init(bar(BAR_EMPTY_Q), 4 * NC);  // one arrival per consumer warp
        for (int s = 0; s < NS; ++s) {
            mbar_init(bar(BAR_FULL_K + s), 2);  // the copies' bytes and the factors' warp
            mbar_init(bar(BAR_FULL_V + s), 2);
            mbar_init(bar(BAR_EMPTY_K + s), 4 * NC);  // one arrival per consumer warp
            mbar_init(bar(BAR_EMPTY_V + s), 4 * NC);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {
        // ------------------------------------------------------------ producer: thread 0
        // issues the copies; warp 1 writes each stage's descale factors and arrives on its
        // full barriers too (two programs of a few registers each: the producer keeps 24)
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            const Sched S = sched();
            tma_prefetch(&tmQ);
            tma_prefetch(&tmK);
            tma_prefetch(&tmV);
            int g = 0;  // trips issued over the CTA's tiles (ring stage and phase)
            int it = 0;  // tiles issued
#pragma unroll 1
            for (int t = S.t_first; t < S.n_tiles; t += grid_step(S), ++it) {
                const TileOf T = tile_of(t, S.tq);
                const int kv_head = T.b * KVH + T.h / (H / KVH);
                // Q of this tile once the consumers' last S GEMM of the one before has read it
                mbar_wait(bar(BAR_EMPTY_Q), ((u32)it & 1u) ^ 1u);
                mbar_expect_tx(bar(BAR_Q), Q_BYTES);
#pragma unroll
                for (int p = 0; p < PANELS; ++p)
                    tma_load_3d(sQ + p * Q_PANEL, &tmQ, bar(BAR_Q), PANEL * p, T.m0, T.b * H + T.h);
#pragma unroll 1
                for (int j = T.n_first; j < T.n_last; ++j, ++g) {
                    const int s = g % NS;
                    const u32 ph = (u32)(g / NS) & 1u;
                    mbar_wait(bar(BAR_EMPTY_K + s), ph ^ 1u);
                    mbar_expect_tx(bar(BAR_FULL_K + s), KV_BYTES);
#pragma unroll
                    for (int p = 0; p < PANELS; ++p)
                        tma_load_3d(sK + s * KV_BYTES + p * KV_PANEL, &tmK, bar(BAR_FULL_K + s),
                                    PANEL * p, j * BN, kv_head);
                    mbar_wait(bar(BAR_EMPTY_V + s), ph ^ 1u);
                    mbar_expect_tx(bar(BAR_FULL_V + s), KV_BYTES);
#pragma unroll
                    for (int p = 0; p < BN / VT_KEYS; ++p)  // Vt: VT_KEYS keys x d rows a panel
                        tma_load_3d(sV + s * KV_BYTES + p * VT_PANEL, &tmV, bar(BAR_FULL_V + s),
                                    j * BN + VT_KEYS * p, 0, kv_head);
                }
            }
        }
        if (threadIdx.x / 32 == 1) {
            const int lane = threadIdx.x % 32;
            const Sched S = sched();
            int g = 0;  // trips over the CTA's tiles, mod 2 NS (ring stage and phase)
#pragma unroll 1
            for (int t = S.t_first; t < S.n_tiles; t += grid_step(S)) {
                const TileOf T = tile_of(t, S.tq);
                // the K/V head's factors: K_j's and V_j's at kv_off + j
                const int kv_off = (T.b * KVH + T.h / (H / KVH)) * ((Nk + BN - 1) / BN);
                const float sl2_q = scale * IOSIM_LOG2E * Qs[(size_t)(T.b * H + T.h) * S.tq + T.m_block];
#if LAZY_RESCALE
                // the largest V factor of the tile's keys
                float vmax = 0.f;
#pragma unroll 1
                for (int j = T.n_first + lane; j < T.n_last; j += 32) vmax = fmaxf(vmax, Vs[kv_off + j]);
                vmax = warp_max(vmax);
#endif
                if (lane == 0) {
                    const int k0 = kv_off + T.n_first;  // the tile's first key tile's factors
                    float sv_prev = 0.f;
#pragma unroll 1
                    for (int i = 0; i < T.n_blocks; ++i, ++g) {
                        const int s = g % NS;
                        const u32 ph = (u32)(g / NS) & 1u;
                        const float sv = Vs[k0 + i];
                        mbar_wait(bar(BAR_EMPTY_K + s), ph ^ 1u);
                        fac_sl2[s] = sl2_q * Ks[k0 + i];
#if LAZY_RESCALE
                        fac_lr[s] = __log2f(sv / vmax);
                        fac_ir[s] = vmax / sv;
#endif
                        mbar_arrive(bar(BAR_FULL_K + s));
                        mbar_wait(bar(BAR_EMPTY_V + s), ph ^ 1u);
#if LAZY_RESCALE
                        fac_v[s] = vmax;  // the units O is in after P_j V_j
#else
                        fac_v[s] = sv;
#endif
                        fac_vr[s] = i > 0 ? sv_prev / sv : 1.f;
                        sv_prev = sv;
                        mbar_arrive(bar(BAR_FULL_V + s));
                    }
                }
                g %= 2 * NS;
                __syncwarp();
            }
        }
        return;
    }

    // ---------------------------------------------------------------- consumers
    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;               // consumer index: query rows m0 + 64c ...
    const int tid = threadIdx.x % 128;  // thread in the warpgroup
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const u32 q_rows = sQ + (u32)(c * 64 * SW);  // this warpgroup's 64 rows in each Q panel

    float o[NT_O * 4];
    float m_i[2], l_i[2];
    float alpha[2];
    float sacc[NT_S * 4];
    u32 pa[KP][4];
    // What comes with K_j's stage (read after its full barrier, before the stage is released):
    // the softmax scale; LAZY_RESCALE: V_j's lr and ir
    struct KFac {
        float sl2, lr, ir;
    };
    auto kfac_of = [&](int slot) {
        KFac f{fac_sl2[slot], 0.f, 1.f};
#if LAZY_RESCALE
        f.lr = fac_lr[slot];
        f.ir = fac_ir[slot];
#endif
        return f;
    };
    // O from V_{j-1}'s units to V_j's (V_j's stage, after its full barrier), which the producer
    // put beside the tile (no register kept here); LAZY_RESCALE: O stays in the largest's units
    auto v_units = [&](int slot) {
        if (LAZY_RESCALE) return;
        alpha[0] *= fac_vr[slot];
        alpha[1] *= fac_vr[slot];
    };
    auto release = [&](int slot) {  // this warp is done with a K, V or Q stage
        __syncwarp();
        if (lane == 0) mbar_arrive(bar(slot));
    };
    // PV_WAIT_TOP, at trip j's top (j = n_blocks: before the last P V): P_{j-2} V_{j-2} done
    // (none in flight at j = 1), its V stage `sv` freed, P_{j-1} packed (predicated, no branch:
    // a branch ahead of the wait lets ptxas hoist it again)
    auto pv_top = [&](int j, int sv) {
        wgmma_wait<0>();
        fence_regs<NT_O * 4>(o);
        __syncwarp();
        if (lane == 0 && j > 1) mbar_arrive(bar(BAR_EMPTY_V + sv));
        pack_p(sacc, pa);
    };

    const Sched S = sched();
    // trips consumed before this tile modulo 2 NS (ring stage and phase: g0 + j) and the
    // tile count's parity (Q's phase, fac_vmax's slot), in one register (the consumers at
    // d = 256 have none to spare)
    int pos = 0;
#pragma unroll 1
    for (int t = S.t_first; t < S.n_tiles; t += grid_step(S)) {
        const int g0 = pos % (2 * NS), it = pos / (2 * NS);
        const TileOf T = tile_of(t, S.tq);
        const int m0 = T.m0, n_blocks = T.n_blocks, kv0 = T.kv0;
        // Rows of this thread's accumulators: r0 and r0 + 8 (the mma.sync m16n8 layout per warp).
        const int r0 = m0 + c * 64 + warp * 16 + (lane >> 2);
        auto need_mask = [&](int n0) {
            return (n0 + BN > Nk) || (IS_CAUSAL && n0 + BN - 1 > m0 + diag)
                   || (WINDOW >= 0 && n0 < m0 + BM - 1 + diag - WINDOW);
        };
#pragma unroll
        for (int i = 0; i < NT_O * 4; ++i) o[i] = 0.f;
        m_i[0] = m_i[1] = IOSIM_NEG_INF;
        l_i[0] = l_i[1] = 0.f;
        float sv_last = 1.f;  // the units O is kept in: read before its V stage is freed

        mbar_wait(bar(BAR_Q), (u32)it & 1u);
        if (n_blocks == 0) release(BAR_EMPTY_Q);
        if (n_blocks > 0) {
            // Intra-warpgroup overlap (FA3 Sec. 3.2): S_j = Q K_j^T is issued together with
            // O += P_{j-1} V_{j-1}; the softmax of S_j runs while P_{j-1} V_{j-1} may still be on
            // the tensor cores. First warpgroup's turn first: the second hands it over.
            if (c == 1) turn_pass(c);
            turn_wait(c);
            const int s0 = g0 % NS;
            mbar_wait(bar(BAR_FULL_K + s0), (u32)(g0 / NS) & 1u);
            KFac kf = kfac_of(s0);
            issue_qk(sacc, q_rows, sK + (u32)(s0 * KV_BYTES));
            turn_pass(c);
            wgmma_wait<0>();
            fence_regs<NT_S * 4>(sacc);
            release(BAR_EMPTY_K + s0);
            if (n_blocks == 1) release(BAR_EMPTY_Q);  // the tile's last Q read
            softmax(sacc, m_i, l_i, alpha, kv0, r0, lane, Nk, need_mask(kv0), diag, kf.sl2, kf.lr,
                    kf.ir);
            if (!PV_WAIT_TOP) pack_p(sacc, pa);

            for (int j = 1; j < n_blocks; ++j) {
                const int g = g0 + j;
                const int s = g % NS, sp = (g - 1) % NS;
                if (PV_WAIT_TOP) pv_top(j, (g - 2) % NS);
                turn_wait(c);
                mbar_wait(bar(BAR_FULL_K + s), (u32)(g / NS) & 1u);
                kf = kfac_of(s);
                issue_qk(sacc, q_rows, sK + (u32)(s * KV_BYTES));
                mbar_wait(bar(BAR_FULL_V + sp), (u32)((g - 1) / NS) & 1u);
                v_units(sp);  // O from V_{j-2}'s units to V_{j-1}'s
                rescale(o, alpha);
                issue_pv(o, pa, sV + (u32)(sp * KV_BYTES));
                turn_pass(c);
                wgmma_wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run
                fence_regs<NT_S * 4>(sacc);
                release(BAR_EMPTY_K + s);
                if (j == n_blocks - 1) release(BAR_EMPTY_Q);
                softmax(sacc, m_i, l_i, alpha, kv0 + j * BN, r0, lane, Nk, need_mask(kv0 + j * BN),
                        diag, kf.sl2, kf.lr, kf.ir);
                if (PV_WAIT_TOP) continue;
                wgmma_wait<0>();
                fence_regs<NT_O * 4>(o);
                release(BAR_EMPTY_V + sp);
                pack_p(sacc, pa);
            }

            const int g = g0 + n_blocks - 1, s = g % NS;
            if (PV_WAIT_TOP) pv_top(n_blocks, (g - 1) % NS);
            mbar_wait(bar(BAR_FULL_V + s), (u32)(g / NS) & 1u);
            v_units(s);
            rescale(o, alpha);
            turn_wait(c);
            issue_pv(o, pa, sV + (u32)(s * KV_BYTES));
            if (c == 0) turn_pass(c);  // the second warpgroup's last turn is never waited for
            // O is in units of the last V tile's factor (LAZY_RESCALE: of the largest of the
            // tile), which comes with its stage (refilled once released)
            sv_last = fac_v[s];
            wgmma_wait<0>();
            fence_regs<NT_O * 4>(o);
            release(BAR_EMPTY_V + s);
        }
        pos = (g0 + n_blocks) % (2 * NS) + 2 * NS * (it ^ 1);

        const size_t q_base = ((size_t)T.b * H + T.h) * (size_t)Nq;
        // ---- epilogue: O = acc * sv_last / l, stored from registers; LSE = m*ln2 + log(l)
        elem_t* Og = O + q_base * D;
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const float l = quad_sum(l_i[hr]);
            const float inv = l > 0.f ? __frcp_rn(l) * sv_last : 0.f;  // (a division spills at d = 256)
            const int row = r0 + hr * 8;
            if (row >= Nq) continue;
            if ((lane & 3) == 0)
                LSE[q_base + row] = l > 0.f ? (m_i[hr] * IOSIM_LN2 + __logf(l)) : IOSIM_NEG_INF;
#pragma unroll
            for (int nt = 0; nt < NT_O; ++nt)
                *reinterpret_cast<u32*>(Og + (size_t)row * D + nt * 8 + 2 * (lane & 3)) =
                    pack2_elem(o[nt * 4 + 2 * hr] * inv, o[nt * 4 + 2 * hr + 1] * inv);
        }
    }
#else
    // ================================================================ one tile a CTA
    using namespace fa3;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ __align__(8) u64 bars[N_BARS];
#if FP8_E4M3
    // per stage: scale * log2(e) * Q's factor * K_j's (K stage), V_{j-1}'s factor / V_j's and
    // V_j's (V stage); written by the producer before the stage's expect_tx arrival
    __shared__ float fac_sl2[NS], fac_vr[NS], fac_v[NS];
    // LAZY_RESCALE: per K stage (written with fac_sl2) log2(s_v(j) / s_v max) and its inverse
    // power, and the largest V factor of the CTA's tiles
#if LAZY_RESCALE
    __shared__ float fac_lr[NS], fac_ir[NS];
    __shared__ float fac_vmax;
#endif
#endif

    // Tiles start at the first 1024-byte boundary (the swizzle pattern repeats every 8 rows
    // of 128 bytes; descriptors and TMA agree on it only from such a boundary).
    const u32 base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const u32 sQ = base;
    const u32 sK = sQ + Q_BYTES;
    const u32 sV = sK + NS * KV_BYTES;
    const u32 bar0 = smem_u32(bars);
    auto bar = [&](int i) { return bar0 + 8u * (u32)i; };

    const int m_block = gridDim.x - 1 - blockIdx.x;
    const int h = blockIdx.y;
    const int b = blockIdx.z;
    const int m0 = m_block * BM;
    const int diag = CAUSAL_BOTTOM_RIGHT ? Nk - Nq : 0;  // row i sees keys j <= i + diag
    int n_end = Nk;
    if (IS_CAUSAL) n_end = max(0, min(Nk, m0 + BM + diag));
    const int n_last = (n_end + BN - 1) / BN;
    // sliding window: loop trip t runs key tile n_first + t (tiles before the first row's window
    // are skipped); stages and phases count trips
    const int n_first = WINDOW >= 0 ? min(max(0, m0 + diag - WINDOW) / BN, n_last) : 0;
    const int n_blocks = n_last - n_first;
    const int kv0 = n_first * BN;

    const int wg = threadIdx.x / 128;  // 0: producer, 1..NC: consumers

    if (threadIdx.x == 0) {
        mbar_init(bar(BAR_Q), 1);
        for (int s = 0; s < NS; ++s) {
            mbar_init(bar(BAR_FULL_K + s), 1);
            mbar_init(bar(BAR_FULL_V + s), 1);
            mbar_init(bar(BAR_EMPTY_K + s), 4 * NC);  // one arrival per consumer warp
            mbar_init(bar(BAR_EMPTY_V + s), 4 * NC);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {
        // ------------------------------------------------------------ producer
        setmaxnreg_dec<PRODUCER_REGS>();
#if FP8_E4M3 && LAZY_RESCALE
        float vmax = 0.f;  // the largest V factor of the tiles this CTA visits (warp 0)
        if (threadIdx.x < 32) {
            const float* vf = Vs + (size_t)(b * KVH + h / (H / KVH)) * ((Nk + BN - 1) / BN);
            for (int j = n_first + (int)threadIdx.x; j < n_last; j += 32) vmax = fmaxf(vmax, vf[j]);
            vmax = warp_max(vmax);
            if (threadIdx.x == 0) fac_vmax = vmax;
        }
#endif
        if (threadIdx.x == 0) {
            tma_prefetch(&tmQ);
            tma_prefetch(&tmK);
            tma_prefetch(&tmV);
            const int q_head = b * H + h;
            const int kv_head = b * KVH + h / (H / KVH);
#if FP8_E4M3
            const float sl2_q = scale * IOSIM_LOG2E * Qs[(size_t)(b * H + h) * gridDim.x + m_block];
            const float* kf = Ks + (size_t)kv_head * ((Nk + BN - 1) / BN);
            const float* vf = Vs + (size_t)kv_head * ((Nk + BN - 1) / BN);
#endif
            mbar_expect_tx(bar(BAR_Q), Q_BYTES);
#pragma unroll
            for (int p = 0; p < PANELS; ++p)
                tma_load_3d(sQ + p * Q_PANEL, &tmQ, bar(BAR_Q), PANEL * p, m0, q_head);
            for (int t = 0; t < n_blocks; ++t) {
                const int s = t % NS, j = n_first + t;
                const u32 ph = (u32)(t / NS) & 1u;
                mbar_wait(bar(BAR_EMPTY_K + s), ph ^ 1u);
#if FP8_E4M3
                fac_sl2[s] = sl2_q * kf[j];
#if LAZY_RESCALE
                fac_lr[s] = __log2f(vf[j] / vmax);
                fac_ir[s] = vmax / vf[j];
#endif
#endif
                mbar_expect_tx(bar(BAR_FULL_K + s), KV_BYTES);
#pragma unroll
                for (int p = 0; p < PANELS; ++p)
                    tma_load_3d(sK + s * KV_BYTES + p * KV_PANEL, &tmK, bar(BAR_FULL_K + s),
                                PANEL * p, j * BN, kv_head);
                mbar_wait(bar(BAR_EMPTY_V + s), ph ^ 1u);
#if FP8_E4M3
                fac_v[s] = vf[j];
                fac_vr[s] = j > 0 ? vf[j - 1] / vf[j] : 1.f;
#endif
                mbar_expect_tx(bar(BAR_FULL_V + s), KV_BYTES);
#if FP8_E4M3
#pragma unroll
                for (int p = 0; p < BN / VT_KEYS; ++p)  // Vt: VT_KEYS keys x d rows a panel
                    tma_load_3d(sV + s * KV_BYTES + p * VT_PANEL, &tmV, bar(BAR_FULL_V + s),
                                j * BN + VT_KEYS * p, 0, kv_head);
#else
#pragma unroll
                for (int p = 0; p < PANELS; ++p)
                    tma_load_3d(sV + s * KV_BYTES + p * KV_PANEL, &tmV, bar(BAR_FULL_V + s), 64 * p,
                                j * BN, kv_head);
#endif
            }
        }
        return;
    }

    // ---------------------------------------------------------------- consumers
    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;               // consumer index: query rows m0 + 64c ...
    const int tid = threadIdx.x % 128;  // thread in the warpgroup
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const u32 q_rows = sQ + (u32)(c * 64 * SW);  // this warpgroup's 64 rows in each Q panel

    float o[NT_O * 4];
#pragma unroll
    for (int i = 0; i < NT_O * 4; ++i) o[i] = 0.f;
    float m_i[2] = {IOSIM_NEG_INF, IOSIM_NEG_INF};
    float l_i[2] = {0.f, 0.f};
    float alpha[2];
    float sacc[NT_S * 4];
    u32 pa[KP][4];
    // What comes with K_j's stage (read after its full barrier, before the stage is released):
    // the softmax scale; LAZY_RESCALE: V_j's lr and ir
    struct KFac {
        float sl2, lr, ir;
    };
#if FP8_E4M3
    auto kfac_of = [&](int slot) {
        KFac f{fac_sl2[slot], 0.f, 1.f};
#if LAZY_RESCALE
        f.lr = fac_lr[slot];
        f.ir = fac_ir[slot];
#endif
        return f;
    };
    // O from V_{j-1}'s units to V_j's (V_j's stage, after its full barrier), which the producer
    // put beside the tile (no register kept here); LAZY_RESCALE: O stays in the largest's units
    auto v_units = [&](int slot) {
        if (LAZY_RESCALE) return;
        alpha[0] *= fac_vr[slot];
        alpha[1] *= fac_vr[slot];
    };
#else
    const float sl2_all = scale * IOSIM_LOG2E;
    auto kfac_of = [&](int) { return KFac{sl2_all, 0.f, 1.f}; };
#endif
    // Rows of this thread's accumulators: r0 and r0 + 8 (the mma.sync m16n8 layout per warp).
    const int r0 = m0 + c * 64 + warp * 16 + (lane >> 2);
    auto need_mask = [&](int n0) {
        return (n0 + BN > Nk) || (IS_CAUSAL && n0 + BN - 1 > m0 + diag)
               || (WINDOW >= 0 && n0 < m0 + BM - 1 + diag - WINDOW);
    };
    auto release = [&](int slot) {  // this warp is done with a K or V stage
        __syncwarp();
        if (lane == 0) mbar_arrive(bar(slot));
    };
    // PV_WAIT_TOP (FP8), at trip j's top (j = n_blocks: before the last P V): P_{j-2} V_{j-2}
    // done (none in flight at j = 1), its V stage `sv` freed, P_{j-1} packed (predicated, no
    // branch: a branch ahead of the wait lets ptxas hoist it again)
    auto pv_top = [&](int j, int sv) {
        wgmma_wait<0>();
        fence_regs<NT_O * 4>(o);
        __syncwarp();
        if (lane == 0 && j > 1) mbar_arrive(bar(BAR_EMPTY_V + sv));
        pack_p(sacc, pa);
    };

    mbar_wait(bar(BAR_Q), 0);
    if (n_blocks > 0) {
        // Intra-warpgroup overlap (FA3 Sec. 3.2): S_j = Q K_j^T is issued together with
        // O += P_{j-1} V_{j-1}; the softmax of S_j runs while P_{j-1} V_{j-1} may still be on
        // the tensor cores. First warpgroup's turn first: the second hands it over.
        if (c == 1) turn_pass(c);
        turn_wait(c);
        mbar_wait(bar(BAR_FULL_K), 0);
        KFac kf = kfac_of(0);
        issue_qk(sacc, q_rows, sK);
        turn_pass(c);
        wgmma_wait<0>();
        fence_regs<NT_S * 4>(sacc);
        release(BAR_EMPTY_K);
        softmax(sacc, m_i, l_i, alpha, kv0, r0, lane, Nk, need_mask(kv0), diag, kf.sl2, kf.lr,
                kf.ir);
        if (!PV_WAIT_TOP) pack_p(sacc, pa);

        for (int j = 1; j < n_blocks; ++j) {
            const int s = j % NS, sp = (j - 1) % NS;
            if (PV_WAIT_TOP) pv_top(j, (j - 2) % NS);
            turn_wait(c);
            mbar_wait(bar(BAR_FULL_K + s), (u32)(j / NS) & 1u);
            kf = kfac_of(s);
            issue_qk(sacc, q_rows, sK + (u32)(s * KV_BYTES));
#if FP8_E4M3
            mbar_wait(bar(BAR_FULL_V + sp), (u32)((j - 1) / NS) & 1u);
            v_units(sp);  // O from V_{j-2}'s units to V_{j-1}'s
            rescale(o, alpha);
#else
            rescale(o, alpha);
            mbar_wait(bar(BAR_FULL_V + sp), (u32)((j - 1) / NS) & 1u);
#endif
            issue_pv(o, pa, sV + (u32)(sp * KV_BYTES));
            turn_pass(c);
            wgmma_wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run
            fence_regs<NT_S * 4>(sacc);
            release(BAR_EMPTY_K + s);
            softmax(sacc, m_i, l_i, alpha, kv0 + j * BN, r0, lane, Nk, need_mask(kv0 + j * BN),
                    diag, kf.sl2, kf.lr, kf.ir);
            if (PV_WAIT_TOP) continue;
            wgmma_wait<0>();
            fence_regs<NT_O * 4>(o);
            release(BAR_EMPTY_V + sp);
            pack_p(sacc, pa);
        }

        const int j = n_blocks - 1, s = j % NS;
        if (PV_WAIT_TOP) pv_top(n_blocks, (j - 1) % NS);
#if FP8_E4M3
        mbar_wait(bar(BAR_FULL_V + s), (u32)(j / NS) & 1u);
        v_units(s);
        rescale(o, alpha);
        turn_wait(c);
#else
        rescale(o, alpha);
        turn_wait(c);
        mbar_wait(bar(BAR_FULL_V + s), (u32)(j / NS) & 1u);
#endif
        issue_pv(o, pa, sV + (u32)(s * KV_BYTES));
        if (c == 0) turn_pass(c);  // the second warpgroup's last turn is never waited for
        wgmma_wait<0>();
        fence_regs<NT_O * 4>(o);
        release(BAR_EMPTY_V + s);
    }

    const size_t q_base = ((size_t)b * H + h) * (size_t)Nq;
#if FP8_E4M3
    // ---- epilogue (FP8): O = acc * s_v(last) / l, stored from registers (its Q rows hold only
    // half of a bf16 O tile); LSE = m*ln2 + log(l).
    {
        elem_t* Og = O + q_base * D;
        // O is in units of the last V tile's factor (its stage is never refilled); LAZY_RESCALE:
        // of the largest
#if LAZY_RESCALE
        const float sv_last = n_blocks > 0 ? fac_vmax : 1.f;
#else
        const float sv_last = n_blocks > 0 ? fac_v[(n_blocks - 1) % NS] : 1.f;
#endif
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const float l = quad_sum(l_i[hr]);
            const float inv = l > 0.f ? __frcp_rn(l) * sv_last : 0.f;  // (a division spills at d = 256)
            const int row = r0 + hr * 8;
            if (row >= Nq) continue;
            if ((lane & 3) == 0)
                LSE[q_base + row] = l > 0.f ? (m_i[hr] * IOSIM_LN2 + __logf(l)) : IOSIM_NEG_INF;
#pragma unroll
            for (int nt = 0; nt < NT_O; ++nt)
                *reinterpret_cast<u32*>(Og + (size_t)row * D + nt * 8 + 2 * (lane & 3)) =
                    pack2_elem(o[nt * 4 + 2 * hr] * inv, o[nt * 4 + 2 * hr + 1] * inv);
        }
        return;
    }
#endif
    // ---- epilogue: O /= l, LSE = m*ln2 + log(l); O staged through this warpgroup's own Q rows
    // (all its wgmmas that read them have completed) for 16-byte row stores.
    named_bar_sync(NB_EPILOGUE + c, 128);
    const int lrow0 = c * 64 + warp * 16 + (lane >> 2);  // row within the CTA's tile
    unsigned char* smem_gen = smem_raw + (sQ - smem_u32(smem_raw));
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        const float l = quad_sum(l_i[hr]);
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int lrow = lrow0 + hr * 8;
        const int row = m0 + lrow;
        if ((lane & 3) == 0 && row < Nq)
            LSE[q_base + row] = l > 0.f ? (m_i[hr] * IOSIM_LN2 + __logf(l)) : IOSIM_NEG_INF;
#pragma unroll
        for (int nt = 0; nt < NT_O; ++nt) {
            const u32 v = pack2_elem(o[nt * 4 + 2 * hr] * inv, o[nt * 4 + 2 * hr + 1] * inv);
            const int off = (nt / 8) * Q_PANEL + lrow * 128 + (((nt % 8) ^ (lrow & 7)) << 4) +
                            4 * (lane & 3);
            *reinterpret_cast<u32*>(smem_gen + off) = v;
        }
    }
    named_bar_sync(NB_EPILOGUE + c, 128);
    elem_t* Og = O + q_base * D;
    constexpr int CH = D / 8;  // 16-byte chunks per row
#pragma unroll
    for (int i = 0; i < 64 * CH / 128; ++i) {
        const int idx = tid + i * 128;
        const int lrow = c * 64 + idx / CH;
        const int ch = idx % CH;
        const int row = m0 + lrow;
        if (row < Nq)
            *reinterpret_cast<uint4*>(Og + (size_t)row * D + ch * 8) = *reinterpret_cast<const uint4*>(
                smem_gen + (ch / 8) * Q_PANEL + lrow * 128 + (((ch % 8) ^ (lrow & 7)) << 4));
    }
#endif
}
