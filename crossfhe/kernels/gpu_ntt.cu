// The negacyclic RNS NTT of crossfhe.ring.ntt as CUDA kernels behind one XLA FFI custom call (the GPU kernel set).
//
// Function: the forward transform maps coefficients a_0..a_{N-1} (uint32, [0, q)) of each row of x
// uint32[..., L, N] to the evaluations at the odd powers of psi in slot order, and the inverse maps them back
// (crossfhe/ring/ntt.py's docstring); row r uses modulus q[r mod L] and the plan's tables w, w_shoup [L, N]
// (psi^brv(i) at index i, with their Shoup companions floor(w 2^32 / q)), and for the inverse inv_last,
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
// The plan's tables are in the textbook order (the GPU set's plans: crossfhe.ring.ntt.NATURAL_FROM): the twiddle of
// block i of the stage with m blocks is word m + i, so a warp's twiddle loads are consecutive words in every stage.
// Each thread does three (or, in the launch variants with bit 0 set, four) stages on 8 (16) elements in registers
// between two barriers; the passes' global accesses are 16 bytes wide. Arithmetic: Shoup products with __umulhi
// (one instruction), every value kept in [0, q): moduli below 2^31.

#include <cstdint>
#include <string>

#ifndef CROSSFHE_GPU_EMULATE
#include <cuda_runtime.h>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
#endif

