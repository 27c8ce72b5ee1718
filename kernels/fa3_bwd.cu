// fa3_bwd.cu -- FlashAttention-3 backward on Hopper (Shah et al. 2024, "FlashAttention-3",
// Sec. 3 and Appendix B.1: warp-specialised producer/consumer with TMA and wgmma), sm_90a only.
//
// Entry: fa3_bwd(tmQ, tmK, tmV, tmdO, tmdQ, LSE, Dst, dQacc, dK, dV, Nq, Nk, H, KVH, scale)
//   (docs/kernel-contract.md); with DETERMINISTIC=1 fa3_bwd_det(..., scale, dQsem). Around it the Plan runs fa2_bwd.cu's preprocessing kernel
//   (D = rowsum(dO∘O), dQacc = 0) and its conversion (dQ = scale·dQacc); gqa_reduce.cu sums
//   dK, dV over a GQA group.
//   tmQ / tmdO: CUtensorMaps (iosim/gpu/tma.py) of Q, dO (B,H,Nq,d), boxes of 64 columns x
//   BLOCK_M rows; tmK / tmV of K, V (B,KVH,Nk,d), boxes of 64 columns x BLOCK_N rows; 128-byte
//   swizzle. tmdQ: of dQacc, boxes of 32 fp32 columns x 64 rows, 128-byte swizzle (used by
//   DQ_BULK 2 and 3 only). LSE (B,H,Nq) fp32, the forward's natural-log log-sum-exp; Dst (B,H,Nq) fp32;
//   dQacc (B,H,Nq,d) fp32, added into; dK, dV (B,H,Nk,d) elem_t, one slice per QUERY head.
//   Causal: query row i sees keys j <= i (top-left), or j <= i + Nk - Nq with
//   CAUSAL_BOTTOM_RIGHT=1; a row that sees no key (LSE = -inf) contributes nothing.
// Grid (ceil(Nk/BLOCK_N), H, B): one CTA per key block of one query head. (NC + 1) * 128
//   threads, NC = BLOCK_N / 64 consumer warpgroups (HEAD_DIM 256: 2); dynamic shared memory: K,
//   V, the Q / dO ring, three dSᵀ buffers (HEAD_DIM 256: two, and two Pᵀ buffers), two LSE / D
//   buffers per consumer, 1024 bytes of alignment (the byte count: iosim/kernels.py
//   SPECS["fa3_bwd"].smem).
//
// Tile parameters (-D defines from the Plan, iosim/schedules/fa3.py): HEAD_DIM (64, 128, 256),
//   BLOCK_M (query rows per step: 64, or 128 at d = 64), BLOCK_N (64 key rows per consumer
//   warpgroup; HEAD_DIM 256: 64 for both), NUM_WARPS (consumer warps = BLOCK_N / 16; HEAD_DIM
//   256: 8), STAGES (Q/dO ring depth),
//   PINGPONG (0/1: the consumers' turns, two consumers only), IS_CAUSAL, CAUSAL_BOTTOM_RIGHT,
//   DETERMINISTIC (0/1), DQ_BULK (0-3: dQ's reduction, below), ELEM_BF16=1 or ELEM_FP16=1.
//
// Structure (per CTA = key block j):
//   * Warpgroup 0 is the producer (setmaxnreg gives its registers to the consumers): one
//     thread loads K_j and V_j once, then streams Q_i and dO_i (TMA) through a STAGES-deep
//     ring. Each consumer loads LSE_i and D_i a step ahead (registers, a row a thread) and
//     copies LSE_i·log2e and D_i (rows past Nq: +inf and 0, so P = 0
//     there) into its own shared buffer under a named barrier (staged by the
//     producer behind the ring's mbarrier instead, compute-sanitizer racecheck cannot see
//     the ordering).
//   * Consumer warpgroup c owns key rows 64c..64c+63 and, per query block i, computes with
//     wgmma (fp32 accumulators): Sᵀ = K_c Q_iᵀ and dPᵀ = V_c dO_iᵀ (both operands from shared
//     memory); Pᵀ = exp2(Sᵀ·scale·log2e − LSE·log2e) and dSᵀ = Pᵀ∘(dPᵀ − D) in registers (no
//     max, no sum: the forward's LSE); dV_c += Pᵀ dO_i and dK_c += dSᵀ Q_i with Pᵀ and dSᵀ
//     straight from registers (the S accumulator layout is the A-fragment layout of the next
//     product, as in fa3.cu's P V). dV and dK never leave registers until the epilogue.
//   * dQ_i = dS K_j: each consumer stores its dSᵀ rows to shared memory (three buffers, by
//     step), then computes its share of dQ_i over all BN keys in units of 64 queries x 64
//     columns (d = 128: one K panel each; d = 64, BLOCK_M = 128: 64 queries each), both
//     operands MN-major in shared memory (dSᵀ and K as they lie). The sums go to dQacc with vector atomics
//     (red.global.add.v2.f32): the CTAs of all key blocks add into the same dQ_i, so the order
//     of additions varies by run. DQ_BULK=1 (a variant, for the comparison in
//     experiments/fa3_bwd/variants.py; d = 128 only: at d = 64 its staging does not fit beside
//     the three dSᵀ buffers) instead stores each unit to a shared buffer of 64 rows (288-byte
//     stride: conflict-free float2 stores), and 64 of the consumer's threads each issue a
//     256-byte bulk reduce-add of one row (cp.reduce.async.bulk ... .add.f32): the copy engine
//     adds whole rows at L2 instead of 16 vector atomics a thread. DQ_BULK=2 (the Plan's at
//     d = 128 and 256, there staged in the ring slot: below): FlashAttention-3's split of the
//     work (its dQ warp and bulk reduce-add of a staged tile) on this kernel's row-major dQacc. ncu (experiments/fa3_bwd/
//     h100/ncu_source_d128.csv) put the atomics' cost in the consumers: 19% of the stall samples
//     on two instructions that overwrite registers the queued red.global instructions had not yet
//     read (long scoreboard, a write-after-read wait behind a busy L1), the rest of the step
//     waiting behind them. So each consumer stores its unit to its own shared buffer (two
//     32-column boxes, 128-byte swizzled as TMA lays them: conflict-free float2 stores), fences
//     and arrives at NB_DQ_FULL; warp 1 of the producer warpgroup waits there, issues two
//     tensor reduce-adds (cp.reduce.async.bulk.tensor, tmdQ; rows past Nq are outside the map
//     and not written), waits for their reads and arrives at NB_DQ_EMPTY, which the consumer
//     waits at before its next unit (one buffer a consumer: the reads take far less than the
//     step between). The consumers never wait for the memory system; the producer keeps 24
//     registers a thread (its loop not unrolled, so the loader thread does not spill).
//     DQ_BULK=3 (a variant for d = 64, where two staged units do not fit beside the three dSᵀ
//     buffers): one buffer, the consumers' units through it in turn, consumer 0's then 1's
//     each step. Measured faster than the atomics at d = 64 (experiments/fa3_bwd/h100/
//     speed10/run2/run.log) when the buffer went from one consumer to the other through the
//     dQ warp's named barriers only; compute-sanitizer racecheck then reported 16 hazards on
//     the ragged d = 64 case (run2/sanitize.log), the two consumers' stores into the one
//     buffer ordered only through the dQ warp. Now the buffer is handed over through mbarriers
//     (BAR_FREE + c) that both the dQ warp (its read-out done) and the consumer that stored
//     last (its 128 threads) arrive at: racecheck and synccheck clean
//     (experiments/fa3_bwd/h100/dq256/run2/sanitize_dq3_d64.log); not timed since, so not the
//     Plan's yet.
//   * Overlap (FA3 Sec. 3.1-3.2): the two consumers take turns at the tensor cores, two turns a
//     step (A: Sᵀ, dPᵀ; B: dV, dK and the previous step's dQ), so one's exp2, dS stores and
//     atomics run under the other's GEMMs; dQ_i waits a step so that no consumer waits for the
//     other's softmax. The first step's B turn also runs a dQ product on an unused buffer that
//     is never added (a wgmma under a condition made ptxas spill at d = 128): one extra
//     BLOCK_M x BLOCK_N x d product per CTA, which the Plan does not count.
//   * Not causal: the key blocks of a head start at different query blocks (as fa2_bwd.cu), so
//     the CTAs running at once add into different rows of dQacc (not with DETERMINISTIC).
//   * DETERMINISTIC=1 (entry fa3_bwd_det): the key-block CTAs add into each dQ_i in a fixed
//     order, so dQ is the same bits on every run. dQsem (B, H, ceil(Nq/64), 2) int32, zero
//     before the launch and left zero after it: one flag per query block and consumer (a
//     consumer's dQ units are the same columns and rows in every CTA, so the two consumers keep
//     their own orders and never wait for each other). Consumer c of key block n, at query
//     block i, waits until its flag equals its turn, adds, and releases turn + 1 (the last
//     turn: 0 again). The turns run by key block downwards from the highest key block that
//     sees i (n_hi(i) - 1, the causal diagonal's, or the last one) to key block 0, and
//     blockIdx.x runs the key blocks in that order (n = gridDim.x - 1 - blockIdx.x), so a CTA
//     only waits for CTAs launched before it, which are resident or done: with one CTA an SM,
//     waiting CTAs never hold the SMs that the CTA they wait for needs. Causal, the diagonal's
//     key block is also the first to reach i in time (it starts there), so the turns follow
//     the order the CTAs arrive in anyway; not causal, every key block starts at query block 0
//     (no rotation) and each CTA trails the one before it by one hand-over. The flags' reads and
//     writes are counted in the Plan (one of each per consumer and visit; spinning re-reads
//     are not), the waits are not modelled.
// Causal: query blocks that see none of the key block are neither loaded nor computed; blocks
// that cross the diagonal or the ragged Nk edge are masked. Ragged Nq/Nk: TMA zero-fills rows
// past the end of a head; dK/dV rows >= Nk and dQ rows >= Nq are not stored.
// HEAD_DIM 256 (SPLIT_D): dK and dV of 64 keys x 256 would take 256 registers a thread, so the
// two consumers split head_dim instead of the keys (as FlashAttention-3's hopper backward does
// at hdim 256, there with 80 keys a CTA, S = Q Kᵀ split by keys between the warpgroups and dKᵀ,
// dVᵀ, dQᵀ computed transposed, split by head_dim): BLOCK_N = 64 keys a CTA, BLOCK_M = 64,
// a two-stage Q/dO ring (K, V 64 KB + ring 128 KB + two Pᵀ and two dSᵀ buffers 32 KB + stats
// 1 KB + alignment 1 KB = 227 KB, the opt-in limit with the 1 KB of static shared memory).
//   * Each consumer computes Sᵀ and dPᵀ of all 64 keys and ITS HALF of the step's queries (32
//     columns, m64n32 wgmmas: K, V as A, Q_i, dO_i rows 32c.. as B; neither product is
//     computed twice), then Pᵀ and dSᵀ of that half in registers, and stores both halves to
//     shared memory (Pᵀ too: dV needs all 64 queries of it, which no consumer holds alone).
//   * A 256-thread named barrier (NB_XCH): both halves stored. Then consumer c accumulates
//     dV[:, 128c..] += Pᵀ dO_i[:, 128c..] and dK[:, 128c..] += dSᵀ Q_i[:, 128c..] (A = Pᵀ, dSᵀ
//     K-major from shared memory, B MN-major: Wgmma<128>::ss_tb; 128 fp32 registers a thread
//     for the two) and its two 64-column dQ units (columns 128c.., K panels 2c, 2c+1) in the
//     same step (no ping-pong: the barrier already puts the consumers in step, and dQ needs no
//     buffer a step late). The consumers' GEMMs do not overlap their own exp2 and stores.
//   * dQ (DQ_BULK=2, the Plan's; DQ_IN_RING): no shared memory is left for staging, but once
//     consumer c's products of the step are done, the slot's Q and dO panels 2c, 2c+1 are read
//     by no one (the other consumer reads only its own panels after NB_XCH): 32 KB, the two
//     units as four swizzled 32-column boxes. The consumer stores them there, fences, and
//     arrives at the slot's mbarrier BAR_DQ + 2s + c; the dQ warp waits there, issues the four
//     TMA reduce-adds, and after both consumers' units were read it, not the consumers, frees
//     the slot (BAR_EMPTY, one arrival) for the loader. (A named barrier in place of BAR_DQ
//     could count a consumer's next arrival as this step's: the consumers can run a step ahead
//     of the dQ warp; Nsight Compute's replay hung on that version.) DQ_BULK=0: the consumers'
//     vector atomics (the kernel before; 0.71-0.80x cuDNN, experiments/fa3_bwd/h100/dq256/).
//   * Per step each consumer reads all of K_j and V_j (Sᵀ, dPᵀ), its half of Q_i, dO_i (twice:
//     Sᵀ/dPᵀ rows, dK/dV columns) and all of Pᵀ, dSᵀ: the Plan's readers (bwd_readers).
//   * Measured (docs/results.md, blocks measured-fa3-bwd-d256-h100, fa3-bwd-d256-dq-warp): ncu
//     finds L2 the busiest unit with either reduction (88% of its peak): with 64 keys a CTA
//     each step streams Q_i, dO_i and adds dQ_i for half the keys of d = 128's CTAs, twice the
//     L2 bytes per FLOP; the atomics (a request a 32-byte sector) keep the L2 busy 1.5 times as
//     long as the tensor reduce-adds (dq256/ncu_d256_dq0.txt, run2/ncu_d256_dq2.txt). Issuing
//     the next step's Sᵀ, dPᵀ behind this step's products (dQ atomics under them) measured
//     slower (commit eeda3b5, reverted).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "fa3_bwd.cu needs -arch=sm_90a (wgmma, setmaxnreg); it does not run on other GPUs"
#endif

