// The negacyclic RNS NTT of crossfhe.ring.ntt as CUDA kernels behind one XLA FFI custom call (the GPU kernel set).
//
// Function: the forward transform maps coefficients a_0..a_{N-1} (uint32, [0, q)) of each row of x
// uint32[..., L, N] to the evaluations at the odd powers of psi in slot order, and the inverse maps them back
// (crossfhe/ring/ntt.py's docstring); row r uses modulus q[r mod L] and the plan's tables w, w_shoup [L, N]
// (psi^brv(i) in kernel order, with their Shoup companions floor(w 2^32 / q)), and for the inverse inv_last,
// inv_last_shoup [L, 2] (N^-1 and psi^-1 N^-1). Every output word is the canonical residue in [0, q), so the words
// equal the radix-2 XLA kernel's and the CPU kernel's (`full` is accepted and ignored: [0, q) is inside the lazy
// range [0, 2q) that full = 0 allows).
//
// Schedule: Cooley-Tukey (forward) and Gentleman-Sande (inverse) butterflies on the natural-order tables, in at
// most two passes over memory. N = Na Nb: for N <= 2^12 one kernel does every stage of one row in shared memory
// (Na = 1); above, the stages whose butterflies span rows of Nb (distance >= Nb) run first on tiles of 32 columns
// of the Na x Nb matrix, and the stages inside rows run on tiles of 2048 consecutive words. The slot-order
// permutation out[(s mod 32) N/32 + s / 32] = A[s] is done when the row pass writes (forward) or reads (inverse)
// global memory, through shared memory padded by one word in 32 (no bank conflicts), 128-byte runs per warp.
// The tables are in the plan's kernel order (crossfhe.ring.ntt._arrange: rows of the transposed stages regrouped),
// read through tw_index. Arithmetic: Shoup products with __umulhi (one instruction), every value kept in [0, q):
// moduli below 2^31.

#include <cstdint>
#include <string>

#ifndef CROSSFHE_GPU_EMULATE
#include <cuda_runtime.h>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
#endif