namespace {

// Variants of the launch (the `variant` attribute; 0 the default): bit 0 chooses 3 (0) or 4 (1) stages per group in
// registers, bits 1-2 the threads per block (0: 256, 1: 128, 2: 512). Every variant computes the same words.
__host__ __device__ constexpr int variant_group(int variant) { return (variant & 1) ? 4 : 3; }
__host__ __device__ constexpr int variant_threads(int variant) {
  return ((variant >> 1) & 3) == 1 ? 128 : ((variant >> 1) & 3) == 2 ? 512 : 256;
}
constexpr int kVariants = 6;
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

__device__ __forceinline__ int pad(int j) { return j + (j >> 5); }

// Four consecutive words at a 16-byte aligned address of global memory, as one access.
__device__ __forceinline__ void load4(const uint32_t* p, uint32_t v[4]) {
#ifdef CROSSFHE_GPU_EMULATE
  for (int k = 0; k < 4; ++k) v[k] = p[k];
#else
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  v[0] = u.x;
  v[1] = u.y;
  v[2] = u.z;
  v[3] = u.w;
#endif
}

__device__ __forceinline__ void store4(uint32_t* p, const uint32_t v[4]) {
#ifdef CROSSFHE_GPU_EMULATE
  for (int k = 0; k < 4; ++k) p[k] = v[k];
#else
  *reinterpret_cast<uint4*>(p) = make_uint4(v[0], v[1], v[2], v[3]);
#endif
}

struct Tables {
  const uint32_t* q;      // [L]
  const uint32_t* w;      // [L, N]
  const uint32_t* ws;     // [L, N]
  const uint32_t* last;   // [L, 2]
  const uint32_t* lasts;  // [L, 2]
  int limbs;
};

// Where a tile's lines live: element jl of line `line` is shared word addr(line, jl) and natural index
// global(line, jl) of the polynomial. Rows: `rows` consecutive rows of nb words (row hi0 + line of the Na x Nb
// matrix), padded by one word in 32. Columns: kColumns adjacent columns (column lo0 + line), one row of kColumns words
// per matrix row.
struct RowLines {
  int log_nb, hi0;
  __device__ __forceinline__ int addr(int line, int jl) const { return pad((line << log_nb) + jl); }
  __device__ __forceinline__ int global(int line, int jl) const { return ((hi0 + line) << log_nb) + jl; }
};

struct ColumnLines {
  int log_nb, lo0;
  __device__ __forceinline__ int addr(int line, int jl) const { return jl * kColumns + line; }
  __device__ __forceinline__ int global(int line, int jl) const { return (jl << log_nb) + lo0 + line; }
};

// R consecutive stages (line stages u .. u + R - 1, whole-transform stages s_base + u ..) on every line of a tile:
// each thread takes groups of 2^R elements (line index j0 + m dmin, m < 2^R, dmin = 2^(log_len - u - R)) into
// registers and does the group's R 2^(R-1) butterflies there. Forward: Cooley-Tukey in increasing stage order;
// inverse: Gentleman-Sande in decreasing order, whole-transform stage 0 folding in N^-1. The butterfly of stage s on
// natural index j (its upper element) takes twiddle j >> (log_n - s) of that stage. kLineFastest: consecutive threads
// take consecutive lines (columns: no bank conflicts), else consecutive groups of one line.
template <int R, bool kLineFastest, bool kInverse, class Lines>
__device__ __forceinline__ void group_stages(uint32_t* t, const Lines& lines_of, int lines, int log_len, int u,
                                             int s_base, int log_n, const uint32_t* w,
                                             const uint32_t* ws, const uint32_t* last, const uint32_t* lasts,
                                             uint32_t q) {
  constexpr int kSize = 1 << R;
  const int log_dmin = log_len - u - R;
  const int log_groups = log_len - R;  // groups per line
  const int total = lines << log_groups;
  for (int g = threadIdx.x; g < total; g += blockDim.x) {
    int line, gid;
    if (kLineFastest) {
      line = g % lines;
      gid = g / lines;
    } else {
      line = g >> log_groups;
      gid = g & ((1 << log_groups) - 1);
    }
    const int j0 = ((gid >> log_dmin) << (log_len - u)) + (gid & ((1 << log_dmin) - 1));
    uint32_t v[kSize];  // addresses are recomputed at the store: kept, 16 of them went to local memory (R = 4)
#pragma unroll
    for (int m = 0; m < kSize; ++m) v[m] = t[lines_of.addr(line, j0 + (m << log_dmin))];
#pragma unroll
    for (int step = 0; step < R; ++step) {
      const int k = kInverse ? R - 1 - step : step;
      const int half = 1 << (R - 1 - k);
      const int s = s_base + u + k;
      // the stage's 2^k twiddles: butterfly (m, m + half) takes number m >> (R - k), read at its first m
      uint32_t tw[1 << (R - 1)], tws[1 << (R - 1)];
      if (!kInverse || s != 0) {
#pragma unroll
        for (int p = 0; p < (1 << (R - 1)); ++p) {  // a constant trip count, so that tw stays in registers
          if (p >= (1 << k)) break;
          const int ti = (1 << s) + (lines_of.global(line, j0 + ((p << (R - k)) << log_dmin)) >> (log_n - s));
          tw[p] = __ldg(w + ti);
          tws[p] = __ldg(ws + ti);
        }
      }
#pragma unroll
      for (int m = 0; m < kSize; ++m) {
        if (m & half) continue;
        const uint32_t hi = v[m], lo = v[m | half];
        const int p = m >> (R - k);
        if (!kInverse) {
          const uint32_t x = shoup(lo, tw[p], tws[p], q);
          v[m] = add_mod(hi, x, q);
          v[m | half] = sub_mod(hi, x, q);
        } else {
          const uint32_t sum = add_mod(hi, lo, q), dif = sub_mod(hi, lo, q);
          if (s == 0) {
            v[m] = shoup(sum, __ldg(last), __ldg(lasts), q);
            v[m | half] = shoup(dif, __ldg(last + 1), __ldg(lasts + 1), q);
          } else {
            v[m] = sum;
            v[m | half] = shoup(dif, tw[p], tws[p], q);
          }
        }
      }
    }
#pragma unroll
    for (int m = 0; m < kSize; ++m) t[lines_of.addr(line, j0 + (m << log_dmin))] = v[m];
  }
}

// Every stage of a tile's lines, in groups of kGroup (3 or 4; the last group takes what remains), a barrier after
// each. The group size is a template argument so that each kernel holds only its own groups' registers.
template <int kGroup, bool kLineFastest, bool kInverse, class Lines>
__device__ void line_stages(uint32_t* t, const Lines& lines_of, int lines, int log_len, int s_base, int log_n,
                            const uint32_t* w, const uint32_t* ws, const uint32_t* last, const uint32_t* lasts,
                            uint32_t q) {
  const int groups = (log_len + kGroup - 1) / kGroup;
  for (int step = 0; step < groups; ++step) {
    const int u = kGroup * (kInverse ? groups - 1 - step : step);
    const int r = log_len - u < kGroup ? log_len - u : kGroup;
    if constexpr (kGroup == 4) {
      if (r == 4) {
        group_stages<4, kLineFastest, kInverse>(t, lines_of, lines, log_len, u, s_base, log_n, w, ws, last, lasts,
                                                q);
      }
    }
    if (r == 3) {
      group_stages<3, kLineFastest, kInverse>(t, lines_of, lines, log_len, u, s_base, log_n, w, ws, last, lasts, q);
    } else if (r == 2) {
      group_stages<2, kLineFastest, kInverse>(t, lines_of, lines, log_len, u, s_base, log_n, w, ws, last, lasts, q);
    } else if (r == 1) {
      group_stages<1, kLineFastest, kInverse>(t, lines_of, lines, log_len, u, s_base, log_n, w, ws, last, lasts, q);
    }
    __syncthreads();
  }
}

// Row pass. Each block: `rows` consecutive rows of nb words (one tile of `rows << log_nb` consecutive words s of
// one polynomial), stages [s0, log_n). Forward: natural order in, slot order out; inverse: slot order in, natural
// order out (stages [s0, log_n) in reverse, and the last stage when s0 = 0).
template <int kGroup>
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
  // 16-byte global accesses: every run of the tile (a row's words, a residue class's) is 4-aligned from N = 128
  const bool vec = log_n >= 7;
  if (!inverse) {
    for (int j = 4 * threadIdx.x; j < size; j += 4 * blockDim.x) {
      uint32_t v[4];
      load4(src + base + j, v);
      for (int k = 0; k < 4; ++k) tile[pad(j) + k] = v[k];  // pad(j + k) = pad(j) + k: j is a multiple of 4
    }
    __syncthreads();
    line_stages<kGroup, false, false>(tile, RowLines{log_nb, base >> log_nb}, rows, log_nb, s0, log_n, w, ws, nullptr,
                                      nullptr, q);
    if (vec) {
      for (int e = 4 * threadIdx.x; e < size; e += 4 * blockDim.x) {
        int c = e / per_c, rr = e - c * per_c;  // position c N1 + base / 32 + rr holds s = base + 32 rr + c
        uint32_t v[4];
        for (int k = 0; k < 4; ++k) v[k] = tile[pad(((rr + k) << 5) + c)];
        store4(dst + c * n1 + (base >> 5) + rr, v);
      }
    } else {
      for (int e = threadIdx.x; e < size; e += blockDim.x) {
        int c = e / per_c, rr = e - c * per_c;
        dst[c * n1 + (base >> 5) + rr] = tile[pad((rr << 5) + c)];
      }
    }
  } else {
    if (vec) {
      for (int e = 4 * threadIdx.x; e < size; e += 4 * blockDim.x) {
        int c = e / per_c, rr = e - c * per_c;
        uint32_t v[4];
        load4(src + c * n1 + (base >> 5) + rr, v);
        for (int k = 0; k < 4; ++k) tile[pad(((rr + k) << 5) + c)] = v[k];
      }
    } else {
      for (int e = threadIdx.x; e < size; e += blockDim.x) {
        int c = e / per_c, rr = e - c * per_c;
        tile[pad((rr << 5) + c)] = src[c * n1 + (base >> 5) + rr];
      }
    }
    __syncthreads();
    line_stages<kGroup, false, true>(tile, RowLines{log_nb, base >> log_nb}, rows, log_nb, s0, log_n, w, ws,
                                     tab.last + 2 * limb, tab.lasts + 2 * limb, q);
    for (int j = 4 * threadIdx.x; j < size; j += 4 * blockDim.x) {
      uint32_t v[4];
      for (int k = 0; k < 4; ++k) v[k] = tile[pad(j) + k];
      store4(dst + base + j, v);
    }
  }
}

