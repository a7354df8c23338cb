/* The uniform sampler of crossfhe.math.random (uniform_mod over a stack of moduli) as an XLA FFI custom call on the
   CPU platform: "crossfhe_uniform_mod". The same words as the JAX sampler, computed by the same definitions:

   For key k (8 words) with stream (s0, s1), word i of the stream is word i mod 16 of the ChaCha20 block (RFC 8439
   §2.3) of key k, counter i / 16 and nonce (0, s0, s1) (random_bits). A sample array of shape [limbs, n] takes
   the 3 limbs n words (w0, w1, w2) = words [0, M), [M, 2M), [2M, 3M) (M = limbs n), and its element e is
   (w0[e] 2^64 + w1[e] 2^32 + w2[e]) mod q_l, l = e / n (uniform_mod, Horner in two 64-bit steps: any exact
   reduction gives the same residue).

   Operands: words uint32 [d, 8] and streams uint32 [d, 2] (d keys), q uint32 [limbs] with 2 <= q <= 2^31.
   Result: uint32 [d, limbs, n], sample array j from key j. n is read off the result and must be a multiple of 16.
   "crossfhe_uniform_mod_rows" takes one operand more, rows int32 [u], and returns uint32 [d, u, n]: rows rows[i]
   of the same arrays (the limbs a key switch at a lower level reads), each computed alone (n a multiple of 256).
   Keys and blocks go to XLA's intra-op threads; blocks are computed 16 at a time, lane-parallel (the compiler
   vectorizes the rounds). Where AVX-512 DQ is built in, the reductions of 16 blocks that lie in one row run 8 at a
   time (vuniform: a float64 quotient estimate, the same residues). */
#include <cstdint>
#include <string>
#ifdef __AVX512DQ__
/* GCC 12 flags the intrinsics' own _mm512_undefined_epi32 operands (maybe-uninitialized) where they are inlined;
   the warnings point into this header, so ignoring them here leaves this file's own code checked. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "ffi_parallel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int kLanes = 16;
constexpr uint32_t kSigma[4] = {0x61707865u, 0x3320646Eu, 0x79622D32u, 0x6B206574u};

inline uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

#define CF_QR(a, b, c, d)                                  \
    for (int t = 0; t < kLanes; t++) {                     \
        s[a][t] += s[b][t];                                \
        s[d][t] = rotl(s[d][t] ^ s[a][t], 16);             \
        s[c][t] += s[d][t];                                \
        s[b][t] = rotl(s[b][t] ^ s[c][t], 12);             \
        s[a][t] += s[b][t];                                \
        s[d][t] = rotl(s[d][t] ^ s[a][t], 8);              \
        s[c][t] += s[d][t];                                \
        s[b][t] = rotl(s[b][t] ^ s[c][t], 7);              \
    }

/* out[w][t] = word w of the block of counter counters[t] (key, nonce (0, s0, s1)), for kLanes counters. */
void blocks(const uint32_t *key, uint32_t s0, uint32_t s1, const uint32_t *counters, uint32_t out[16][kLanes]) {
    uint32_t s[16][kLanes];
    uint32_t init[16];
    for (int w = 0; w < 4; w++) init[w] = kSigma[w];
    for (int w = 0; w < 8; w++) init[4 + w] = key[w];
    init[12] = 0;
    init[13] = 0;
    init[14] = s0;
    init[15] = s1;
    for (int w = 0; w < 16; w++)
        for (int t = 0; t < kLanes; t++) s[w][t] = init[w];
    for (int t = 0; t < kLanes; t++) s[12][t] = counters[t];
    for (int round = 0; round < 10; round++) {
        CF_QR(0, 4, 8, 12) CF_QR(1, 5, 9, 13) CF_QR(2, 6, 10, 14) CF_QR(3, 7, 11, 15)
        CF_QR(0, 5, 10, 15) CF_QR(1, 6, 11, 12) CF_QR(2, 7, 8, 13) CF_QR(3, 4, 9, 14)
    }
    for (int w = 0; w < 16; w++)
        for (int t = 0; t < kLanes; t++) out[w][t] = s[w][t] + (w == 12 ? counters[t] : init[w]);
}

#undef CF_QR

/* (hi 2^32 + lo) mod q exactly, m = floor((2^64 - 1) / q): the quotient estimate is floor(Z/q) or one less. */
inline uint32_t mod_wide(uint32_t hi, uint32_t lo, uint32_t q, uint64_t m) {
    uint64_t z = (uint64_t{hi} << 32) | lo;
    uint64_t qhat = static_cast<uint64_t>((static_cast<unsigned __int128>(z) * m) >> 64);
    uint64_t r = z - qhat * q;
    return static_cast<uint32_t>(r >= q ? r - q : r);
}