#include "common.cuh"
#include "hopper.cuh"
#include "wgmma.cuh"

#if !defined(HEAD_DIM) || !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(NUM_WARPS) || \
    !defined(STAGES) || !defined(IS_CAUSAL) || !defined(CAUSAL_BOTTOM_RIGHT) || !defined(PINGPONG) || \
    !defined(DETERMINISTIC) || !defined(DQ_BULK)
#error "fa3_bwd needs HEAD_DIM, BLOCK_M, BLOCK_N, NUM_WARPS, STAGES, IS_CAUSAL, CAUSAL_BOTTOM_RIGHT, PINGPONG, DETERMINISTIC, DQ_BULK"
#endif


namespace f3b {

constexpr int D = HEAD_DIM;
constexpr int BM = BLOCK_M;
constexpr int BN = BLOCK_N;
constexpr int NS = STAGES;
// HEAD_DIM 256: the two consumer warpgroups share one block of 64 keys and split head_dim
// (dK, dV: 128 columns each), Sᵀ and dPᵀ (their 64 queries: 32 each), and dQ (two 64-column
// units each); see the header
constexpr bool SPLIT_D = D == 256;
constexpr int NC = SPLIT_D ? 2 : BN / 64;  // consumer warpgroups, 64 key rows each (but SPLIT_D)
constexpr int THREADS = 128 * (NC + 1);
constexpr int PANELS = D / 64;      // 64-column (128-byte) panels of a Q / K / V / dO row
constexpr int Q_PANEL = BM * 128;   // bytes of one Q (or dO) panel
constexpr int KV_PANEL = BN * 128;  // bytes of one K (or V) panel
constexpr int Q_BYTES = BM * D * 2;
constexpr int KV_BYTES = BN * D * 2;
constexpr int DS_BYTES = BN * BM * 2;  // one dSᵀ buffer: BN key rows of BM queries (128 bytes)
constexpr int QN = SPLIT_D ? BM / NC : BM;  // query columns of Sᵀ / dPᵀ a consumer computes
constexpr int DC = SPLIT_D ? D / NC : D;     // columns of dK, dV a consumer accumulates
constexpr int NT_S = QN / 8;  // n8 column tiles of Sᵀ / dPᵀ per thread (4 floats each)
constexpr int NT_D = DC / 8;  // of dK, dV
constexpr int KP = BM / 16;   // k16 steps of dV = Pᵀ dO (and dK)
constexpr int DQ_N = 64;      // columns of dQ per wgmma (one K panel)
// dQ_i in units of 64 queries x 64 columns (one dSᵀ panel x one K panel), shared out over the
// consumers: d = 128, BLOCK_M = 64: a K panel each; d = 64, BLOCK_M = 128: 64 queries each
constexpr int DQ_UNITS = (BM / 64) * PANELS;
constexpr int DQ_PER = DQ_UNITS / NC;  // dQ units per consumer and step
constexpr int DS_PANEL = BN * 128;     // bytes of one 64-query panel of dSᵀ
// dSᵀ buffers (dQ a step late: three; SPLIT_D, dQ in the step: two) and, SPLIT_D, two Pᵀ
// buffers (both consumers' dV read all of Pᵀ, so it goes through shared memory)
constexpr int NDS = SPLIT_D ? 2 : 3;
constexpr int NP = SPLIT_D ? 2 : 0;
constexpr int BULK_ROW = 288;           // DQ_BULK 1: a staged dQ row (256 bytes + 32: no conflicts)
// DQ_BULK 2, 3: the dQ warp's TMA reduce-adds; 3: one staging buffer, the consumers' units
// through it in turn (consumer 0's, then 1's, each step), where two do not fit (d = 64)
constexpr bool DQ_WARP = DQ_BULK >= 2;
constexpr bool DQ_SHARED = DQ_BULK == 3;
// SPLIT_D with the dQ warp: each consumer stages its two units in the step's own Q/dO ring slot
// (the panels only its own dK, dV read), and the dQ warp, not the consumers, frees the slot
constexpr bool DQ_IN_RING = SPLIT_D && DQ_WARP;
constexpr int DQ_BOX = 64 * 32 * 4;     // DQ_WARP: one TMA box of a dQ unit (64 rows x 32 fp32)
constexpr int DQ_STAGE = DQ_IN_RING ? 0 : DQ_WARP ? 2 * DQ_BOX : 64 * BULK_ROW;  // one staged unit
static_assert(DQ_BULK >= 0 && DQ_BULK <= 3,
              "DQ_BULK must be 0 (atomics), 1, 2 or 3 (bulk reduce-adds)");
static_assert(!DQ_BULK || (!DETERMINISTIC && NC == 2 &&
                           (SPLIT_D ? DQ_BULK == 2
                                    : DQ_PER == 1 && (D == 128 || (D == 64 && DQ_SHARED)))),
              "DQ_BULK: not with DETERMINISTIC; one dQ unit a consumer and step at HEAD_DIM 128, "
              "or 64 with DQ_BULK 3 (two staged units do not fit beside the three dS buffers); "
              "HEAD_DIM 256: DQ_BULK 2 only (staged in the ring slot)");
static_assert(!DQ_IN_RING || (DQ_PER == 2 && Q_PANEL == DQ_BOX),
              "DQ_IN_RING: a consumer's two dQ units (four boxes) fill its two Q and two dO panels");

static_assert(BM == 64 || (BM == 128 && D == 64),
              "BLOCK_M must be 64, or 128 at HEAD_DIM 64 (Sᵀ, dPᵀ, dK, dV in registers)");
static_assert(BN % 64 == 0 && NC >= 1 && NC <= 2, "BLOCK_N must be 64 or 128");
static_assert(NUM_WARPS == 4 * NC,
              "NUM_WARPS must be BLOCK_N/16 (one warpgroup per 64 keys; HEAD_DIM 256: 8)");
static_assert(D == 64 || D == 128 || D == 256, "HEAD_DIM must be 64, 128 or 256");
static_assert(!SPLIT_D || (BM == 64 && BN == 64 && !PINGPONG),
              "HEAD_DIM 256: BLOCK_M 64, BLOCK_N 64 (two consumers split head_dim), no ping-pong");
static_assert(DQ_UNITS % NC == 0, "dQ units (BLOCK_M/64 x HEAD_DIM/64) must share out over the consumers");
static_assert(NS >= 1, "STAGES must be >= 1");
// The model's shared-memory readers (iosim/kernels.py SPECS["fa3_bwd"].bwd_readers): every
// consumer reads all of Q_i and dO_i (W1K: the groups splitting the keys; SPLIT_D: each its
// half, once in all), one warpgroup's panels of queries each read their K panel (W3Q), and each
// dQ panel's wgmmas read all of dS.
#ifdef MODEL_W1K
static_assert(MODEL_W1K == (SPLIT_D ? 1 : NC) && MODEL_W3Q == BM / 64 && MODEL_DS_DQ == PANELS,
              "iosim/kernels.py bwd_readers no longer mirrors this kernel");
#endif

constexpr int PRODUCER_REGS = 24;
constexpr int CONSUMER_REGS_RAW = ((512 - PRODUCER_REGS) / NC) / 8 * 8;
constexpr int CONSUMER_REGS = CONSUMER_REGS_RAW > 240 ? 240 : CONSUMER_REGS_RAW;

// DQ_IN_RING: BAR_DQ + NC·s + c, consumer c's dQ units of the step in slot s staged (an mbarrier
// a slot, not a named barrier: a consumer may stage the next step's units before the dQ warp
// has taken this step's, and a named barrier would count both arrivals as one phase)
// DQ_SHARED: BAR_FREE + c, the one staging buffer free for consumer c: the dQ warp's arrival
// once the copy engine read the other consumer's unit and the other consumer's 128 once it
// stored it, so that the two consumers' stores are ordered by a barrier each takes part in
// (through the dQ warp's named barriers alone, compute-sanitizer racecheck reported 16 hazards,
// experiments/fa3_bwd/h100/speed10/run2/sanitize.log)
enum { BAR_KV = 0, BAR_FULL = 1, BAR_EMPTY = 1 + NS, BAR_DQ = 1 + 2 * NS,
       BAR_FREE = BAR_DQ + (DQ_IN_RING ? NC * NS : 0), N_BARS = BAR_FREE + (DQ_SHARED ? NC : 0) };
constexpr int NB_DS = 1;    // one consumer: its warps' dSᵀ stores done before its dQ wgmma
constexpr int NB_TURN = 2;  // + consumer index: its turn at the tensor cores (two consumers)
constexpr int NB_STAT = 4;  // + consumer index: its copy of LSE_i, D_i is in shared memory
constexpr int NB_SEM = 6;   // + consumer index: its threads around its dQ turn (DETERMINISTIC)
constexpr int NB_BULK = 8;  // + consumer index: its dQ staging buffer free / written (DQ_BULK)
constexpr int NB_XCH = 10;  // SPLIT_D: both consumers' Pᵀ, dSᵀ halves stored (256 threads)
// DQ_BULK 2: + consumer index: its staged dQ unit written (full) / read out by the copy engine
// (empty), between the consumer's 128 threads and the dQ warp's 32
constexpr int NB_DQ_FULL = 11;
constexpr int NB_DQ_EMPTY = 13;
constexpr int DQ_BAR_THREADS = 128 + 32;
static_assert(NB_DS < NB_TURN && NB_STAT + 2 <= NB_SEM && NB_SEM + 2 <= NB_BULK &&
                  NB_BULK + 2 <= NB_XCH && NB_XCH < NB_DQ_FULL && NB_DQ_FULL + 2 <= NB_DQ_EMPTY &&
                  NB_DQ_EMPTY + 2 <= 16,
              "named barriers: two a consumer each, 16 a CTA");
static_assert(!PINGPONG || NC == 2, "PINGPONG takes two consumer warpgroups (BLOCK_N = 128)");

// Ping-pong turns as fa3.cu's: 256 threads per barrier, the 128 that wait and the 128 that
// arrive.
__device__ __forceinline__ void turn_wait(int c) {
    if (PINGPONG) named_bar_sync(NB_TURN + c, 256);
}
__device__ __forceinline__ void turn_pass(int c) {
    if (PINGPONG) asm volatile("bar.arrive %0, 256;\n" ::"r"(NB_TURN + (c ^ 1)) : "memory");
}

// DQ_BULK 2: global (tensor map `map`, box at columns c0, rows c1 of head c2) += the box staged
// in shared memory at `src` (fp32, 128-byte swizzle), by the copy engine; rows past the map's
// Nq are not written (the tensor map's bounds)
__device__ __forceinline__ void tma_reduce_add_3d(const TmaDesc* map, u32 src, int c0, int c1, int c2) {
    asm volatile(
        "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
        " [%0, {%1, %2, %3}], [%4];\n" ::"l"(reinterpret_cast<u64>(map)),
        "r"(c0), "r"(c1), "r"(c2), "r"(src)
        : "memory");
}

// Sᵀ (or dPᵀ) = X_c Y_iᵀ: X = this warpgroup's 64 key rows of K (V), Y = Q_i (dO_i), both
// K-major (d contiguous); k steps of 32 bytes within a 128-byte panel row, then the next panel.
__device__ __forceinline__ void issue_t(float (&acc)[NT_S * 4], u32 x_rows, u32 y_tile) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const u32 off = (u32)((kk % 4) * 32);
        const u64 da = sw128_desc(x_rows + (u32)((kk / 4) * KV_PANEL) + off, 16);
        const u64 db = sw128_desc(y_tile + (u32)((kk / 4) * Q_PANEL) + off, 16);
        Wgmma<BM>::ss(acc, da, db, kk > 0);
    }
}