// Column pass: the stages log_m < log_na, whose pairs are na-row apart in the Na x Nb matrix of one polynomial;
// each block transforms kColumns adjacent columns (a tile [na][kColumns], natural order in and out).
template <int kGroup>
__global__ void column_pass(const uint32_t* __restrict__ in, uint32_t* __restrict__ out, Tables tab, int log_n,
                            int log_na, int inverse) {
  extern __shared__ uint32_t tile[];
  int n = 1 << log_n, log_nb = log_n - log_na, nb = 1 << log_nb, na = 1 << log_na;
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
  for (int e = 4 * threadIdx.x; e < size; e += 4 * blockDim.x) {
    int h = e / kColumns, c = e % kColumns;
    load4(src + h * nb + lo0 + c, tile + e);
  }
  __syncthreads();
  if (inverse) {
    line_stages<kGroup, true, true>(tile, ColumnLines{log_nb, lo0}, kColumns, log_na, 0, log_n, w, ws,
                                    tab.last + 2 * limb, tab.lasts + 2 * limb, q);
  } else {
    line_stages<kGroup, true, false>(tile, ColumnLines{log_nb, lo0}, kColumns, log_na, 0, log_n, w, ws, nullptr,
                                     nullptr, q);
  }
  for (int e = 4 * threadIdx.x; e < size; e += 4 * blockDim.x) {
    int h = e / kColumns, c = e % kColumns;
    store4(dst + h * nb + lo0 + c, tile + e);
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
                   int32_t full, int32_t variant, ffi::ResultBuffer<ffi::U32> out,
                   ffi::ResultBuffer<ffi::U32> scratch) {
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
  for (const void* p : {static_cast<const void*>(x.typed_data()), static_cast<const void*>(out->typed_data()),
                        static_cast<const void*>(scratch->typed_data())}) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)  // the passes' 16-byte accesses
      return ffi::Error::InvalidArgument("crossfhe GPU NTT: a buffer is not 16-byte aligned");
  }
  Tables tab{q.typed_data(), w.typed_data(), ws.typed_data(), last.typed_data(), lasts.typed_data(),
             static_cast<int>(limbs)};
  if (variant < 0 || variant >= kVariants)
    return ffi::Error::InvalidArgument("crossfhe GPU NTT: unknown launch variant");
  const int group = variant_group(variant), threads = variant_threads(variant);
  Pass passes[2];
  int count = schedule(log_n, polys, inverse, passes);
  for (int i = 0; i < count; ++i) {
    const Pass& p = passes[i];
    const uint32_t* src = p.from_x ? x.typed_data() : scratch->typed_data();
    uint32_t* dst = p.to_out ? out->typed_data() : scratch->typed_data();
    if (p.column) {
      if (group == 4) {
        column_pass<4><<<p.blocks, threads, p.shared, stream>>>(src, dst, tab, log_n, p.log_na, inverse);
      } else {
        column_pass<3><<<p.blocks, threads, p.shared, stream>>>(src, dst, tab, log_n, p.log_na, inverse);
      }
    } else {
      if (group == 4) {
        row_pass<4><<<p.blocks, threads, p.shared, stream>>>(src, dst, tab, log_n, p.log_nb, p.rows, p.s0, inverse);
      } else {
        row_pass<3><<<p.blocks, threads, p.shared, stream>>>(src, dst, tab, log_n, p.log_nb, p.rows, p.s0, inverse);
      }
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
                                  .Attr<int32_t>("variant")
                                  .Ret<ffi::Buffer<ffi::U32>>()   // out
                                  .Ret<ffi::Buffer<ffi::U32>>());  // scratch (the pass between the two launches)

extern "C" int cf_gpu_abi_version(void) { return 1; }

#else

// The same kernels and schedule run on the CPU, one thread per block (tests: every loop between two barriers is
// a set of independent butterflies, so one thread doing all of them in turn computes what the block computes).
extern "C" void cf_gpu_ntt_emulate(const uint32_t* x, uint32_t* out, uint32_t* scratch, int64_t polys, int log_n,
                                   int limbs, const uint32_t* q, const uint32_t* w, const uint32_t* ws,
                                   const uint32_t* last, const uint32_t* lasts, int inverse, int variant) {
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
        if (variant_group(variant) == 4) {
          column_pass<4>(src, dst, tab, log_n, p.log_na, inverse);
        } else {
          column_pass<3>(src, dst, tab, log_n, p.log_na, inverse);
        }
      } else {
        if (variant_group(variant) == 4) {
          row_pass<4>(src, dst, tab, log_n, p.log_nb, p.rows, p.s0, inverse);
        } else {
          row_pass<3>(src, dst, tab, log_n, p.log_nb, p.rows, p.s0, inverse);
        }
      }
    }
  }
}

#endif