#ifdef __AVX512DQ__
/* x mod q for 8 lanes of x < 2^63 whose quotient by q is below 2^32: a float64 quotient estimate (off by one at
   most: x rounds to 53 bits only when x >= 2^53, i.e. q > 2^26, and then the quotient's error stays below 2^-20)
   and one correction each way. */
inline __m512i vmod(__m512i x, __m512i vq, __m512d vqinv) {
    const __m512i qh = _mm512_cvttpd_epu64(_mm512_mul_pd(_mm512_cvtepu64_pd(x), vqinv));
    __m512i r = _mm512_sub_epi64(x, _mm512_mul_epu32(qh, vq));
    r = _mm512_mask_add_epi64(r, _mm512_cmplt_epi64_mask(r, _mm512_setzero_si512()), r, vq);
    return _mm512_mask_sub_epi64(r, _mm512_cmpge_epu64_mask(r, vq), r, vq);
}

/* mod_wide(mod_wide(w0, w1), w2) of 8 lanes: ((w0 mod q) 2^32 + w1) mod q, then (r 2^32 + w2) mod q, each as
   r R + w with R = 2^32 mod q (r, R < q <= 2^31: the sum is below 2^62 + 2^32 and its quotient below 2^32). */
inline __m256i vuniform(const uint32_t *w0, const uint32_t *w1, const uint32_t *w2, __m512i vq, __m512i vr,
                        __m512d vqinv) {
    __m512i r = vmod(_mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w0))), vq, vqinv);
    r = vmod(_mm512_add_epi64(_mm512_mul_epu32(r, vr),
                              _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w1)))),
             vq, vqinv);
    r = vmod(_mm512_add_epi64(_mm512_mul_epu32(r, vr),
                              _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w2)))),
             vq, vqinv);
    return _mm512_cvtepi64_epi32(r);
}
#endif

/* Rows [0, out_rows) of each key's [limbs, n] sample array, row r being row row_of(r) of the whole array (counters
   as the whole array's: its per_key = limbs n / 16 blocks per word third). */