// acc (64 keys x D) += A (64 keys x BM queries, registers) Y_i (BM x D): Y as it lies (rows of
// the k dimension, d contiguous: MN-major), 16 rows = 2048 bytes a k step.
__device__ __forceinline__ void issue_kv(float (&acc)[NT_D * 4], const u32 (&a)[KP][4], u32 y_tile) {
#pragma unroll
    for (int kk = 0; kk < KP; ++kk)
        Wgmma<D>::rs(acc, a[kk], sw128_desc(y_tile + (u32)(kk * 16 * 128), Q_PANEL), 1);
}

// dQ unit (64 queries x 64 columns) = dS (64 x BN keys) K_j[:, panel]: dS from one dSᵀ panel
// (rows = keys, queries contiguous) and K (rows = keys, d contiguous): both MN-major.
__device__ __forceinline__ void issue_dq(float (&acc)[DQ_N / 2], u32 ds_panel, u32 k_panel) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
        Wgmma<DQ_N>::ss_t(acc, sw128_desc(ds_panel + (u32)(kk * 16 * 128), DS_PANEL),
                          sw128_desc(k_panel + (u32)(kk * 16 * 128), KV_PANEL), kk > 0);
}

// SPLIT_D: Sᵀ (or dPᵀ) of all 64 keys (K, V: A) and this consumer's QN queries (B: QN rows
// of Q_i or dO_i from `y_rows`, a 1024-byte multiple into the tile), as issue_t
__device__ __forceinline__ void issue_t_half(float (&acc)[QN / 2], u32 x_rows, u32 y_rows) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const u32 off = (u32)((kk % 4) * 32);
        const u64 da = sw128_desc(x_rows + (u32)((kk / 4) * KV_PANEL) + off, 16);
        const u64 db = sw128_desc(y_rows + (u32)((kk / 4) * Q_PANEL) + off, 16);
        Wgmma<QN>::ss(acc, da, db, kk > 0);
    }
}

