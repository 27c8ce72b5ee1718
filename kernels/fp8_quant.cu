// fp8_quant.cu -- bf16 Q, K, V to e4m3 for kernels/fa3.cu's FP8 path (FA3 paper, Sec. 3.3):
// one scale per tile of rows per head (block quantisation), V written transposed, and
// optionally Q and K multiplied by a random-sign Hadamard transform first (incoherent
// processing: (Q M)(K M)^T = Q K^T for M = diag(signs) H / sqrt(d), orthogonal, while the
// transform spreads an outlier over all d entries of its row).
//
// Entries (selector macros FP8_AMAX=1 / FP8_QUANT=1):
//   fp8_amax(Q, K, V, Qa, Ka, Va, Nq, Nk, H, KVH): per tile max|x| (after the transform) into
//     Qa, Ka, Va: the first pass of per-tensor scaling (PER_TENSOR=1).
//   fp8_quant(Q, K, V, Q8, K8, Vt8, Qs, Ks, Vs, Qa, Ka, Va, Nq, Nk, H, KVH): x8 = e4m3(x / s),
//     s = amax / 448 of the tile (PER_TENSOR=0) or of the whole tensor (PER_TENSOR=1: the max
//     of its tiles' Qa/Ka/Va, which every CTA reduces itself); s is written to Qs/Ks/Vs (the
//     descale factors fa3.cu multiplies back), 1 where the amax is 0.
// Q (B,H,Nq,d), K, V (B,KVH,Nk,d) bf16; Q8 (B,H,Nq,d), K8 (B,KVH,Nk,d) e4m3; Vt8 (B,KVH,d,Nk16)
//   e4m3, Nk16 = Nk rounded up to 16, keys permuted within each 16 as fa3.cu's header says
//   (slot (k&1) | ((k>>3)&1)<<1 | ((k>>1)&3)<<2 holds key k), keys Nk..Nk16-1 zero.
// Scales fp32: Qs[(b*H + h)*Tq + i] for query tile i (BLOCK_M rows), Ks/Vs[(b*KVH + h)*Tk + j]
//   for key tile j (BLOCK_N rows); Qa/Ka/Va the same layout. Tq = ceil(Nq/BLOCK_M), Tk alike.
// Grid (max(Tq, Tk), H, 3B): z = 3b + tensor (0 Q, 1 K, 2 V); CTAs past a tensor's tiles or
//   heads exit. QUANT_THREADS threads (QUANT_THREADS/32 warps), a warp per row: lane l holds
//   E = d/32 elements of each of its rows in registers, l*E .. l*E+E-1 of Q and K (whole
//   vectors, and the Hadamard transform's order), l, l+32, ... of V (so that the lanes' bytes
//   of the transposed tile fall in distinct banks); static shared memory: the warps' maxima
//   and, for V, the e4m3 tile transposed (d rows of BLOCK_N + 4 bytes: the 4 skew the banks).
// Defines: HEAD_DIM (64/128/256), BLOCK_M, BLOCK_N (fa3.cu's tiles), QUANT_THREADS,
//   PER_TENSOR, HADAMARD, ELEM_BF16=1.
// IO per tensor: reads its bf16 elements once, writes its e4m3 elements and a scale per tile.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "fp8_quant.cu needs e4m3 conversions (sm_89 or later)"
#endif

#include "common.cuh"
#include "hopper.cuh"  // pack4_e4m3

#if !defined(HEAD_DIM) || !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(QUANT_THREADS)
#error "fp8_quant needs HEAD_DIM, BLOCK_M, BLOCK_N and QUANT_THREADS"
#endif
#if !defined(PER_TENSOR) || !defined(HADAMARD)
#error "fp8_quant needs PER_TENSOR and HADAMARD"
#endif
#if !defined(ELEM_BF16)
#error "fp8_quant reads bf16 (compile with ELEM_BF16=1)"
#endif