template <typename RowOf>
ffi::Error fill(ffi::ThreadPool &pool, const std::string &who, ffi::Buffer<ffi::U32> &words,
                ffi::Buffer<ffi::U32> &streams, ffi::Buffer<ffi::U32> &q, ffi::ResultBuffer<ffi::U32> &out,
                int64_t limbs, RowOf row_of) {
    auto dims = out->dimensions();
    if (dims.size() != 3) return ffi::Error::InvalidArgument(who + ": the result must be [keys, rows, n]");
    const int64_t keys = dims[0], out_rows = dims[1], n = dims[2];
    if (static_cast<int64_t>(words.element_count()) != 8 * keys ||
        static_cast<int64_t>(streams.element_count()) != 2 * keys)
        return ffi::Error::InvalidArgument(who + ": words must be [keys, 8] and streams [keys, 2]");
    if (static_cast<int64_t>(q.element_count()) != limbs)
        return ffi::Error::InvalidArgument(who + ": q must have one modulus per limb");
    if (n % 16 != 0) return ffi::Error::InvalidArgument(who + ": n must be a multiple of 16");
    const uint32_t *qs = q.typed_data();
    uint64_t m[1024];
    if (limbs > 1024) return ffi::Error::InvalidArgument(who + ": at most 1024 limbs");
    for (int64_t l = 0; l < limbs; l++) {
        if (qs[l] < 2 || qs[l] > (uint32_t{1} << 31))
            return ffi::Error::InvalidArgument(who + ": moduli must lie in [2, 2^31]");
        m[l] = UINT64_MAX / qs[l];
    }
    for (int64_t r = 0; r < out_rows; r++)
        if (row_of(r) < 0 || row_of(r) >= limbs) return ffi::Error::InvalidArgument(who + ": a row outside the limbs");
    const int64_t per_key = limbs * n / 16;  // blocks of each of w0, w1, w2 (the whole array's)
    if (3 * per_key > (int64_t{1} << 32)) return ffi::Error::InvalidArgument(who + ": more than 2^32 blocks a key");
    const int64_t per_row = n / 16, out_blocks = out_rows * per_row;
    const int64_t groups = (out_blocks + kLanes - 1) / kLanes;  // rows variant: a group stays in one row
    const uint32_t *kw = words.typed_data();
    const uint32_t *ks = streams.typed_data();
    uint32_t *dst = out->typed_data();
    crossfhe::parallel_for(pool, keys * groups, 64, [&](int64_t lo, int64_t hi) {
        uint32_t b0[16][kLanes], b1[16][kLanes], b2[16][kLanes];
        uint32_t c[kLanes];
        for (int64_t item = lo; item < hi; item++) {
            const int64_t key = item / groups, first = (item % groups) * kLanes;  // first output block
            const int64_t row = first / per_row, l = row_of(row);
            const int64_t src = l * per_row + first % per_row;  // its block in the whole array
            const uint32_t *k = kw + 8 * key;
            const uint32_t s0 = ks[2 * key], s1 = ks[2 * key + 1];
            for (int t = 0; t < kLanes; t++) c[t] = static_cast<uint32_t>(src + t);
            blocks(k, s0, s1, c, b0);
            for (int t = 0; t < kLanes; t++) c[t] = static_cast<uint32_t>(per_key + src + t);
            blocks(k, s0, s1, c, b1);
            for (int t = 0; t < kLanes; t++) c[t] = static_cast<uint32_t>(2 * per_key + src + t);
            blocks(k, s0, s1, c, b2);
            uint32_t *o = dst + key * out_rows * n;
#ifdef __AVX512DQ__
            if (first % per_row + kLanes <= per_row) {  // the group's 256 elements lie in one row: one modulus
                const uint32_t ql = qs[l];
                const __m512i vq = _mm512_set1_epi64(ql), vr = _mm512_set1_epi64((uint64_t{1} << 32) % ql);
                const __m512d vqinv = _mm512_set1_pd(1.0 / static_cast<double>(ql));
                alignas(64) uint32_t res[16][kLanes];  // res[w][t]: element w of lane t's 16
                for (int w = 0; w < 16; w++)
                    for (int h = 0; h < kLanes; h += 8)
                        _mm256_store_si256(reinterpret_cast<__m256i *>(&res[w][h]),
                                           vuniform(&b0[w][h], &b1[w][h], &b2[w][h], vq, vr, vqinv));
                uint32_t *og = o + 16 * first;
                for (int t = 0; t < kLanes; t++)
                    for (int w = 0; w < 16; w++) og[16 * t + w] = res[w][t];
                continue;
            }
#endif
            for (int t = 0; t < kLanes && first + t < out_blocks; t++) {
                const int64_t e0 = 16 * (first + t);  // 16 elements of one output row (n is a multiple of 16)
                const int64_t lt = row_of(e0 / n);
                const uint32_t ql = qs[lt];
                for (int w = 0; w < 16; w++)
                    o[e0 + w] = mod_wide(mod_wide(b0[w][t], b1[w][t], ql, m[lt]), b2[w][t], ql, m[lt]);
            }
        }
    });
    return ffi::Error::Success();
}

ffi::Error uniform_mod(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> words, ffi::Buffer<ffi::U32> streams,
                       ffi::Buffer<ffi::U32> q, ffi::ResultBuffer<ffi::U32> out) {
    const int64_t limbs = static_cast<int64_t>(q.element_count());
    return fill(pool, "crossfhe_uniform_mod", words, streams, q, out, limbs, [](int64_t r) { return r; });
}

ffi::Error uniform_mod_rows(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> words, ffi::Buffer<ffi::U32> streams,
                            ffi::Buffer<ffi::U32> q, ffi::Buffer<ffi::S32> rows, ffi::ResultBuffer<ffi::U32> out) {
    const std::string who = "crossfhe_uniform_mod_rows";
    auto dims = out->dimensions();
    if (dims.size() != 3 || static_cast<int64_t>(rows.element_count()) != dims[1])
        return ffi::Error::InvalidArgument(who + ": the result must be [keys, rows, n], one row per index");
    if (dims[2] % (16 * kLanes) != 0)  // a group of kLanes blocks then stays within one row
        return ffi::Error::InvalidArgument(who + ": n must be a multiple of 256");
    const int32_t *rs = rows.typed_data();
    return fill(pool, who, words, streams, q, out, static_cast<int64_t>(q.element_count()),
                [rs](int64_t r) { return static_cast<int64_t>(rs[r]); });
}

}  // namespace

extern "C" int cf_uniform_abi_version(void) { return 2; }

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_uniform_mod_ffi, uniform_mod,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_uniform_mod_rows_ffi, uniform_mod_rows,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());