// SPLIT_D: acc (64 keys x DC columns) += A Y_i[:, cols]: A = Pᵀ or dSᵀ from shared memory (64
// key rows of BM queries, K-major), Y (dO_i or Q_i) from its 64-column panel `y_cols` on (two
// panels, MN-major, as issue_kv)
__device__ __forceinline__ void issue_kv_smem(float (&acc)[NT_D * 4], u32 a_tile, u32 y_cols) {
#pragma unroll
    for (int kk = 0; kk < KP; ++kk)
        Wgmma<DC>::ss_tb(acc, sw128_desc(a_tile + (u32)(kk * 32), 16),
                         sw128_desc(y_cols + (u32)(kk * 16 * 128), Q_PANEL), 1);
}

// Two floats of an accumulator row to the A-fragment registers of the next product: n8 tiles
// 2kk and 2kk+1 of the m64nBM accumulator make k16 step kk (the mma.sync A layout per warp).
__device__ __forceinline__ void pack_a(const float (&s)[NT_S * 4], u32 (&a)[KP][4]) {
#pragma unroll
    for (int kk = 0; kk < KP; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) a[kk][i] = pack2_elem(s[8 * kk + 2 * i], s[8 * kk + 2 * i + 1]);
}

// DETERMINISTIC: consumer c's flag for query block i of query head bh, and key block n's turn
// there: key blocks n_hi(i) - 1 down to 0 (those that see a row of i, a prefix of the key
// blocks: causal, those up to the last key that i's last row sees; else all of them)
__device__ __forceinline__ int* dq_flag(int* sem, int bh, int Nq, int i, int c) {
    return sem + (((size_t)bh * (size_t)((Nq + 63) / 64) + i) * 2 + c);
}
__device__ __forceinline__ int dq_turn(int i, int Nq, int off, int n, int n_blocks) {
    int n_hi = n_blocks;
    if (IS_CAUSAL) {
        const int last_key = min((i + 1) * BM, Nq) - 1 + off;
        n_hi = last_key < 0 ? 0 : min(n_hi, last_key / BN + 1);
    }
    return n_hi - 1 - n;
}

// The CTA's key block and the query blocks it visits. With the dQ warp each role finds them
// itself, ctaid read by volatile asm, so that the compiler does not keep one copy live across
// all roles (it spilled it, under the producer's 24 registers); the other kernels keep one.
struct Steps {
    int n_blk;   // the key block (DETERMINISTIC: last first, the order of the dQ turns)
    int n_iter;  // query blocks visited
    int qb0;     // the first (not causal: key block x starts at query block x mod n_iter)
};
__device__ __forceinline__ Steps steps(int Nq, int off) {
    unsigned bx = blockIdx.x, nx = gridDim.x;
    if (DQ_WARP) {
        asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(bx));
        asm volatile("mov.u32 %0, %%nctaid.x;\n" : "=r"(nx));
    }
    const int n_blk = (int)(DETERMINISTIC ? nx - 1 - bx : bx);
    const int n0 = n_blk * BN;
    const int m_first = IS_CAUSAL ? (n0 - off > 0 ? (n0 - off) / BM : 0) : 0;
    const int m_blocks = (Nq + BM - 1) / BM;
    const int n_iter = (IS_CAUSAL && Nq - 1 + off < n0) ? 0 : m_blocks - m_first;
    const bool rotate = !IS_CAUSAL && !DETERMINISTIC;
    return {n_blk, n_iter, rotate && n_iter > 0 ? (int)(bx % (unsigned)n_iter) : m_first};
}
// query block of step `it` (< n_iter: one subtraction wraps it, no division a step)
__device__ __forceinline__ int q_block_of(const Steps& g, int it) {
    const int q = g.qb0 + it;
    return !IS_CAUSAL && !DETERMINISTIC && q >= g.n_iter ? q - g.n_iter : q;
}

}  // namespace f3b