namespace fq {

constexpr int D = HEAD_DIM;
constexpr int E = D / 32;  // elements of a row per lane
constexpr int WARPS = QUANT_THREADS / 32;
constexpr int TMAX = BLOCK_M > BLOCK_N ? BLOCK_M : BLOCK_N;
constexpr int R = (TMAX + WARPS - 1) / WARPS;  // rows per warp, at most
constexpr int VT_ROW = BLOCK_N + 4;  // bytes a row of the transposed V tile in shared memory
// The random signs of the Hadamard transform: bit c of these words (fixed, so that Q and K,
// quantised by different CTAs, get the same M).
__constant__ unsigned SIGNS[8] = {0x9E3779B9u, 0x7F4A7C15u, 0xF39CC060u, 0x5CEDC834u,
                               0x2545F491u, 0x4F6CDD1Du, 0xB5297A4Du, 0x68E31DA4u};

static_assert(D == 64 || D == 128 || D == 256, "HEAD_DIM must be 64, 128 or 256");
static_assert(QUANT_THREADS % 32 == 0 && WARPS >= 1 && WARPS <= 32, "QUANT_THREADS: 1..32 warps");
static_assert(BLOCK_N % 16 == 0, "BLOCK_N: whole 16-key groups of Vt");
static_assert(E % 2 == 0, "two elements of a row a conversion");

// V's row: element lane + 32*e in x[e] (p: the row's start)
IOSIM_DEVICE void load_row_strided(const elem_t* p, int lane, float (&x)[E]) {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = elem_to_float(p[lane + 32 * e]);
}

IOSIM_DEVICE void load_row(const elem_t* p, float (&x)[E]) {
    u32 w[E / 2];
    if constexpr (E == 8) {
        const uint4 v = *reinterpret_cast<const uint4*>(p);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else if constexpr (E == 4) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        w[0] = v.x, w[1] = v.y;
    } else {
        w[0] = *reinterpret_cast<const u32*>(p);
    }
#pragma unroll
    for (int i = 0; i < E / 2; ++i) unpack2_elem(w[i], x[2 * i], x[2 * i + 1]);
}

// x <- (x * signs) H / sqrt(d) over the warp's row (fast Walsh-Hadamard: strides below E
// inside a lane, the others across lanes: stride E*2^k pairs lane l with lane l ^ 2^k).
IOSIM_DEVICE void hadamard(float (&x)[E], int lane) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int c = lane * E + e;
        if ((SIGNS[c >> 5] >> (c & 31)) & 1u) x[e] = -x[e];
    }
#pragma unroll
    for (int h = 1; h < E; h *= 2)
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (!(e & h)) {
                const float a = x[e], b = x[e + h];
                x[e] = a + b;
                x[e + h] = a - b;
            }
#pragma unroll
    for (int k = 1; k < 32; k *= 2) {
        const bool upper = lane & k;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const float y = __shfl_xor_sync(0xffffffffu, x[e], k);
            x[e] = upper ? y - x[e] : x[e] + y;
        }
    }
    const float norm = rsqrtf((float)D);
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] *= norm;
}

struct Tile {  // which tensor, head and rows this CTA owns
    int t, rows0, nrows, Nrows, tile, tiles, head, heads;
};

IOSIM_DEVICE bool tile_of(Tile& T, int Nq, int Nk, int H, int KVH) {
    T.t = blockIdx.z % 3;
    const int b = blockIdx.z / 3;
    const int tr = T.t == 0 ? BLOCK_M : BLOCK_N;
    T.Nrows = T.t == 0 ? Nq : Nk;
    T.heads = T.t == 0 ? H : KVH;
    T.tiles = (T.Nrows + tr - 1) / tr;
    T.tile = blockIdx.x;
    if (T.tile >= T.tiles || (int)blockIdx.y >= T.heads) return false;
    T.head = b * T.heads + blockIdx.y;
    T.rows0 = T.tile * tr;
    T.nrows = min(tr, T.Nrows - T.rows0);
    return true;
}

// The tile's rows in registers (transformed for Q and K with HADAMARD), and the CTA's max|x|.
IOSIM_DEVICE float load_tile(const Tile& T, const elem_t* X, float (&x)[R][E], float* red) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const elem_t* base = X + ((size_t)T.head * T.Nrows + T.rows0) * D;
    float mx = 0.f;
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const int r = warp + i * WARPS;
#pragma unroll
        for (int e = 0; e < E; ++e) x[i][e] = 0.f;
        if (r < T.nrows) {
            if (T.t == 2)
                load_row_strided(base + (size_t)r * D, lane, x[i]);
            else
                load_row(base + (size_t)r * D + lane * E, x[i]);
        }
        if (HADAMARD && T.t < 2) hadamard(x[i], lane);
#pragma unroll
        for (int e = 0; e < E; ++e) mx = fmaxf(mx, fabsf(x[i][e]));
    }
    mx = warp_max(mx);
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    float all = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) all = fmaxf(all, red[w]);
    return all;
}

}  // namespace fq

#if defined(FP8_AMAX)
extern "C" __global__ void __launch_bounds__(QUANT_THREADS)
fp8_amax(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
         float* __restrict__ Qa, float* __restrict__ Ka, float* __restrict__ Va, int Nq, int Nk,
         int H, int KVH) {
    using namespace fq;
    __shared__ float red[WARPS];
    Tile T;
    if (!tile_of(T, Nq, Nk, H, KVH)) return;
    float x[R][E];
    const float mx = load_tile(T, T.t == 0 ? Q : T.t == 1 ? K : V, x, red);
    float* A = T.t == 0 ? Qa : T.t == 1 ? Ka : Va;
    if (threadIdx.x == 0) A[(size_t)T.head * T.tiles + T.tile] = mx;
}
#endif