namespace {

constexpr int kThreads = 256;
constexpr int kColumns = 32;      // columns per tile of the column pass
constexpr int kRowTile = 2048;    // words per tile of the row pass (two-pass case)
constexpr int kOneKernelLogN = 12;  // up to this log2(N) a row is transformed by one block

__device__ __forceinline__ uint32_t shoup(uint32_t x, uint32_t w, uint32_t ws, uint32_t q) {
  uint32_t v = x * w - __umulhi(x, ws) * q;  // in [0, 2q) for any x < 2^32 and w < q
  return v >= q ? v - q : v;
}

__device__ __forceinline__ uint32_t add_mod(uint32_t a, uint32_t b, uint32_t q) {
  uint32_t s = a + b;
  return s >= q ? s - q : s;
}

__device__ __forceinline__ uint32_t sub_mod(uint32_t a, uint32_t b, uint32_t q) {
  return a >= b ? a - b : a + q - b;
}

// Index in the plan's table of the natural twiddle m + i (stage with m blocks, block i): the stages with
// m >= N1 = N / 32 hold their twiddles regrouped from [N1, m / N1] to [m / N1, N1].
__device__ __forceinline__ int tw_index(int log_m, int i, int log_n1) {
  int m = 1 << log_m;
  if (log_m < log_n1) return m + i;
  int shift = log_m - log_n1;
  return m + ((i & ((1 << shift) - 1)) << log_n1) + (i >> shift);
}

__device__ __forceinline__ int pad(int j) { return j + (j >> 5); }

struct Tables {
  const uint32_t* q;      // [L]
  const uint32_t* w;      // [L, N]
  const uint32_t* ws;     // [L, N]
  const uint32_t* last;   // [L, 2]
  const uint32_t* lasts;  // [L, 2]
  int limbs;
};

// Butterflies of the stages log_m in [s0, s1) (forward, increasing) inside a shared-memory tile of `rows`
// consecutive rows of nb words (row `hi0 + rr` of the Na x Nb matrix), stored padded.
__device__ void row_stages_forward(uint32_t* t, int rows, int log_nb, int hi0, int s0, int s1, int log_n, int log_n1,
                                   const uint32_t* w, const uint32_t* ws, uint32_t q) {
  int half_row = 1 << (log_nb - 1);
  int total = rows * half_row;
  for (int s = s0; s < s1; ++s) {
    int log_t = log_n - 1 - s;  // distance t = N / (2m) <= nb / 2
    for (int k = threadIdx.x; k < total; k += blockDim.x) {
      int rr = k >> (log_nb - 1), kk = k & (half_row - 1);
      int blk = kk >> log_t, off = kk & ((1 << log_t) - 1);
      int jl = (blk << (log_t + 1)) + off;
      int i = ((hi0 + rr) << (log_nb - 1 - log_t)) + blk;
      int ti = tw_index(s, i, log_n1);
      int a = pad((rr << log_nb) + jl), b = pad((rr << log_nb) + jl + (1 << log_t));
      uint32_t hi = t[a], v = shoup(t[b], __ldg(w + ti), __ldg(ws + ti), q);
      t[a] = add_mod(hi, v, q);
      t[b] = sub_mod(hi, v, q);
    }
    __syncthreads();
  }
}

__device__ void row_stages_inverse(uint32_t* t, int rows, int log_nb, int hi0, int s0, int s1, int log_n, int log_n1,
                                   const uint32_t* w, const uint32_t* ws, const uint32_t* last,
                                   const uint32_t* lasts, uint32_t q) {
  int half_row = 1 << (log_nb - 1);
  int total = rows * half_row;
  for (int s = s1 - 1; s >= s0; --s) {
    int log_t = log_n - 1 - s;
    for (int k = threadIdx.x; k < total; k += blockDim.x) {
      int rr = k >> (log_nb - 1), kk = k & (half_row - 1);
      int blk = kk >> log_t, off = kk & ((1 << log_t) - 1);
      int jl = (blk << (log_t + 1)) + off;
      int a = pad((rr << log_nb) + jl), b = pad((rr << log_nb) + jl + (1 << log_t));
      uint32_t hi = t[a], lo = t[b];
      uint32_t sum = add_mod(hi, lo, q), dif = sub_mod(hi, lo, q);
      if (s == 0) {
        t[a] = shoup(sum, __ldg(last), __ldg(lasts), q);
        t[b] = shoup(dif, __ldg(last + 1), __ldg(lasts + 1), q);
      } else {
        int i = ((hi0 + rr) << (log_nb - 1 - log_t)) + blk;
        int ti = tw_index(s, i, log_n1);
        t[a] = sum;
        t[b] = shoup(dif, __ldg(w + ti), __ldg(ws + ti), q);
      }
    }
    __syncthreads();
  }
}

// Row pass. Each block: `rows` consecutive rows of nb words (one tile of `rows << log_nb` consecutive words s of
// one polynomial), stages [s0, log_n). Forward: natural order in, slot order out; inverse: slot order in, natural
// order out (stages [s0, log_n) in reverse, and the last stage when s0 = 0).
__global__ void row_pass(const uint32_t* __restrict__ in, uint32_t* __restrict__ out, Tables tab, int log_n,
                         int log_nb, int rows, int s0, int inverse) {
  extern __shared__ uint32_t tile[];
  int n = 1 << log_n, log_n1 = log_n - 5, n1 = 1 << log_n1;
  int size = rows << log_nb;
  int tiles = n / size;
  long poly = blockIdx.x / tiles;
  int tile_id = blockIdx.x % tiles;
  int limb = static_cast<int>(poly % tab.limbs);
  uint32_t q = tab.q[limb];
  const uint32_t* w = tab.w + static_cast<long>(limb) * n;
  const uint32_t* ws = tab.ws + static_cast<long>(limb) * n;
  int base = tile_id * size;  // first s of the tile (a multiple of 32)
  const uint32_t* src = in + poly * n;
  uint32_t* dst = out + poly * n;
  int per_c = size >> 5;  // tile words per residue class c = s mod 32
  if (!inverse) {
    for (int j = threadIdx.x; j < size; j += blockDim.x) tile[pad(j)] = src[base + j];
    __syncthreads();
    row_stages_forward(tile, rows, log_nb, base >> log_nb, s0, log_n, log_n, log_n1, w, ws, q);
    for (int e = threadIdx.x; e < size; e += blockDim.x) {
      int c = e / per_c, rr = e - c * per_c;  // position c N1 + base / 32 + rr holds s = base + 32 rr + c
      dst[c * n1 + (base >> 5) + rr] = tile[pad((rr << 5) + c)];
    }
  } else {
    for (int e = threadIdx.x; e < size; e += blockDim.x) {
      int c = e / per_c, rr = e - c * per_c;
      tile[pad((rr << 5) + c)] = src[c * n1 + (base >> 5) + rr];
    }
    __syncthreads();
    row_stages_inverse(tile, rows, log_nb, base >> log_nb, s0, log_n, log_n, log_n1, w, ws,
                       tab.last + 2 * limb, tab.lasts + 2 * limb, q);
    for (int j = threadIdx.x; j < size; j += blockDim.x) dst[base + j] = tile[pad(j)];
  }
}

// Column pass: the stages log_m < log_na, whose pairs are na-row apart in the Na x Nb matrix of one polynomial;
// each block transforms kColumns adjacent columns (a tile [na][kColumns], natural order in and out).
__global__ void column_pass(const uint32_t* __restrict__ in, uint32_t* __restrict__ out, Tables tab, int log_n,
                            int log_na, int inverse) {
  extern __shared__ uint32_t tile[];
  int n = 1 << log_n, log_nb = log_n - log_na, nb = 1 << log_nb, na = 1 << log_na;
  int log_n1 = log_n - 5;
  int tiles = nb / kColumns;
  long poly = blockIdx.x / tiles;
  int lo0 = (blockIdx.x % tiles) * kColumns;
  int limb = static_cast<int>(poly % tab.limbs);
  uint32_t q = tab.q[limb];
  const uint32_t* w = tab.w + static_cast<long>(limb) * n;
  const uint32_t* ws = tab.ws + static_cast<long>(limb) * n;
  const uint32_t* src = in + poly * n;
  uint32_t* dst = out + poly * n;
  int size = na * kColumns;
  for (int e = threadIdx.x; e < size; e += blockDim.x) {
    int h = e / kColumns, c = e % kColumns;
    tile[e] = src[h * nb + lo0 + c];
  }
  __syncthreads();
  int total = size >> 1;
  for (int step = 0; step < log_na; ++step) {
    int s = inverse ? log_na - 1 - step : step;  // stage log2(m)
    int log_th = log_na - 1 - s;                 // pair distance in rows
    for (int k = threadIdx.x; k < total; k += blockDim.x) {
      int c = k % kColumns, kh = k / kColumns;
      int blk = kh >> log_th, off = kh & ((1 << log_th) - 1);
      int h1 = (blk << (log_th + 1)) + off;
      int a = h1 * kColumns + c, b = a + (kColumns << log_th);
      uint32_t hi = tile[a], lo = tile[b];
      if (!inverse) {
        int ti = tw_index(s, blk, log_n1);
        uint32_t v = shoup(lo, __ldg(w + ti), __ldg(ws + ti), q);
        tile[a] = add_mod(hi, v, q);
        tile[b] = sub_mod(hi, v, q);
      } else {
        uint32_t sum = add_mod(hi, lo, q), dif = sub_mod(hi, lo, q);
        if (s == 0) {
          tile[a] = shoup(sum, __ldg(tab.last + 2 * limb), __ldg(tab.lasts + 2 * limb), q);
          tile[b] = shoup(dif, __ldg(tab.last + 2 * limb + 1), __ldg(tab.lasts + 2 * limb + 1), q);
        } else {
          int ti = tw_index(s, blk, log_n1);
          tile[a] = sum;
          tile[b] = shoup(dif, __ldg(w + ti), __ldg(ws + ti), q);
        }
      }
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < size; e += blockDim.x) {
    int h = e / kColumns, c = e % kColumns;
    dst[h * nb + lo0 + c] = tile[e];
  }
}

// One launch of the schedule: a row pass (column = false) or a column pass, its grid and shared memory, and whether
// it reads x (else the scratch buffer) and writes out (else the scratch buffer).
struct Pass {
  bool column;
  unsigned blocks;
  size_t shared;
  int log_nb, rows, s0, log_na;
  bool from_x, to_out;
};

// The launches of one transform of `polys` rows of N = 2^log_n words (one or two, in order).
int schedule(int log_n, int64_t polys, int inverse, Pass passes[2]) {
  int64_t n = int64_t{1} << log_n;
  if (log_n <= kOneKernelLogN) {
    passes[0] = Pass{false, static_cast<unsigned>(polys), static_cast<size_t>(n + n / 32) * sizeof(uint32_t), log_n,
                     1, 0, 0, true, true};
    return 1;
  }
  int log_nb = (log_n + 1) / 2, log_na = log_n - log_nb;
  Pass row{false, static_cast<unsigned>(polys * (n / kRowTile)), (kRowTile + kRowTile / 32) * sizeof(uint32_t),
           log_nb, kRowTile >> log_nb, log_na, log_na, false, false};
  Pass col{true, static_cast<unsigned>(polys * ((int64_t{1} << log_nb) / kColumns)),
           (size_t{1} << log_na) * kColumns * sizeof(uint32_t), log_nb, 0, 0, log_na, false, false};
  Pass& first = inverse ? row : col;
  Pass& second = inverse ? col : row;
  first.from_x = true;
  second.to_out = true;
  passes[0] = first;
  passes[1] = second;
  return 2;
}

}  // namespace

#ifndef CROSSFHE_GPU_EMULATE

namespace {

int log2_exact(int64_t v) {
  int k = 0;
  while ((int64_t{1} << k) < v) ++k;
  return (int64_t{1} << k) == v ? k : -1;
}

ffi::Error NttImpl(cudaStream_t stream, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q, ffi::Buffer<ffi::U32> w,
                   ffi::Buffer<ffi::U32> ws, ffi::Buffer<ffi::U32> last, ffi::Buffer<ffi::U32> lasts, int32_t inverse,
                   int32_t full, ffi::ResultBuffer<ffi::U32> out, ffi::ResultBuffer<ffi::U32> scratch) {
  (void)full;
  auto dims = x.dimensions();
  if (dims.size() < 2) return ffi::Error::InvalidArgument("crossfhe GPU NTT: x must be [..., limbs, N]");
  int64_t n = dims[dims.size() - 1], limbs = dims[dims.size() - 2];
  int log_n = log2_exact(n);
  if (log_n < 6 || log_n > 17) return ffi::Error::InvalidArgument("crossfhe GPU NTT: N must be 2^6 .. 2^17");
  if (static_cast<int64_t>(q.element_count()) != limbs || static_cast<int64_t>(w.element_count()) != limbs * n ||
      static_cast<int64_t>(ws.element_count()) != limbs * n ||
      static_cast<int64_t>(last.element_count()) != 2 * limbs ||
      static_cast<int64_t>(lasts.element_count()) != 2 * limbs ||
      scratch->element_count() != x.element_count() || out->element_count() != x.element_count())
    return ffi::Error::InvalidArgument("crossfhe GPU NTT: the tables or results do not match x's limbs and N");
  int64_t polys = static_cast<int64_t>(x.element_count()) / n;
  if (polys == 0) return ffi::Error::Success();
  Tables tab{q.typed_data(), w.typed_data(), ws.typed_data(), last.typed_data(), lasts.typed_data(),
             static_cast<int>(limbs)};
  Pass passes[2];
  int count = schedule(log_n, polys, inverse, passes);
  for (int i = 0; i < count; ++i) {
    const Pass& p = passes[i];
    const uint32_t* src = p.from_x ? x.typed_data() : scratch->typed_data();
    uint32_t* dst = p.to_out ? out->typed_data() : scratch->typed_data();
    if (p.column) {
      column_pass<<<p.blocks, kThreads, p.shared, stream>>>(src, dst, tab, log_n, p.log_na, inverse);
    } else {
      row_pass<<<p.blocks, kThreads, p.shared, stream>>>(src, dst, tab, log_n, p.log_nb, p.rows, p.s0, inverse);
    }
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
      return ffi::Error::Internal(std::string("crossfhe GPU NTT: launch failed: ") + cudaGetErrorString(err));
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_gpu_ntt_ffi, NttImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()  // x
                                  .Arg<ffi::Buffer<ffi::U32>>()  // q
                                  .Arg<ffi::Buffer<ffi::U32>>()  // w
                                  .Arg<ffi::Buffer<ffi::U32>>()  // w_shoup
                                  .Arg<ffi::Buffer<ffi::U32>>()  // inv_last
                                  .Arg<ffi::Buffer<ffi::U32>>()  // inv_last_shoup
                                  .Attr<int32_t>("inverse")
                                  .Attr<int32_t>("full")
                                  .Ret<ffi::Buffer<ffi::U32>>()   // out
                                  .Ret<ffi::Buffer<ffi::U32>>());  // scratch (the pass between the two launches)

extern "C" int cf_gpu_abi_version(void) { return 1; }

#else

// The same kernels and schedule run on the CPU, one thread per block (tests: every loop between two barriers is
// a set of independent butterflies, so one thread doing all of them in turn computes what the block computes).
extern "C" void cf_gpu_ntt_emulate(const uint32_t* x, uint32_t* out, uint32_t* scratch, int64_t polys, int log_n,
                                   int limbs, const uint32_t* q, const uint32_t* w, const uint32_t* ws,
                                   const uint32_t* last, const uint32_t* lasts, int inverse) {
  Tables tab{q, w, ws, last, lasts, limbs};
  Pass passes[2];
  int count = schedule(log_n, polys, inverse, passes);
  blockDim.x = 1;
  threadIdx.x = 0;
  for (int i = 0; i < count; ++i) {
    const Pass& p = passes[i];
    const uint32_t* src = p.from_x ? x : scratch;
    uint32_t* dst = p.to_out ? out : scratch;
    for (unsigned b = 0; b < p.blocks; ++b) {
      blockIdx.x = b;
      if (p.column) {
        column_pass(src, dst, tab, log_n, p.log_na, inverse);
      } else {
        row_pass(src, dst, tab, log_n, p.log_nb, p.rows, p.s0, inverse);
      }
    }
  }
}

#endif
