/* The native RNS NTT (rns_ntt.c) as an XLA FFI custom call: "crossfhe_rns_ntt" on the CPU platform.

   Operands: x uint32 [..., limbs, n] (leading axes are batch axes), then the plan's tables q [limbs] (any shape
   of limbs words), w and ws [limbs, n] (forward: w, w_shoup; inverse: wi, wi_shoup), last and lasts [limbs, 2]
   (N^-1 and psi^-1 N^-1 with their Shoup companions; read by the inverse only). Attributes: inverse (0 forward,
   1 inverse) and full (forward: 1 for outputs in [0, q), 0 for [0, 2q)). Result: uint32 of x's shape. Row r of
   x uses the tables of limb r mod limbs. Table operands may carry leading axes of size 1 (vmap's expand_dims).
   Rows sharing a limb are run together, so a limb's tables are read once for all of them; groups of rows go to
   XLA's intra-op threads. */
#include <cstdint>
#include <vector>

#include "../math/ffi_parallel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

extern "C" int cf_ntt(const uint32_t *in, uint32_t *out, const int64_t *rows, const int32_t *tab, int64_t count,
                      int64_t n, const uint32_t *q, const uint32_t *const *w, const uint32_t *const *ws,
                      const uint32_t *last, const uint32_t *lasts, int inverse, int full);

static ffi::Error rns_ntt(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                          ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws, ffi::Buffer<ffi::U32> last,
                          ffi::Buffer<ffi::U32> lasts, ffi::ResultBuffer<ffi::U32> out, int32_t inverse,
                          int32_t full) {
    auto dims = x.dimensions();
    if (dims.size() < 2) return ffi::Error::InvalidArgument("crossfhe_rns_ntt: x must be [..., limbs, n]");
    const int64_t n = dims[dims.size() - 1], limbs = dims[dims.size() - 2];
    const int64_t total = static_cast<int64_t>(x.element_count());
    if (n < 64 || (n & (n - 1)) != 0) return ffi::Error::InvalidArgument("crossfhe_rns_ntt: n must be a power of two >= 64");
    if (static_cast<int64_t>(q.element_count()) != limbs || static_cast<int64_t>(w.element_count()) != limbs * n ||
        static_cast<int64_t>(ws.element_count()) != limbs * n ||
        static_cast<int64_t>(last.element_count()) != 2 * limbs ||
        static_cast<int64_t>(lasts.element_count()) != 2 * limbs)
        return ffi::Error::InvalidArgument("crossfhe_rns_ntt: the tables do not match x's limbs and n");
    const int64_t rows = total / n, batch = rows / (limbs > 0 ? limbs : 1);
    if (rows == 0) return ffi::Error::Success();
    std::vector<const uint32_t *> wp(limbs), wsp(limbs);
    for (int64_t l = 0; l < limbs; l++) {
        wp[l] = w.typed_data() + l * n;
        wsp[l] = ws.typed_data() + l * n;
    }
    /* Rows grouped by modulus: a concatenated plan (ModUp's digits) repeats moduli, and every row of one modulus
       takes the tables of its first limb, read once for all of them. rep[l]: the first limb with l's modulus. */
    const uint32_t *qs = q.typed_data();
    std::vector<int64_t> rep(limbs);
    for (int64_t l = 0; l < limbs; l++) {
        rep[l] = l;
        for (int64_t m = 0; m < l; m++)
            if (qs[m] == qs[l]) {
                rep[l] = m;
                break;
            }
    }
    std::vector<int64_t> order(rows);
    std::vector<int32_t> tab(rows);
    int64_t i = 0;
    for (int64_t first = 0; first < limbs; first++) {
        if (rep[first] != first) continue;
        for (int64_t l = first; l < limbs; l++) {
            if (rep[l] != first) continue;
            for (int64_t b = 0; b < batch; b++, i++) {
                order[i] = b * limbs + l;
                tab[i] = static_cast<int32_t>(first);
            }
        }
    }
    const uint32_t *in = x.typed_data();
    uint32_t *dst = out->typed_data();
    std::atomic<int> failed{0};
    /* a group is about 2^18 words of work (four rows at n 2^16): enough to pay for a handoff */
    int64_t grain = (int64_t{1} << 18) / n;
    if (grain < 1) grain = 1;
    crossfhe::parallel_for(pool, rows, grain, [&](int64_t lo, int64_t hi) {
        int rc = cf_ntt(in, dst, order.data() + lo, tab.data() + lo, hi - lo, n, q.typed_data(), wp.data(),
                        wsp.data(), last.typed_data(), lasts.typed_data(), inverse, full);
        if (rc != 0) failed.store(rc);
    });
    if (failed.load() != 0) return ffi::Error::Internal("crossfhe_rns_ntt: no scratch memory");
    return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_rns_ntt_ffi, rns_ntt,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int32_t>("inverse")
                                  .Attr<int32_t>("full"));

/* "crossfhe_permute": out[..., j] = x[..., idx[j]] along the last axis (an automorphism of EVAL slots, the same
   permutation for every row). x uint32 [..., n], idx int32 [n] (leading axes of size 1 allowed) with entries in
   [0, n). Rows go to XLA's intra-op threads. */
static ffi::Error permute(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::S32> idx,
                          ffi::ResultBuffer<ffi::U32> out) {
    auto dims = x.dimensions();
    if (dims.size() < 1) return ffi::Error::InvalidArgument("crossfhe_permute: x must have a last axis");
    const int64_t n = dims[dims.size() - 1];
    if (static_cast<int64_t>(idx.element_count()) != n)
        return ffi::Error::InvalidArgument("crossfhe_permute: idx must have n entries");
    const int32_t *ix = idx.typed_data();
    for (int64_t j = 0; j < n; j++)
        if (ix[j] < 0 || ix[j] >= n) return ffi::Error::InvalidArgument("crossfhe_permute: index out of range");
    const int64_t rows = n > 0 ? static_cast<int64_t>(x.element_count()) / n : 0;
    const uint32_t *in = x.typed_data();
    uint32_t *dst = out->typed_data();
    int64_t grain = (int64_t{1} << 18) / (n > 0 ? n : 1);
    if (grain < 1) grain = 1;
    crossfhe::parallel_for(pool, rows, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; r++) {
            const uint32_t *src = in + r * n;
            uint32_t *o = dst + r * n;
            for (int64_t j = 0; j < n; j++) o[j] = src[ix[j]];
        }
    });
    return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_permute_ffi, permute,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());
