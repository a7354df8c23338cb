// The GPU kernel set's CUDA kernels behind XLA FFI custom calls: the negacyclic RNS NTT of crossfhe.ring.ntt (this
// header), and the TFHE grouped blind rotation in one kernel (its own section below, which reuses the NTT's stages).
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
#include <cooperative_groups.h>
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

// One limb's modulus and tables as a transform reads them: twiddles w, ws [N] (textbook order) and, for the inverse,
// last, lasts [2]. A tile of one limb passes it as its own table-of-line (every line the same limb).
struct LimbTables {
  const uint32_t* w;
  const uint32_t* ws;
  const uint32_t* last;
  const uint32_t* lasts;
  uint32_t q;
  __device__ __forceinline__ const LimbTables& of(int) const { return *this; }
};

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
template <int R, bool kLineFastest, bool kInverse, class Lines, class TabOf>
__device__ __forceinline__ void group_stages(uint32_t* t, const Lines& lines_of, int lines, int log_len, int u,
                                             int s_base, int log_n, const TabOf& tab_of) {
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
    const LimbTables tb = tab_of.of(line);
    const uint32_t q = tb.q;
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
          tw[p] = __ldg(tb.w + ti);
          tws[p] = __ldg(tb.ws + ti);
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
            v[m] = shoup(sum, __ldg(tb.last), __ldg(tb.lasts), q);
            v[m | half] = shoup(dif, __ldg(tb.last + 1), __ldg(tb.lasts + 1), q);
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
template <int kGroup, bool kLineFastest, bool kInverse, class Lines, class TabOf>
__device__ void line_stages(uint32_t* t, const Lines& lines_of, int lines, int log_len, int s_base, int log_n,
                            const TabOf& tab_of) {
  const int groups = (log_len + kGroup - 1) / kGroup;
  for (int step = 0; step < groups; ++step) {
    const int u = kGroup * (kInverse ? groups - 1 - step : step);
    const int r = log_len - u < kGroup ? log_len - u : kGroup;
    if constexpr (kGroup == 4) {
      if (r == 4) {
        group_stages<4, kLineFastest, kInverse>(t, lines_of, lines, log_len, u, s_base, log_n, tab_of);
      }
    }
    if (r == 3) {
      group_stages<3, kLineFastest, kInverse>(t, lines_of, lines, log_len, u, s_base, log_n, tab_of);
    } else if (r == 2) {
      group_stages<2, kLineFastest, kInverse>(t, lines_of, lines, log_len, u, s_base, log_n, tab_of);
    } else if (r == 1) {
      group_stages<1, kLineFastest, kInverse>(t, lines_of, lines, log_len, u, s_base, log_n, tab_of);
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
    line_stages<kGroup, false, false>(tile, RowLines{log_nb, base >> log_nb}, rows, log_nb, s0, log_n,
                                      LimbTables{w, ws, nullptr, nullptr, q});
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
    line_stages<kGroup, false, true>(tile, RowLines{log_nb, base >> log_nb}, rows, log_nb, s0, log_n,
                                     LimbTables{w, ws, tab.last + 2 * limb, tab.lasts + 2 * limb, q});
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
    line_stages<kGroup, true, true>(tile, ColumnLines{log_nb, lo0}, kColumns, log_na, 0, log_n,
                                    LimbTables{w, ws, tab.last + 2 * limb, tab.lasts + 2 * limb, q});
  } else {
    line_stages<kGroup, true, false>(tile, ColumnLines{log_nb, lo0}, kColumns, log_na, 0, log_n,
                                     LimbTables{w, ws, nullptr, nullptr, q});
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


// ------------------------------------------------------------------------------------------------------------------
// The grouped blind rotation (crossfhe.core.ggsw.group_step, every step after the first) in one kernel
// ------------------------------------------------------------------------------------------------------------------
//
// One block (or a cluster of `cluster` blocks: Layout) per accumulator of the batch runs every step:
// ACC <- ACC + sum_t (X^(e_t) ACC_t - ACC_t), ACC_t = GGSW_t [x] ACC, ACC uint32 [C = 2^nu, K1 = k + 1, L, N] in the
// coefficient domain (residues), the GGSWs of step g read from keys [G, T, R = K1 l, K1, L, N] (NTT domain, slot
// order). Per step and source component j: the l signed digits of
// each of ACC_j's K1 polynomials (crossfhe.math.decompose.gadget_digits_rns, approximate case: the fixed-point CRT
// sum, rounded, balanced digits) as residues in shared memory, their forward NTTs there (stage order: stage index s
// is slot position (s mod 32) N/32 + s / 32), then per slot the T products sum_r ev_r GGSW_t[r] and their rotations
// in the evaluation domain: X^e is the pointwise product with psi^(E_s e mod 2N), E_s the odd exponent of slot s's
// root (a table), and for nu > 0 the component move of crossfhe.core.ggsw.rotate_components. The difference D is
// summed over t and j in shared memory, one inverse NTT per step, and added to ACC. Exact modular arithmetic
// throughout, every value canonical: the words of the XLA group step. Shared memory: (L R + L C K1) / cluster lines of
// N + N/32 words a block.
struct RotationArgs {
  const uint32_t* acc_in;  // [B, C, K1, L, N]
  uint32_t* acc;           // [B, C, K1, L, N]: the result (also the running accumulator)
  const int32_t* exps;     // [B, G, T] in [0, 2 C N)
  const uint32_t* keys;    // [G, T, R, K1, L, N]
  const uint32_t* q;       // [L]
  const uint32_t* w;       // [L, N] forward twiddles (textbook order) and their Shoup companions
  const uint32_t* ws;
  const uint32_t* wi;      // [L, N] inverse twiddles and companions
  const uint32_t* wis;
  const uint32_t* last;    // [L, 2]: N^-1, psi^-1 N^-1 and companions
  const uint32_t* lasts;
  const uint32_t* hat_inv;   // [L]: (Q / q_i)^-1 mod q_i and companions
  const uint32_t* hat_invs;
  const uint32_t* words;     // [L, W]: floor(B^l 2^(32 F) / q_i) mod 2^(32 W)
  const uint32_t* pw;        // [L, 2N]: psi^i mod q_i and companions
  const uint32_t* pws;
  const int32_t* root_exp;   // [N]: E_s by stage index s
  int log_n, limbs, k1, comps, log_comps, levels, base_log, n_words, frac_words, steps, per;
  int cluster;  // blocks per accumulator (1, or 2, 4, 8 for one component: a thread-block cluster)
};

// Per-line tables of a tile whose lines are grouped by limb (`per_limb` consecutive lines each).
struct LinesByLimb {
  const uint32_t* q;
  const uint32_t* w;
  const uint32_t* ws;
  const uint32_t* last;
  const uint32_t* lasts;
  int n, per_limb, first;  // the tile's line 0 is line `first` of the limb-major order
  __device__ __forceinline__ LimbTables of(int line) const {
    const int limb = (first + line) / per_limb;
    return LimbTables{w + static_cast<long>(limb) * n, ws + static_cast<long>(limb) * n,
                      last ? last + 2 * limb : nullptr, lasts ? lasts + 2 * limb : nullptr, q[limb]};
  }
};

// Lines of whole polynomials (natural index jl), each N + N/32 words of shared memory.
struct PolyLines {
  int log_n;
  __device__ __forceinline__ int addr(int line, int jl) const { return pad((line << log_n) + jl); }
  __device__ __forceinline__ int global(int, int jl) const { return jl; }
};

constexpr int kMaxWords = 8;
constexpr int kMaxLimbs = 8;

// x mod q for any 64-bit x, q < 2^31, mu = floor(2^64 / q): the quotient estimate hi64(x mu) is floor(x / q) or one
// less, so one subtraction finishes.
__device__ __forceinline__ uint32_t barrett64(uint64_t x, uint64_t mu, uint32_t q) {
  const uint64_t r = x - __umul64hi(x, mu) * q;
  return static_cast<uint32_t>(r >= q ? r - q : r);
}

// Bits [pos, pos + width) (width <= 30) of the little-endian words e[0 .. nw), zero above.
__device__ __forceinline__ uint32_t word_bits(const uint32_t* e, int nw, int pos, int width) {
  const int wd = pos >> 5, o = pos & 31;
  uint32_t v = wd < nw ? e[wd] >> o : 0u;
  if (o + width > 32 && wd + 1 < nw) v |= e[wd + 1] << (32 - o);
  return v & ((1u << width) - 1u);
}

constexpr int kMaxLevels = 8;

// The l signed digits of the coefficient whose residues are x[0 .. L), MSB first (crossfhe.math.decompose.
// gadget_digits_rns, approximate case): d[0 .. l).
__device__ __forceinline__ void digits_of(const RotationArgs& a, const uint32_t* x, int32_t* d) {
  uint32_t e[kMaxWords];
  for (int w = 0; w < a.n_words; ++w) e[w] = 0;
  for (int i = 0; i < a.limbs; ++i) {
    const uint32_t y = shoup(x[i], a.hat_inv[i], a.hat_invs[i], a.q[i]);
    uint64_t carry = 0;
    for (int w = 0; w < a.n_words; ++w) {
      const uint64_t t = static_cast<uint64_t>(e[w]) + static_cast<uint64_t>(y) * a.words[i * a.n_words + w] + carry;
      e[w] = static_cast<uint32_t>(t);
      carry = t >> 32;
    }
  }
  const uint32_t* top = e + a.frac_words;
  const int nw = a.n_words - a.frac_words, k = a.base_log;
  const uint32_t b = 1u << k, half = 1u << (k - 1);
  uint32_t carry = e[a.frac_words - 1] >> 31;  // the rounding bit
  for (int j = 0; j < a.levels; ++j) {  // j counted from the least significant digit
    const uint32_t t = word_bits(top, nw, j * k, k) + carry;
    const bool neg = t >= half;
    d[a.levels - 1 - j] = static_cast<int32_t>(t - (neg ? b : 0u));
    carry = neg ? 1u : 0u;
  }
}

// The rotation's layout. Digit lines e = limb R + c l + j (L R of them) and sum lines d = limb C K1 + c' K1 + k
// (L C K1), both limb-major, N words each in shared memory at padded offsets. With `cluster` blocks per accumulator,
// block `rank` owns digit lines [rank E, (rank + 1) E) and sum lines [rank D, (rank + 1) D) (E = L R / cluster,
// D = L C K1 / cluster): its tile holds its E digit lines, then its D sum lines. It reads its siblings' digit lines
// through the cluster's distributed shared memory.
struct Layout {
  int n, n1, log_n, L, K1, C, R, outs, E, D, rank;
  long comp_words, acc_words, key_words;
  __device__ Layout(const RotationArgs& a, int rank_) {
    log_n = a.log_n;
    n = 1 << log_n;
    n1 = n >> 5;
    L = a.limbs;
    K1 = a.k1;
    C = a.comps;
    R = K1 * a.levels;
    outs = C * K1;
    E = L * R / a.cluster;
    D = L * outs / a.cluster;
    rank = rank_;
    comp_words = static_cast<long>(K1) * L * n;
    acc_words = C * comp_words;
    key_words = static_cast<long>(R) * K1 * L * n;
  }
  __device__ __forceinline__ int line(int local) const { return pad(local << log_n); }        // a line's start
  __device__ __forceinline__ int at(int local, int i) const { return pad((local << log_n) + i); }  // its word i
};

#ifdef CROSSFHE_GPU_EMULATE
// each emulated block's shared memory (the emulated cluster's blocks side by side)
constexpr long kEmuBlockWords = 1 << 16;
#endif

// The shared memory of block `rank` of this block's cluster (its own for rank == own).
__device__ __forceinline__ uint32_t* tile_of(int rank, int own) {
#ifdef CROSSFHE_GPU_EMULATE
  (void)own;
  return tile + rank * kEmuBlockWords;
#else
  extern __shared__ uint32_t tile[];
  if (rank == own) return tile;
  return cooperative_groups::this_cluster().map_shared_rank(tile, rank);
#endif
}

// The accumulator's words of sum line d (limb d / (C K1), component and k (d mod C K1)): [c' K1 + k, limb, N].
__device__ __forceinline__ long acc_offset(const Layout& g, int d) {
  return (static_cast<long>(d % g.outs) * g.L + d / g.outs) * g.n;
}

// Phase 0: the block's sum lines' words of the accumulator copied to the result (which then holds the running sum).
__device__ void rotation_start(const RotationArgs& a, long b, int rank) {
  const Layout g(a, rank);
  for (long i = threadIdx.x; i < static_cast<long>(g.D) * g.n; i += blockDim.x) {
    const long off = b * g.acc_words + acc_offset(g, rank * g.D + static_cast<int>(i >> g.log_n)) + (i & (g.n - 1));
    a.acc[off] = a.acc_in[off];
  }
}

// Phase 1 of step s, source component j: the digits of component j of the accumulator on the block's digit lines,
// then their forward NTTs (stage order). On the first component, the sum lines are zeroed (several components).
__device__ void rotation_digits(const RotationArgs& a, long b, int rank, int j) {
  const Layout g(a, rank);
  uint32_t* own = tile_of(rank, rank);
  if (j == 0 && g.C > 1)
    for (int i = threadIdx.x; i < (g.D << g.log_n); i += blockDim.x) own[g.line(g.E) + pad(i)] = 0;  // E N: 32 | it
  const uint32_t* src = a.acc + b * g.acc_words + j * g.comp_words;
  const int first = rank * g.E;
  for (int i = threadIdx.x; i < g.K1 * g.n; i += blockDim.x) {
    const int c = i >> g.log_n, jn = i & (g.n - 1);
    bool mine = false;  // does the block own a digit line of component c?
    for (int limb = 0; limb < g.L && !mine; ++limb) {
      const int e0 = limb * g.R + c * a.levels;
      mine = e0 < first + g.E && e0 + a.levels > first;
    }
    if (!mine) continue;
    uint32_t x[kMaxLimbs];
    for (int l = 0; l < g.L; ++l) x[l] = src[(c * g.L + l) * static_cast<long>(g.n) + jn];
    int32_t d[kMaxLevels];
    digits_of(a, x, d);
    for (int limb = 0; limb < g.L; ++limb) {
      for (int lev = 0; lev < a.levels; ++lev) {
        const int e = limb * g.R + c * a.levels + lev - first;
        if (e < 0 || e >= g.E) continue;
        const uint32_t m = d[lev] < 0 ? static_cast<uint32_t>(-d[lev]) : static_cast<uint32_t>(d[lev]);
        own[g.at(e, jn)] = (d[lev] < 0 && m != 0) ? a.q[limb] - m : m;
      }
    }
  }
  __syncthreads();
  line_stages<3, false, false>(own, PolyLines{g.log_n}, g.E, g.log_n, 0, g.log_n,
                               LinesByLimb{a.q, a.w, a.ws, nullptr, nullptr, g.n, g.R, first});
}

// Phase 2 of step s, source component j: per slot, the T products sum_r ev_r GGSW_t[r] and their rotations summed
// into the sum lines. One block per accumulator: every (limb, k) pair, read-modify-write into the destination and
// source components' lines. A cluster (one component): the block's own sum lines, each slot's sum in a register.
__device__ void rotation_products(const RotationArgs& a, long b, int rank, int s_step, int j, const uint64_t* mus) {
  const Layout g(a, rank);
  uint32_t* own = tile_of(rank, rank);
  const int32_t* ex = a.exps + (b * a.steps + s_step) * a.per;
  const uint32_t* key = a.keys + static_cast<long>(s_step) * a.per * g.key_words;
  const int pairs = a.cluster == 1 ? g.L * g.K1 : g.D;  // (limb, k) pairs this block computes
  for (int i = threadIdx.x; i < (pairs << g.log_n); i += blockDim.x) {
    const int p = i & (g.n - 1), pair = i >> g.log_n;
    // the pair's limb and k: a cluster's block takes its own sum lines (one component: line = limb K1 + k)
    const int d_line = a.cluster == 1 ? (pair / g.K1) * g.outs + pair % g.K1 : rank * g.D + pair;
    const int limb = d_line / g.outs, co = d_line % g.K1;
    const int s = ((p % g.n1) << 5) + p / g.n1;
    const uint32_t q = a.q[limb];
    const uint64_t mu = mus[limb];
    const uint32_t* pwl = a.pw + static_cast<long>(limb) * 2 * g.n;
    const uint32_t* pwsl = a.pws + static_cast<long>(limb) * 2 * g.n;
    const int es = a.root_exp[s];
    uint32_t own_sum = 0;  // one component: sum_t (X^(e_t) P_t - P_t) at this slot
    for (int t = 0; t < a.per; ++t) {
      const uint32_t* kt = key + t * g.key_words + (static_cast<long>(co) * g.L + limb) * g.n + p;
      uint32_t prod = 0;
      for (int r0 = 0; r0 < g.R; r0 += 4) {  // at most 4 products of residues below 2^31 in 64 bits, then reduce
        uint64_t sum = 0;
        for (int r = r0; r < g.R && r < r0 + 4; ++r) {
          const int e = limb * g.R + r;
          const uint32_t* ev = tile_of(e / g.E, rank);
          sum += static_cast<uint64_t>(ev[g.at(e % g.E, s)]) * __ldg(kt + static_cast<long>(r) * g.K1 * g.L * g.n);
        }
        prod = add_mod(prod, barrett64(sum, mu, q), q);
      }
      const int e = ex[t], lo = e & (g.C - 1), hi = e >> a.log_comps;
      const int dst = (j + lo) & (g.C - 1), power = hi + (dst < lo ? 1 : 0);
      const int idx = static_cast<int>((static_cast<long>(es) * power) & (2 * g.n - 1));
      const uint32_t rot = shoup(prod, pwl[idx], pwsl[idx], q);
      if (g.C == 1) {
        own_sum = add_mod(own_sum, sub_mod(rot, prod, q), q);
        continue;
      }
      // several components (one block per accumulator): the sum lines of limb `limb`, components dst and j
      uint32_t* dl = own + g.line(g.E + limb * g.outs);
      const int at_dst = pad(((dst * g.K1 + co) << g.log_n) + s), at_src = pad(((j * g.K1 + co) << g.log_n) + s);
      dl[at_dst] = add_mod(dl[at_dst], rot, q);
      dl[at_src] = sub_mod(dl[at_src], prod, q);
    }
    if (g.C == 1) own[g.at(g.E + d_line - rank * g.D, s)] = own_sum;
  }
  __syncthreads();
}

// Phase 3 of a step: the inverse NTTs of the block's sum lines, added to the accumulator's words.
__device__ void rotation_finish(const RotationArgs& a, long b, int rank) {
  const Layout g(a, rank);
  uint32_t* sums = tile_of(rank, rank) + g.line(g.E);
  line_stages<3, false, true>(sums, PolyLines{g.log_n}, g.D, g.log_n, 0, g.log_n,
                              LinesByLimb{a.q, a.wi, a.wis, a.last, a.lasts, g.n, g.outs, rank * g.D});
  for (long i = threadIdx.x; i < static_cast<long>(g.D) * g.n; i += blockDim.x) {
    const int local = static_cast<int>(i >> g.log_n), jn = static_cast<int>(i & (g.n - 1));
    const int d = rank * g.D + local;
    const long off = b * g.acc_words + acc_offset(g, d) + jn;
    a.acc[off] = add_mod(a.acc[off], sums[g.at(local, jn)], a.q[d / g.outs]);
  }
}

#ifndef CROSSFHE_GPU_EMULATE
// A barrier over the blocks of an accumulator (the block's own threads when it is alone).
__device__ __forceinline__ void rotation_barrier(int cluster) {
  if (cluster > 1) {
    cooperative_groups::this_cluster().sync();
  } else {
    __syncthreads();
  }
}

// The rotation: `cluster` consecutive blocks per accumulator, the phases in order with a barrier between them (the
// CPU emulation runs the same phases in the same order, block after block: cf_gpu_blind_rotate_emulate). Built for at
// most kThreads threads a block: 1024 leaves 64 registers a thread, 512 and fewer 128.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) blind_rotation(RotationArgs a) {
  __shared__ uint64_t mus[kMaxLimbs];  // floor(2^64 / q_i)
  const int rank = static_cast<int>(blockIdx.x % a.cluster);
  const long b = blockIdx.x / a.cluster;
  if (threadIdx.x == 0)
    for (int l = 0; l < a.limbs; ++l) mus[l] = ~uint64_t{0} / a.q[l];
  rotation_start(a, b, rank);
  rotation_barrier(a.cluster);
  for (int s = 0; s < a.steps; ++s) {
    for (int j = 0; j < a.comps; ++j) {
      rotation_digits(a, b, rank, j);
      rotation_barrier(a.cluster);  // the siblings' digit lines are read next
      rotation_products(a, b, rank, s, j, mus);
      if (a.comps > 1) rotation_barrier(a.cluster);  // the next component's digits overwrite the lines read here
    }
    rotation_finish(a, b, rank);
    rotation_barrier(a.cluster);  // the next step's digits read the whole accumulator
  }
}
#endif

// Shared memory of one block of the rotation kernel, bytes (its share of the digit and sum lines).
size_t rotation_shared(int log_n, int limbs, int k1, int comps, int levels, int cluster) {
  const long lines = static_cast<long>(limbs) * (k1 * levels + comps * k1) / cluster;
  return static_cast<size_t>(lines << log_n) / 32 * 33 * sizeof(uint32_t);
}

// The rotation's launch: checks every shape in the user's terms, then one kernel of `blocks` blocks.
struct RotationShape {
  int64_t batch, comps, k1, limbs, n, steps, per, rows, words, cluster;
};

const char* rotation_check(const RotationShape& s, int64_t exps_count, int64_t keys_count, int64_t levels,
                           int64_t base_log, int64_t frac_words, int64_t table_counts[9]) {
  if (s.n < 64 || s.n > 4096 || (s.n & (s.n - 1)) != 0) return "N must be a power of two in [64, 4096]";
  if (s.comps < 1 || (s.comps & (s.comps - 1)) != 0) return "the accumulator's components must be a power of two";
  if (s.limbs < 1 || s.limbs > kMaxLimbs) return "1 to 8 limbs";
  if (s.cluster != 1 && s.cluster != 2 && s.cluster != 4 && s.cluster != 8) return "a cluster of 1, 2, 4 or 8 blocks";
  if (s.cluster > 1 && (s.comps != 1 || (s.limbs * s.rows) % s.cluster || (s.limbs * s.k1) % s.cluster))
    return "a cluster takes one component, and divides the digit lines L (k+1) l and the sum lines L (k+1)";
  if (levels < 1 || levels > kMaxLevels || base_log < 2 || base_log > 30 || s.rows != s.k1 * levels)
    return "the gadget does not match the keys";
  if (s.words < 2 || s.words > kMaxWords || frac_words < 1 || frac_words >= s.words) return "bad gadget word table";
  if (exps_count != s.batch * s.steps * s.per) return "exps must be [batch, steps, patterns]";
  if (keys_count != s.steps * s.per * s.rows * s.k1 * s.limbs * s.n)
    return "keys must be [steps, patterns, rows, k+1, L, N]";
  const int64_t want[9] = {s.limbs, s.limbs * s.n, s.limbs * 2, s.limbs, s.limbs * s.words, s.limbs * 2 * s.n, s.n,
                           s.limbs * s.n, s.limbs * 2 * s.n};
  for (int i = 0; i < 9; ++i)
    if (table_counts[i] != want[i]) return "the tables do not match the accumulator's limbs and N";
  return nullptr;
}

int log2_of(int64_t v) {
  int k = 0;
  while ((int64_t{1} << k) < v) ++k;
  return k;
}

// The kernel's arguments: the shape, the gadget, the operands, and the 12 uint32 tables in the custom call's order
// (q, w, ws, wi, wis, last, lasts, hat_inv, hat_invs, words, pw, pws).
RotationArgs rotation_args(const RotationShape& s, int levels, int base_log, int frac_words, const uint32_t* acc_in,
                           uint32_t* acc, const int32_t* exps, const uint32_t* keys, const uint32_t* const* tables,
                           const int32_t* root_exp) {
  RotationArgs a{};
  a.acc_in = acc_in;
  a.acc = acc;
  a.exps = exps;
  a.keys = keys;
  a.q = tables[0];
  a.w = tables[1];
  a.ws = tables[2];
  a.wi = tables[3];
  a.wis = tables[4];
  a.last = tables[5];
  a.lasts = tables[6];
  a.hat_inv = tables[7];
  a.hat_invs = tables[8];
  a.words = tables[9];
  a.pw = tables[10];
  a.pws = tables[11];
  a.root_exp = root_exp;
  a.log_n = log2_of(s.n);
  a.limbs = static_cast<int>(s.limbs);
  a.k1 = static_cast<int>(s.k1);
  a.comps = static_cast<int>(s.comps);
  a.log_comps = log2_of(s.comps);
  a.levels = levels;
  a.base_log = base_log;
  a.n_words = static_cast<int>(s.words);
  a.frac_words = frac_words;
  a.steps = static_cast<int>(s.steps);
  a.per = static_cast<int>(s.per);
  a.cluster = static_cast<int>(s.cluster);
  return a;
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

namespace {

// Dynamic shared memory the rotation may take: sm_90 gives a block 227 KB, less 1 KB for its static arrays.
constexpr size_t kMaxShared = 231424;

ffi::Error RotateImpl(cudaStream_t stream, ffi::Buffer<ffi::U32> acc, ffi::Buffer<ffi::S32> exps,
                      ffi::Buffer<ffi::U32> keys, ffi::Buffer<ffi::U32> q, ffi::Buffer<ffi::U32> w,
                      ffi::Buffer<ffi::U32> ws, ffi::Buffer<ffi::U32> wi, ffi::Buffer<ffi::U32> wis,
                      ffi::Buffer<ffi::U32> last, ffi::Buffer<ffi::U32> lasts, ffi::Buffer<ffi::U32> hat_inv,
                      ffi::Buffer<ffi::U32> hat_invs, ffi::Buffer<ffi::U32> words, ffi::Buffer<ffi::U32> pw,
                      ffi::Buffer<ffi::U32> pws, ffi::Buffer<ffi::S32> root_exp, int32_t levels, int32_t base_log,
                      int32_t frac_words, int32_t threads, int32_t cluster, ffi::ResultBuffer<ffi::U32> out) {
  auto ad = acc.dimensions(), ed = exps.dimensions(), kd = keys.dimensions(), wd = words.dimensions();
  if (ad.size() != 5 || ed.size() != 3 || kd.size() != 6 || wd.size() != 2)
    return ffi::Error::InvalidArgument(
        "crossfhe GPU blind rotation: acc [B, C, k+1, L, N], exps [B, G, T], keys [G, T, R, k+1, L, N], words [L, W]");
  RotationShape sh{ad[0], ad[1], ad[2], ad[3], ad[4], ed[1], ed[2], kd[2], wd[1], cluster};
  int64_t counts[9] = {static_cast<int64_t>(q.element_count()),     static_cast<int64_t>(w.element_count()),
                       static_cast<int64_t>(last.element_count()),  static_cast<int64_t>(hat_inv.element_count()),
                       static_cast<int64_t>(words.element_count()), static_cast<int64_t>(pw.element_count()),
                       static_cast<int64_t>(root_exp.element_count()), static_cast<int64_t>(wi.element_count()),
                       static_cast<int64_t>(pws.element_count())};
  if (ed[0] != sh.batch || kd[0] != sh.steps || kd[1] != sh.per || kd[3] != sh.k1 || kd[4] != sh.limbs ||
      kd[5] != sh.n || ws.element_count() != w.element_count() || wis.element_count() != wi.element_count() ||
      lasts.element_count() != last.element_count() || hat_invs.element_count() != hat_inv.element_count())
    return ffi::Error::InvalidArgument("crossfhe GPU blind rotation: exps or keys do not match the accumulator");
  if (const char* why = rotation_check(sh, static_cast<int64_t>(exps.element_count()),
                                       static_cast<int64_t>(keys.element_count()), levels, base_log, frac_words,
                                       counts))
    return ffi::Error::InvalidArgument(std::string("crossfhe GPU blind rotation: ") + why);
  if (threads != 128 && threads != 256 && threads != 512 && threads != 1024)
    return ffi::Error::InvalidArgument("crossfhe GPU blind rotation: 128, 256, 512 or 1024 threads a block");
  const size_t shared = rotation_shared(log2_of(sh.n), static_cast<int>(sh.limbs), static_cast<int>(sh.k1),
                                        static_cast<int>(sh.comps), levels, cluster);
  if (shared > kMaxShared)
    return ffi::Error::InvalidArgument("crossfhe GPU blind rotation: the accumulator needs more shared memory than a "
                                       "block has (at most 227 KB)");
  if (sh.batch == 0) return ffi::Error::Success();
  const uint32_t* tables[12] = {q.typed_data(),    w.typed_data(),        ws.typed_data(),       wi.typed_data(),
                                wis.typed_data(),  last.typed_data(),     lasts.typed_data(),    hat_inv.typed_data(),
                                hat_invs.typed_data(), words.typed_data(), pw.typed_data(),      pws.typed_data()};
  RotationArgs a = rotation_args(sh, levels, base_log, frac_words, acc.typed_data(), out->typed_data(),
                                 exps.typed_data(), keys.typed_data(), tables, root_exp.typed_data());
  auto kernel = threads == 1024 ? blind_rotation<1024> : blind_rotation<512>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
  if (err == cudaSuccess && cluster == 1) {
    kernel<<<static_cast<unsigned>(sh.batch), threads, shared, stream>>>(a);
    err = cudaGetLastError();
  } else if (err == cudaSuccess) {  // `cluster` consecutive blocks per accumulator, one thread-block cluster
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(sh.batch * cluster));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = shared;
    config.stream = stream;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = static_cast<unsigned>(cluster);
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
    err = cudaLaunchKernelEx(&config, kernel, a);
  }
  if (err != cudaSuccess)
    return ffi::Error::Internal(std::string("crossfhe GPU blind rotation: launch failed: ") + cudaGetErrorString(err));
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_gpu_blind_rotate_ffi, RotateImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()  // acc
                                  .Arg<ffi::Buffer<ffi::S32>>()  // exps
                                  .Arg<ffi::Buffer<ffi::U32>>()  // keys
                                  .Arg<ffi::Buffer<ffi::U32>>()  // q
                                  .Arg<ffi::Buffer<ffi::U32>>()  // w
                                  .Arg<ffi::Buffer<ffi::U32>>()  // w_shoup
                                  .Arg<ffi::Buffer<ffi::U32>>()  // wi
                                  .Arg<ffi::Buffer<ffi::U32>>()  // wi_shoup
                                  .Arg<ffi::Buffer<ffi::U32>>()  // inv_last
                                  .Arg<ffi::Buffer<ffi::U32>>()  // inv_last_shoup
                                  .Arg<ffi::Buffer<ffi::U32>>()  // hat_inv
                                  .Arg<ffi::Buffer<ffi::U32>>()  // hat_inv_shoup
                                  .Arg<ffi::Buffer<ffi::U32>>()  // words
                                  .Arg<ffi::Buffer<ffi::U32>>()  // psi powers
                                  .Arg<ffi::Buffer<ffi::U32>>()  // their companions
                                  .Arg<ffi::Buffer<ffi::S32>>()  // root exponents
                                  .Attr<int32_t>("levels")
                                  .Attr<int32_t>("base_log")
                                  .Attr<int32_t>("frac_words")
                                  .Attr<int32_t>("threads")
                                  .Attr<int32_t>("cluster")
                                  .Ret<ffi::Buffer<ffi::U32>>());


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

// The rotation kernel on the CPU, one thread per block. Returns 0, or -1 with the reason in `why` (128 bytes).
extern "C" int cf_gpu_blind_rotate_emulate(const uint32_t* acc_in, uint32_t* acc, const int32_t* exps,
                                           const uint32_t* keys, const uint32_t* const* tables,
                                           const int32_t* root_exp, const int64_t* shape, int levels, int base_log,
                                           int frac_words, int cluster) {
  RotationShape sh{shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], shape[6], shape[7], shape[8], cluster};
  int64_t counts[9] = {sh.limbs, sh.limbs * sh.n, sh.limbs * 2, sh.limbs, sh.limbs * sh.words, sh.limbs * 2 * sh.n,
                       sh.n, sh.limbs * sh.n, sh.limbs * 2 * sh.n};
  if (rotation_check(sh, sh.batch * sh.steps * sh.per, sh.steps * sh.per * sh.rows * sh.k1 * sh.limbs * sh.n, levels,
                     base_log, frac_words, counts))
    return -1;
  if (rotation_shared(log2_of(sh.n), static_cast<int>(sh.limbs), static_cast<int>(sh.k1), static_cast<int>(sh.comps),
                      levels, cluster) > kEmuBlockWords * sizeof(uint32_t) || cluster * kEmuBlockWords > kEmuWords)
    return -2;
  RotationArgs a = rotation_args(sh, levels, base_log, frac_words, acc_in, acc, exps, keys, tables, root_exp);
  uint64_t mus[kMaxLimbs];
  for (int l = 0; l < a.limbs; ++l) mus[l] = ~uint64_t{0} / a.q[l];
  blockDim.x = 1;
  threadIdx.x = 0;
  // blind_rotation's phases and barriers, each phase run by every block of the cluster before the next begins
  for (int64_t b = 0; b < sh.batch; ++b) {
    for (int m = 0; m < cluster; ++m) rotation_start(a, b, m);
    for (int s = 0; s < a.steps; ++s) {
      for (int j = 0; j < a.comps; ++j) {
        for (int m = 0; m < cluster; ++m) rotation_digits(a, b, m, j);
        for (int m = 0; m < cluster; ++m) rotation_products(a, b, m, s, j, mus);
      }
      for (int m = 0; m < cluster; ++m) rotation_finish(a, b, m);
    }
  }
  return 0;
}

#endif

// The operands and attributes of the custom calls (crossfhe.kernels.gpu_native.ABI_VERSION); both builds export it.
extern "C" int cf_gpu_abi_version(void) { return 3; }