#define FA3_BWD_PARAMS                                                                       \
    const __grid_constant__ TmaDesc tmQ, const __grid_constant__ TmaDesc tmK,                 \
        const __grid_constant__ TmaDesc tmV, const __grid_constant__ TmaDesc tmdO,            \
        const __grid_constant__ TmaDesc tmdQ, const float *__restrict__ LSE,                  \
        const float *__restrict__ Dst, float *__restrict__ dQacc, elem_t *__restrict__ dK,  \
        elem_t *__restrict__ dV, int Nq, int Nk, int H, int KVH, float scale
#if DETERMINISTIC
extern "C" __global__ void __launch_bounds__(f3b::THREADS, 1)
fa3_bwd_det(FA3_BWD_PARAMS, int* __restrict__ dQsem) {
#else
extern "C" __global__ void __launch_bounds__(f3b::THREADS, 1)
fa3_bwd(FA3_BWD_PARAMS) {
#endif
    using namespace f3b;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ __align__(8) u64 bars[N_BARS];

    const u32 base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // the swizzle period
    const u32 sK = base;
    const u32 sV = sK + KV_BYTES;
    const u32 sQ = sV + KV_BYTES;         // NS x Q_BYTES
    const u32 sdO = sQ + NS * Q_BYTES;    // NS x Q_BYTES
    const u32 sdS = sdO + NS * Q_BYTES;   // NDS x DS_BYTES
    const u32 sP = sdS + NDS * DS_BYTES;  // NP x DS_BYTES (SPLIT_D)
    const u32 sStat = sP + NP * DS_BYTES; // per consumer, 2 x (QN LSE·log2e, QN D) fp32
    unsigned char* gen = smem_raw + (base - smem_u32(smem_raw));  // generic pointer to `base`
    float* stat = reinterpret_cast<float*>(gen + (sStat - base));
    const u32 sBulk = sStat + 4 * NC * QN * 4;  // DQ_BULK: DQ_STAGE bytes a consumer
    static_assert(!DQ_WARP || (4 * NC * QN * 4) % 1024 == 0, "DQ_WARP: boxes 1024-aligned");
    // consumer c's staged dQ unit
    auto dq_buf = [&](int c) { return sBulk + (u32)((DQ_SHARED ? 0 : c) * DQ_STAGE); };
    const u32 bar0 = smem_u32(bars);
    auto bar = [&](int i) { return bar0 + 8u * (u32)i; };

    const int h = blockIdx.y;
    const int b = blockIdx.z;
    // the key block (DETERMINISTIC: last first, the order of the dQ turns)
    const int off = CAUSAL_BOTTOM_RIGHT ? Nk - Nq : 0;  // query i sees keys j <= i + off
    const Steps top = steps(Nq, off);  // (with the dQ warp, each role finds its own)
    const size_t q_rows = ((size_t)b * H + h) * (size_t)Nq;  // first row of this query head

    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        mbar_init(bar(BAR_KV), 1);
        for (int s = 0; s < NS; ++s) {
            mbar_init(bar(BAR_FULL + s), 1);  // TMA's expect_tx
            // one arrival per consumer warp; DQ_IN_RING: the dQ warp's, once it read the slot
            mbar_init(bar(BAR_EMPTY + s), DQ_IN_RING ? 1 : 4 * NC);
            for (int cc = 0; DQ_IN_RING && cc < NC; ++cc)
                mbar_init(bar(BAR_DQ + NC * s + cc), 4);  // one arrival per consumer warp
        }
        for (int cc = 0; DQ_SHARED && cc < NC; ++cc) mbar_init(bar(BAR_FREE + cc), 1 + 128);
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {
        // ------------------------------------------------------------ producer
        setmaxnreg_dec<PRODUCER_REGS>();
        if (DQ_WARP && threadIdx.x / 32 == 1) {
            const Steps g = steps(Nq, off);  // (DQ_WARP)
            const int n_iter = g.n_iter;
            const int q_head = b * H + h;
            // ---- the dQ warp: per step, each consumer's staged unit (64 queries x 64 columns,
            // two 32-column boxes) added into dQacc by the copy engine, then the buffer handed
            // back once read; the consumers add the steps in order, a step late (add_dq)
            const bool leader = threadIdx.x == 32;
            if (leader) tma_prefetch(&tmdQ);
            if (DQ_IN_RING) {  // SPLIT_D: consumer cc's units in its Q and dO panels of slot s
                if (!leader) return;
                for (int it = 0; it < n_iter; ++it) {
                    const int s = it % NS;
                    const int m0 = q_block_of(g, it) * BM;
#pragma unroll 1
                    for (int cc = 0; cc < NC; ++cc) {  // (not unrolled: 24 registers)
                        mbar_wait(bar(BAR_DQ + NC * s + cc), (u32)(it / NS) & 1u);
#pragma unroll
                        for (int t = 0; t < DQ_PER; ++t) {  // columns DC·cc + 64t
                            const u32 buf = (t ? sdO : sQ) + (u32)(s * Q_BYTES + 2 * cc * Q_PANEL);
                            const int col = DC * cc + DQ_N * t;
                            tma_reduce_add_3d(&tmdQ, buf, col, m0, q_head);
                            tma_reduce_add_3d(&tmdQ, buf + DQ_BOX, col + 32, m0, q_head);
                        }
                        bulk_commit();
                    }
                    bulk_wait_read();  // both consumers' units read: the slot back to the loader
                    mbar_arrive(bar(BAR_EMPTY + s));
                }
                bulk_wait();  // every reduction done before the CTA's shared memory goes
                return;
            }
            if (n_iter > 0 && DQ_SHARED && leader)  // the buffer starts empty: to consumer 0
                mbar_arrive(bar(BAR_FREE));
            if (n_iter > 0 && !DQ_SHARED)  // the buffers start empty
                for (int cc = 0; cc < NC; ++cc)
                    asm volatile("bar.arrive %0, %1;\n" ::"r"(NB_DQ_EMPTY + cc), "r"(DQ_BAR_THREADS)
                                 : "memory");
            for (int it = 0; it < n_iter; ++it) {
                const int m0 = q_block_of(g, it) * BM;
#pragma unroll
                for (int cc = 0; cc < NC; ++cc) {  // consumer cc's unit (its dq_rows(0), dq_panel(0))
                    named_bar_sync(NB_DQ_FULL + cc, DQ_BAR_THREADS);
                    if (leader) {
                        const u32 buf = dq_buf(cc);
                        const int col = (cc % PANELS) * DQ_N, row = m0 + 64 * (cc / PANELS);
                        tma_reduce_add_3d(&tmdQ, buf, col, row, q_head);
                        tma_reduce_add_3d(&tmdQ, buf + DQ_BOX, col + 32, row, q_head);
                        bulk_commit();
                    }
                    // the buffer read out, to the consumer that writes it next: its own (the
                    // next step's unit) or, shared, the other (consumer 1 this step's, consumer
                    // 0 the next step's); none after the last step's
                    const int next = DQ_SHARED ? (cc + 1) % NC : cc;
                    if (it + 1 < n_iter || (DQ_SHARED && next > cc)) {
                        if (leader) bulk_wait_read();  // the copy engine has read the unit
                        if (DQ_SHARED) {
                            if (leader) mbar_arrive(bar(BAR_FREE + next));
                        } else {
                            __syncwarp();
                            asm volatile("bar.arrive %0, %1;\n" ::"r"(NB_DQ_EMPTY + next),
                                         "r"(DQ_BAR_THREADS) : "memory");
                        }
                    }
                }
            }
            if (leader) bulk_wait();  // every reduction done before the CTA's shared memory goes
            return;
        }
        if (threadIdx.x != 0) return;  // one thread issues every copy
        const Steps g = DQ_WARP ? steps(Nq, off) : top;
        const int n0 = g.n_blk * BN;
        const int kv_head = b * KVH + h / (H / KVH);
        const int q_head = b * H + h;
        tma_prefetch(&tmQ);
        tma_prefetch(&tmK);
        tma_prefetch(&tmV);
        tma_prefetch(&tmdO);
        mbar_expect_tx(bar(BAR_KV), 2 * KV_BYTES);
#pragma unroll
        for (int p = 0; p < PANELS; ++p) {
            tma_load_3d(sK + p * KV_PANEL, &tmK, bar(BAR_KV), 64 * p, n0, kv_head);
            tma_load_3d(sV + p * KV_PANEL, &tmV, bar(BAR_KV), 64 * p, n0, kv_head);
        }
#if DQ_BULK >= 2  // (unrolled, the loader's 24 registers spilled beside the dQ warp's code)
#pragma unroll 1
#endif
        for (int it = 0; it < g.n_iter; ++it) {
            const int s = it % NS;
            mbar_wait(bar(BAR_EMPTY + s), ((u32)(it / NS) & 1u) ^ 1u);
            const int m0 = q_block_of(g, it) * BM;
            mbar_expect_tx(bar(BAR_FULL + s), 2 * Q_BYTES);
#pragma unroll
            for (int p = 0; p < PANELS; ++p) {
                tma_load_3d(sQ + s * Q_BYTES + p * Q_PANEL, &tmQ, bar(BAR_FULL + s), 64 * p, m0,
                            q_head);
                tma_load_3d(sdO + s * Q_BYTES + p * Q_PANEL, &tmdO, bar(BAR_FULL + s), 64 * p, m0,
                            q_head);
            }
        }
        return;
    }

    // ---------------------------------------------------------------- consumers
    setmaxnreg_inc<CONSUMER_REGS>();
    const Steps g = DQ_WARP ? steps(Nq, off) : top;
    const unsigned n_blk = (unsigned)g.n_blk;
    const int n0 = g.n_blk * BN;
    const int n_iter = g.n_iter;
    auto q_block = [&](int it) { return q_block_of(g, it); };
    const int c = wg - 1;
    const int tid = threadIdx.x % 128;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const float sl2 = scale * IOSIM_LOG2E;
    const int kr = warp * 16 + (lane >> 2);  // this thread's first key row in the warpgroup's 64
    const int key0 = n0 + 64 * c + kr;       // rows key0 and key0 + 8
    const u32 k_rows = sK + (u32)(c * 64 * 128);
    // this consumer's dQ unit t: its 64 queries (dSᵀ panel) and 64 columns (K panel)
    // (SPLIT_D: its DC columns, K panels DC/64·c.., one query panel)
    auto dq_rows = [&](int t) { return SPLIT_D ? 0 : (c + t * NC) / PANELS; };
    auto dq_panel = [&](int t) { return SPLIT_D ? (DC / 64) * c + t : (c + t * NC) % PANELS; };
    const u32 v_rows = sV + (u32)(c * 64 * 128);

    float dv[NT_D * 4], dk[NT_D * 4];
#pragma unroll
    for (int i = 0; i < NT_D * 4; ++i) dv[i] = dk[i] = 0.f;
    float sacc[NT_S * 4], dpacc[NT_S * 4];
    u32 pa[KP][4], da[KP][4];

    // Ping-pong (FA3 Sec. 3.1): the consumers take turns at issuing their GEMMs, two turns a
    // step (A: Sᵀ, dPᵀ; B: dV, dK and the previous step's dQ), so one's exp2, dS stores and
    // atomics run under the other's GEMMs. dQ_i is issued one step late, in turn B of step
    // i+1: by then every consumer wrote dS_i (its B turn of step i came first), so no
    // consumer waits for another's softmax. Three dSᵀ buffers: the one step i writes was last
    // read by dQ of step i-3, whose wgmmas both consumers waited for before their A turns of
    // step i-1, which come before this write in the turn order.
    int m_prev = 0;  // query rows of the step whose dQ is pending
    [[maybe_unused]] int dq_units = 0;  // DQ_SHARED: units this consumer staged so far
    // (dq lives from a B turn to its atomics only: declared there, so that the wgmma's
    // read-write operands do not keep last step's values alive across the A turn)
    auto issue_dq_of = [&](float (&dq)[DQ_PER][DQ_N / 2], int step) {
        const u32 ds_tile = sdS + (u32)(((step + NDS) % NDS) * DS_BYTES);
#pragma unroll
        for (int t = 0; t < DQ_PER; ++t) {
            fence_regs<DQ_N / 2>(dq[t]);
            issue_dq(dq[t], ds_tile + (u32)(dq_rows(t) * DS_PANEL),
                     sK + (u32)(dq_panel(t) * KV_PANEL));
        }
    };
    // a dQ unit to shared memory at `sb` as the dQ warp's two swizzled 32-column boxes
    auto store_unit = [&](float (&u)[DQ_N / 2], u32 sb) {
        fence_regs<DQ_N / 2>(u);
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int row = kr + 8 * hr;  // (row & 7 = lane / 4)
#pragma unroll
            for (int nt = 0; nt < DQ_N / 8; ++nt)  // columns 8nt + 2(lane&3): box nt/4,
                // 16-byte chunk 2(nt%4) + (lane&3)/2 of the row, XOR-swizzled by (row & 7)
                *reinterpret_cast<float2*>(
                    gen + (sb - base) + (nt / 4) * DQ_BOX + row * 128 +
                    (((2 * (nt % 4) + ((lane & 3) >> 1)) ^ (row & 7)) << 4) + 8 * (lane & 1)) =
                    make_float2(u[nt * 4 + 2 * hr], u[nt * 4 + 2 * hr + 1]);
        }
    };
    auto add_dq = [&](float (&dq)[DQ_PER][DQ_N / 2]) {  // dQ of the pending step into dQacc
#if DETERMINISTIC  // (under #if, not if: the plain kernel's code stays as it was)
        if (tid == 0)
            sem_wait_eq(dq_flag(dQsem, b * H + h, Nq, m_prev / BM, c),
                        dq_turn(m_prev / BM, Nq, off, (int)n_blk, (int)gridDim.x));
        named_bar_sync(NB_SEM + c, 128);
#endif
        if (DQ_WARP) {  // the unit staged as two swizzled 32-column boxes for the dQ warp
            if (DQ_SHARED)  // the buffer is free: this consumer's k-th unit, phase k
                mbar_wait(bar(BAR_FREE + c), (u32)(dq_units++) & 1u);
            else
                named_bar_sync(NB_DQ_EMPTY + c, DQ_BAR_THREADS);
            store_unit(dq[0], dq_buf(c));
            fence_proxy_async();  // the stores, seen by the copy engine's async proxy
            asm volatile("bar.arrive %0, %1;\n" ::"r"(NB_DQ_FULL + c), "r"(DQ_BAR_THREADS) : "memory");
            // DQ_SHARED: the other consumer stores next (consumer 1 this step's unit, consumer
            // 0 the next step's; after consumer 1's last, an arrival no one waits for)
            if (DQ_SHARED) mbar_arrive(bar(BAR_FREE + (c ^ 1)));
        } else if (DQ_BULK == 1) {  // the unit's rows staged, then a bulk reduce-add a row
            const u32 buf = sBulk + (u32)(c * 64 * BULK_ROW);
            if (tid < 64) bulk_wait_read();  // the last step's rows read out of the buffer
            named_bar_sync(NB_BULK + c, 128);
            unsigned char* st = gen + (buf - base);
            fence_regs<DQ_N / 2>(dq[0]);
#pragma unroll
            for (int hr = 0; hr < 2; ++hr)
#pragma unroll
                for (int nt = 0; nt < DQ_N / 8; ++nt)
                    *reinterpret_cast<float2*>(st + (kr + 8 * hr) * BULK_ROW + nt * 32 + 8 * (lane & 3)) =
                        make_float2(dq[0][nt * 4 + 2 * hr], dq[0][nt * 4 + 2 * hr + 1]);
            fence_proxy_async();
            named_bar_sync(NB_BULK + c, 128);
            const int row = m_prev + 64 * dq_rows(0) + tid;
            if (tid < 64 && row < Nq) {
                bulk_reduce_add_f32(dQacc + (q_rows + row) * D + dq_panel(0) * DQ_N,
                                    buf + (u32)(tid * BULK_ROW), DQ_N * 4);
                bulk_commit();
            }
        } else {
#pragma unroll
            for (int t = 0; t < DQ_PER; ++t) {
                fence_regs<DQ_N / 2>(dq[t]);
#pragma unroll
                for (int hr = 0; hr < 2; ++hr) {
                    const int row = m_prev + 64 * dq_rows(t) + kr + 8 * hr;  // a query
                    if (row >= Nq) continue;
                    float* g = dQacc + (q_rows + row) * D + dq_panel(t) * DQ_N + 2 * (lane & 3);
#pragma unroll
                    for (int nt = 0; nt < DQ_N / 8; ++nt)
                        red_add_f32x2(g + nt * 8, dq[t][nt * 4 + 2 * hr], dq[t][nt * 4 + 2 * hr + 1]);
                }
            }
        }
#if DETERMINISTIC  // every thread's adds issued, then the next turn (key block 0: 0)
        named_bar_sync(NB_SEM + c, 128);
        if (tid == 0)  // (flag and turn found again: nothing kept live across the adds)
            sem_release(dq_flag(dQsem, b * H + h, Nq, m_prev / BM, c),
                        n_blk == 0 ? 0 : dq_turn(m_prev / BM, Nq, off, (int)n_blk, (int)gridDim.x) + 1);
#endif
    };

#if HEAD_DIM == 256
    // ---- SPLIT_D: both consumers take all 64 keys; consumer c computes Sᵀ, dPᵀ for queries
    // QN·c.. of the step, stores its half of Pᵀ and dSᵀ, and after both halves are in (NB_XCH)
    // accumulates dV, dK columns DC·c.. from all of Pᵀ, dSᵀ (shared memory) and issues its dQ
    // units of this step. Two Pᵀ / dSᵀ buffers (by step): the buffer step it writes was read by
    // step it - 2's products, which each consumer waited for before it arrived at step it - 1's
    // NB_XCH, which the writer passed.
    (void)sacc; (void)dpacc; (void)pa; (void)da; (void)key0; (void)k_rows; (void)v_rows;
    const int key_s = n0 + kr;  // this thread's key rows key_s, key_s + 8
    const int qc0 = QN * c;     // this consumer's first query column of the step
    auto load_half = [&](int it, float& l, float& d) {  // as load_stats, for queries qc0..
        l = IOSIM_NEG_INF;
        d = 0.f;
        const int m0 = it < n_iter ? q_block(it) * BM : Nq;
        if (tid < QN && m0 + qc0 + tid < Nq) {
            l = __ldg(LSE + q_rows + m0 + qc0 + tid);
            d = __ldg(Dst + q_rows + m0 + qc0 + tid);
        }
    };
    float row_l, row_d;
    load_half(0, row_l, row_d);
    mbar_wait(bar(BAR_KV), 0);
    for (int it = 0; it < n_iter; ++it) {
        const int s = it % NS;
        const int m0 = q_block(it) * BM;
        const u32 q_tile = sQ + (u32)(s * Q_BYTES);
        const u32 do_tile = sdO + (u32)(s * Q_BYTES);
        mbar_wait(bar(BAR_FULL + s), (u32)(it / NS) & 1u);
        float next_l, next_d;
        load_half(it + 1, next_l, next_d);

        float st_acc[QN / 2], dp_acc[QN / 2];
        wgmma_fence();
        issue_t_half(st_acc, sK, q_tile + (u32)(qc0 * 128));
        issue_t_half(dp_acc, sV, do_tile + (u32)(qc0 * 128));
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs<QN / 2>(st_acc);
        fence_regs<QN / 2>(dp_acc);

        float* st = stat + (2 * c + (it & 1)) * 2 * QN;
        if (tid < QN) {
            st[tid] = row_l == IOSIM_NEG_INF ? -IOSIM_NEG_INF : row_l * IOSIM_LOG2E;
            st[QN + tid] = row_d;
        }
        named_bar_sync(NB_STAT + c, 128);
        const bool need_mask = n0 + BN > Nk || (IS_CAUSAL && n0 + BN - 1 > m0 + qc0 + off);
#pragma unroll
        for (int nt = 0; nt < NT_S; ++nt) {
            const int qc = nt * 8 + 2 * (lane & 3);
            const float2 l2 = *reinterpret_cast<const float2*>(st + qc);
            const float2 d2 = *reinterpret_cast<const float2*>(st + QN + qc);
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int key = key_s + (r >> 1) * 8;
                const int q = m0 + qc0 + qc + (r & 1);
                float p = fast_exp2(fmaf(st_acc[nt * 4 + r], sl2, -((r & 1) ? l2.y : l2.x)));
                if (need_mask && (key >= Nk || (IS_CAUSAL && key > q + off))) p = 0.f;
                st_acc[nt * 4 + r] = p;
                dp_acc[nt * 4 + r] = p * (dp_acc[nt * 4 + r] - ((r & 1) ? d2.y : d2.x));
            }
        }
        // this consumer's query columns of Pᵀ and dSᵀ (64 key rows of 128 bytes, 16-byte chunks
        // of 8 queries XOR-swizzled by (row & 7), as the loop below for dSᵀ)
        const u32 buf = (u32)((it % NDS) * DS_BYTES);
        unsigned char* p_gen = gen + (sP + buf - base);
        unsigned char* ds_gen = gen + (sdS + buf - base);
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int row = kr + 8 * hr;
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt) {
                const int at = row * 128 + (((qc0 / 8 + nt) ^ (row & 7)) << 4) + 4 * (lane & 3);
                *reinterpret_cast<u32*>(p_gen + at) =
                    pack2_elem(st_acc[nt * 4 + 2 * hr], st_acc[nt * 4 + 2 * hr + 1]);
                *reinterpret_cast<u32*>(ds_gen + at) =
                    pack2_elem(dp_acc[nt * 4 + 2 * hr], dp_acc[nt * 4 + 2 * hr + 1]);
            }
        }
        fence_proxy_async();
        named_bar_sync(NB_XCH, 256);

        fence_regs<NT_D * 4>(dv);
        fence_regs<NT_D * 4>(dk);
        wgmma_fence();
        issue_kv_smem(dv, sP + buf, do_tile + (u32)((DC / 64) * c * Q_PANEL));
        issue_kv_smem(dk, sdS + buf, q_tile + (u32)((DC / 64) * c * Q_PANEL));
        float dq[DQ_PER][DQ_N / 2];
        issue_dq_of(dq, it);  // this step's dSᵀ buffer
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs<NT_D * 4>(dv);
        fence_regs<NT_D * 4>(dk);
        m_prev = m0;
        if (DQ_IN_RING) {  // the units into this consumer's Q, dO panels of the slot, which
            // since NB_XCH only its own dK, dV (done) read; the dQ warp frees the slot
#pragma unroll
            for (int t = 0; t < DQ_PER; ++t)
                store_unit(dq[t], (t ? do_tile : q_tile) + (u32)((DC / 64) * c * Q_PANEL));
            fence_proxy_async();
            __syncwarp();
            if (lane == 0) mbar_arrive(bar(BAR_DQ + NC * s + c));
        } else {
            __syncwarp();
            if (lane == 0) mbar_arrive(bar(BAR_EMPTY + s));  // Q_i, dO_i no longer read
            add_dq(dq);
        }
        row_l = next_l;
        row_d = next_d;
    }

    // ---- epilogue: dK·scale and dV columns DC·c.. of this thread's keys, from registers
    const size_t kv_out = ((size_t)b * H + h) * (size_t)Nk;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        const int key = key_s + 8 * hr;
        if (key >= Nk) continue;
        elem_t* gk = dK + (kv_out + key) * D + DC * c + 2 * (lane & 3);
        elem_t* gv = dV + (kv_out + key) * D + DC * c + 2 * (lane & 3);