#if defined(FP8_QUANT)
extern "C" __global__ void __launch_bounds__(QUANT_THREADS)
fp8_quant(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
          unsigned char* __restrict__ Q8, unsigned char* __restrict__ K8,
          unsigned char* __restrict__ Vt8, float* __restrict__ Qs, float* __restrict__ Ks,
          float* __restrict__ Vs, const float* __restrict__ Qa, const float* __restrict__ Ka,
          const float* __restrict__ Va, int Nq, int Nk, int H, int KVH) {
    using namespace fq;
    __shared__ float red[WARPS];
    __shared__ __align__(16) unsigned char vt[D * VT_ROW];  // V: the e4m3 tile, transposed
    Tile T;
    if (!tile_of(T, Nq, Nk, H, KVH)) return;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float x[R][E];
    float amax = load_tile(T, T.t == 0 ? Q : T.t == 1 ? K : V, x, red);
#if PER_TENSOR
    {  // the tensor's amax: the max over every tile of every head of fp8_amax's maxima
        const float* A = T.t == 0 ? Qa : T.t == 1 ? Ka : Va;
        const int n = (int)(gridDim.z / 3) * T.heads * T.tiles;
        float mx = 0.f;
        for (int i = threadIdx.x; i < n; i += QUANT_THREADS) mx = fmaxf(mx, A[i]);
        mx = warp_max(mx);
        __syncthreads();  // every warp has read red[] for the tile's own amax
        if (lane == 0) red[warp] = mx;
        __syncthreads();
        amax = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) amax = fmaxf(amax, red[w]);
    }
#endif
    const float s = amax > 0.f ? amax / 448.f : 1.f;  // 448: the largest finite e4m3
    const float inv = 1.f / s;
    if (threadIdx.x == 0) (T.t == 0 ? Qs : T.t == 1 ? Ks : Vs)[(size_t)T.head * T.tiles + T.tile] = s;
    if (T.t < 2) {  // Q8, K8: rows as they lie, E bytes a lane
        unsigned char* base = (T.t == 0 ? Q8 : K8) + ((size_t)T.head * T.Nrows + T.rows0) * D + lane * E;
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const int r = warp + i * WARPS;
            if (r >= T.nrows) continue;
            u32 w[E / 4 > 0 ? E / 4 : 1];
#pragma unroll
            for (int q = 0; q < E / 4; ++q)
                w[q] = pack4_e4m3(x[i][4 * q] * inv, x[i][4 * q + 1] * inv, x[i][4 * q + 2] * inv,
                                  x[i][4 * q + 3] * inv);
            if constexpr (E == 8) {
                *reinterpret_cast<uint2*>(base + (size_t)r * D) = make_uint2(w[0], w[1]);
            } else if constexpr (E == 4) {
                *reinterpret_cast<u32*>(base + (size_t)r * D) = w[0];
            } else {  // E == 2: two bytes
                const u32 v = pack4_e4m3(x[i][0] * inv, x[i][1] * inv, 0.f, 0.f);
                *reinterpret_cast<unsigned short*>(base + (size_t)r * D) = (unsigned short)v;
            }
        }
        return;
    }
    // V: byte (c, slot) of the transposed tile holds element c of key row (within 16) k,
    // slot = (k&1) | ((k>>3)&1)<<1 | ((k>>1)&3)<<2; rows past Nk are zero.
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const int r = warp + i * WARPS;
        if (r >= BLOCK_N) continue;
        const int k = r & 15;
        const int slot = (r & ~15) | (k & 1) | (((k >> 3) & 1) << 1) | (((k >> 1) & 3) << 2);
#pragma unroll
        for (int e = 0; e < E; e += 2) {  // two elements (columns lane + 32e, + 32) a cvt
            const u32 v = pack4_e4m3(r < T.nrows ? x[i][e] * inv : 0.f,
                                     r < T.nrows ? x[i][e + 1] * inv : 0.f, 0.f, 0.f);
            vt[(lane + 32 * e) * VT_ROW + slot] = (unsigned char)(v & 0xffu);
            vt[(lane + 32 * (e + 1)) * VT_ROW + slot] = (unsigned char)((v >> 8) & 0xffu);
        }
    }
    __syncthreads();
    // Vt rows: d rows of this tile's keys, up to Nk16, 4 bytes a thread (a warp: 128 bytes)
    const int nk16 = (Nk + 15) / 16 * 16;
    const int cols = min(BLOCK_N, nk16 - T.rows0);  // a multiple of 16
    unsigned char* out = Vt8 + (size_t)T.head * D * nk16 + T.rows0;
    for (int idx = threadIdx.x; idx < D * (cols / 4); idx += QUANT_THREADS) {
        const int c = idx / (cols / 4), w = idx % (cols / 4);
        *reinterpret_cast<u32*>(out + (size_t)c * nk16 + w * 4) =
            *reinterpret_cast<const u32*>(vt + c * VT_ROW + w * 4);
    }
}
#endif