#pragma unroll
        for (int nt = 0; nt < NT_D; ++nt) {
            *reinterpret_cast<u32*>(gk + nt * 8) =
                pack2_elem(dk[nt * 4 + 2 * hr] * scale, dk[nt * 4 + 2 * hr + 1] * scale);
            *reinterpret_cast<u32*>(gv + nt * 8) =
                pack2_elem(dv[nt * 4 + 2 * hr], dv[nt * 4 + 2 * hr + 1]);
        }
    }
#else
    // LSE and D of query block q_block(it), one row a thread; a row past Nq, or one that sees
    // no key: LSE = +inf makes its P (and dS) zero. Loaded a step ahead of their use: a load
    // issued in the step that reads it waited out its round trip (~1000 cycles), longer than
    // the turn-A GEMMs it was meant to hide under (ncu: long-scoreboard stalls 31% of cycles).
    auto load_stats = [&](int it, float& l, float& d) {
        l = IOSIM_NEG_INF;
        d = 0.f;
        const int m0 = it < n_iter ? q_block(it) * BM : Nq;
        if (tid < BM && m0 + tid < Nq) {
            l = __ldg(LSE + q_rows + m0 + tid);
            d = __ldg(Dst + q_rows + m0 + tid);
        }
    };
    float row_l, row_d;
    load_stats(0, row_l, row_d);
    mbar_wait(bar(BAR_KV), 0);
    if (n_iter > 0 && c == 1) turn_pass(c);  // the first consumer's turn first
    if (DQ_SHARED && n_iter > 0 && c == 1) mbar_arrive(bar(BAR_FREE));  // consumer 0 stores first
    for (int it = 0; it < n_iter; ++it) {
        const int s = it % NS;
        const int m0 = q_block(it) * BM;
        const u32 q_tile = sQ + (u32)(s * Q_BYTES);
        const u32 do_tile = sdO + (u32)(s * Q_BYTES);
        mbar_wait(bar(BAR_FULL + s), (u32)(it / NS) & 1u);
        float next_l, next_d;  // the next step's, in flight during this one
        load_stats(it + 1, next_l, next_d);

        turn_wait(c);  // ---- turn A
        fence_regs<NT_S * 4>(sacc);
        fence_regs<NT_S * 4>(dpacc);
        wgmma_fence();
        issue_t(sacc, k_rows, q_tile);
        issue_t(dpacc, v_rows, do_tile);
        wgmma_commit();
        turn_pass(c);
        wgmma_wait<0>();
        fence_regs<NT_S * 4>(sacc);
        fence_regs<NT_S * 4>(dpacc);

        // this consumer's copy of the stats (two buffers, by step), then Pᵀ and dSᵀ: rows are
        // keys (key0, key0 + 8), columns queries m0 + 8nt + 2(lane&3) + e
        float* st = stat + (2 * c + (it & 1)) * 2 * BM;
        if (tid < BM) {
            st[tid] = row_l == IOSIM_NEG_INF ? -IOSIM_NEG_INF : row_l * IOSIM_LOG2E;
            st[BM + tid] = row_d;
        }
        named_bar_sync(NB_STAT + c, 128);
        const bool need_mask = n0 + BN > Nk || (IS_CAUSAL && n0 + BN - 1 > m0 + off);
#pragma unroll
        for (int nt = 0; nt < NT_S; ++nt) {
            const int qc = nt * 8 + 2 * (lane & 3);
            const float2 l2 = *reinterpret_cast<const float2*>(st + qc);
            const float2 d2 = *reinterpret_cast<const float2*>(st + BM + qc);
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int key = key0 + (r >> 1) * 8;
                const int q = m0 + qc + (r & 1);
                float p = fast_exp2(fmaf(sacc[nt * 4 + r], sl2, -((r & 1) ? l2.y : l2.x)));
                if (need_mask && (key >= Nk || (IS_CAUSAL && key > q + off))) p = 0.f;
                sacc[nt * 4 + r] = p;
                dpacc[nt * 4 + r] = p * (dpacc[nt * 4 + r] - ((r & 1) ? d2.y : d2.x));
            }
        }
        pack_a(sacc, pa);
        pack_a(dpacc, da);

        // dSᵀ to shared memory (this step's buffer) for dQ: panels of 64 queries, 128-byte rows
        // of keys, 16-byte chunks of 8 queries XOR-swizzled by (row & 7), as TMA's 128-byte
        // swizzle lays tiles
        unsigned char* ds_gen = gen + (sdS + (u32)((it % 3) * DS_BYTES) - base);
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const int row = 64 * c + kr + 8 * hr;
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
                *reinterpret_cast<u32*>(ds_gen + (nt / 8) * DS_PANEL + row * 128 +
                                        (((nt % 8) ^ (row & 7)) << 4) + 4 * (lane & 3)) =
                    pack2_elem(dpacc[nt * 4 + 2 * hr], dpacc[nt * 4 + 2 * hr + 1]);
        }
        fence_proxy_async();  // the stores, seen by the tensor cores' async proxy
        // one consumer (NC = 1) reads only its own dSᵀ: its warps' stores before its wgmma
        if (NC == 1) named_bar_sync(NB_DS, 128);

        turn_wait(c);  // ---- turn B
        fence_regs<NT_D * 4>(dv);
        fence_regs<NT_D * 4>(dk);
        wgmma_fence();
        issue_kv(dv, pa, do_tile);
        issue_kv(dk, da, q_tile);
        // issued at it = 0 too, on an unused buffer, and not added: a wgmma under a condition
        // would keep its accumulators live on both paths (ptxas spills at d = 128)
        float dq[DQ_PER][DQ_N / 2];
        issue_dq_of(dq, it - 1);
        wgmma_commit();
        turn_pass(c);
        wgmma_wait<0>();
        fence_regs<NT_D * 4>(dv);
        fence_regs<NT_D * 4>(dk);
        __syncwarp();
        if (lane == 0) mbar_arrive(bar(BAR_EMPTY + s));  // Q_i, dO_i, stats no longer read
        if (it > 0) add_dq(dq);
        m_prev = m0;
        row_l = next_l;
        row_d = next_d;
    }
    if (n_iter > 0) {  // ---- the last step's dQ, a last turn each
        turn_wait(c);
        wgmma_fence();
        float dq[DQ_PER][DQ_N / 2];
        issue_dq_of(dq, n_iter - 1);
        wgmma_commit();
        if (c == 0) turn_pass(c);  // the second consumer's last turn is never waited for
        wgmma_wait<0>();
        add_dq(dq);
        if (DQ_BULK == 1 && tid < 64) bulk_wait();  // the reductions done before the CTA's smem goes
    }

    // ---- epilogue: dK·scale and dV, one slice per query head, from registers
    const size_t kv_out = ((size_t)b * H + h) * (size_t)Nk;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        const int key = key0 + 8 * hr;
        if (key >= Nk) continue;
        elem_t* gk = dK + (kv_out + key) * D + 2 * (lane & 3);
        elem_t* gv = dV + (kv_out + key) * D + 2 * (lane & 3);
#pragma unroll
        for (int nt = 0; nt < NT_D; ++nt) {
            *reinterpret_cast<u32*>(gk + nt * 8) =
                pack2_elem(dk[nt * 4 + 2 * hr] * scale, dk[nt * 4 + 2 * hr + 1] * scale);
            *reinterpret_cast<u32*>(gv + nt * 8) =
                pack2_elem(dv[nt * 4 + 2 * hr], dv[nt * 4 + 2 * hr + 1]);
        }
    }
#endif  // HEAD_DIM == 256
}
