/* The TFHE grouped FFT blind rotation (tfhe_fft.c) and its FFT as XLA FFI custom calls on the CPU platform
   (crossfhe.kernels.cpu_native registers them under names that carry the build's hash).

   Blind rotation. Operands: acc uint64 [..., comps, k1, n] in [0, q); src, power int32 [..., groups, comps, T]
   (each step's component move, crossfhe.core.ggsw.component_move); key float64 [groups, n/2 / 8, T, k1 levels,
   k1, 2, 8]; tw, twist, zeta float64 [2, n/2]; roots float64 [2, 2n]; slot_k int32 [n/2] (cf_blind_rotate_grouped
   in tfhe_fft.c says what each holds). Attributes: levels, base_log (int64), scale (float64), q (int64), inv_q
   (float64). Result: uint64 of the accumulator's shape with its leading axes broadcast against src's: the
   rotated accumulators. The leading axes of acc and of src / power are batch axes of equal count, each of equal
   size or of size 1 (broadcast: vmap's expand_dims); the tables may carry leading axes of size 1. Items are
   independent: groups of them go to XLA's intra-op threads, each group reading every step's keys once. */
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../math/ffi_parallel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

extern "C" int cf_blind_rotate_grouped(uint64_t *acc, const int32_t *src, const int32_t *power, const double *key,
                                       int64_t batch, int64_t groups, int64_t comps, int64_t t_count, int64_t k1,
                                       int64_t levels, int64_t n, int64_t base_log, double scale, uint64_t q,
                                       double inv_q, const double *tw, const double *twist, const double *roots,
                                       const double *zeta, const int32_t *slot_k);
extern "C" void cf_fft_forward(double *re, double *im, const double *tw, int64_t h);
extern "C" void cf_fft_inverse(double *re, double *im, const double *tw, int64_t h);

namespace {

int64_t product(ffi::Span<const int64_t> dims, size_t lo, size_t hi) {
    int64_t p = 1;
    for (size_t i = lo; i < hi; i++) p *= dims[i];
    return p;
}

/* The flat index, in an array of leading dims `have` (each equal to `want`'s or 1), of item i of `want`. */
int64_t broadcast_index(int64_t i, const std::vector<int64_t> &want, const std::vector<int64_t> &have) {
    int64_t index = 0, stride = 1;
    for (size_t d = want.size(); d-- > 0;) {
        int64_t coord = i % want[d];
        i /= want[d];
        index += (have[d] == 1 ? 0 : coord) * stride;
        stride *= have[d];
    }
    return index;
}

ffi::Error blind_rotate(ffi::ThreadPool pool, ffi::Buffer<ffi::U64> acc, ffi::Buffer<ffi::S32> src,
                        ffi::Buffer<ffi::S32> power, ffi::Buffer<ffi::F64> key, ffi::Buffer<ffi::F64> tw,
                        ffi::Buffer<ffi::F64> twist, ffi::Buffer<ffi::F64> roots, ffi::Buffer<ffi::F64> zeta,
                        ffi::Buffer<ffi::S32> slot_k, ffi::ResultBuffer<ffi::U64> out, int64_t levels,
                        int64_t base_log, double scale, int64_t q, double inv_q) {
    auto ad = acc.dimensions(), sd = src.dimensions(), od = out->dimensions();
    if (ad.size() < 3 || sd.size() != ad.size() || power.dimensions().size() != sd.size() ||
        od.size() != ad.size())
        return ffi::Error::InvalidArgument(
            "crossfhe_tfhe_rotate: acc [..., comps, k1, n] and src, power [..., groups, comps, T] need the same "
            "number of leading axes");
    const size_t lead = ad.size() - 3;
    const int64_t comps = ad[lead], k1 = ad[lead + 1], n = ad[lead + 2], h = n / 2;
    const int64_t groups = sd[lead], t_count = sd[lead + 2], r_count = k1 * levels;
    std::vector<int64_t> want(lead), acc_lead(lead), src_lead(lead);
    for (size_t d = 0; d < lead; d++) {
        acc_lead[d] = ad[d];
        src_lead[d] = sd[d];
        want[d] = od[d];
        if (power.dimensions()[d] != sd[d] || (ad[d] != want[d] && ad[d] != 1) ||
            (sd[d] != want[d] && sd[d] != 1))
            return ffi::Error::InvalidArgument("crossfhe_tfhe_rotate: batch axes do not broadcast");
    }
    for (size_t d = lead; d < lead + 3; d++)
        if (power.dimensions()[d] != sd[d] || od[d] != ad[d])
            return ffi::Error::InvalidArgument("crossfhe_tfhe_rotate: src, power or the result has a wrong shape");
    if (sd[lead + 1] != comps || comps < 1 || k1 < 1 || levels < 1 || t_count < 1 || n < 16 || (n & (n - 1)) ||
        h % 8 || q <= 0)
        return ffi::Error::InvalidArgument("crossfhe_tfhe_rotate: bad sizes (components, n, levels or q)");
    if (static_cast<int64_t>(key.element_count()) != groups * h * t_count * r_count * k1 * 2 ||
        static_cast<int64_t>(tw.element_count()) != 2 * h || static_cast<int64_t>(twist.element_count()) != 2 * h ||
        static_cast<int64_t>(zeta.element_count()) != 2 * h ||
        static_cast<int64_t>(roots.element_count()) != 4 * n || static_cast<int64_t>(slot_k.element_count()) != h)
        return ffi::Error::InvalidArgument("crossfhe_tfhe_rotate: the key or the tables do not match the accumulator");
    const int64_t items = product(od, 0, lead), acc_items = product(ad, 0, lead), src_items = product(sd, 0, lead);
    if (items == 0) return ffi::Error::Success();
    const int64_t words = comps * k1 * n, moves = groups * comps * t_count;
    const int32_t *sp = src.typed_data(), *pp = power.typed_data();
    for (int64_t i = 0; i < src_items * moves; i++)
        if (sp[i] < 0 || sp[i] >= comps)
            return ffi::Error::InvalidArgument("crossfhe_tfhe_rotate: src must index the accumulator's components");
    /* the result starts as the accumulators (broadcast); src and power broadcast to one row per item */
    uint64_t *dst = out->typed_data();
    const uint64_t *from = acc.typed_data();
    for (int64_t i = 0; i < items; i++)
        std::memcpy(dst + i * words, from + (acc_items == items ? i : broadcast_index(i, want, acc_lead)) * words,
                    sizeof(uint64_t) * words);
    std::vector<int32_t> sb, pb;
    if (src_items != items) {
        sb.resize(items * moves);
        pb.resize(items * moves);
        for (int64_t i = 0; i < items; i++) {
            int64_t j = broadcast_index(i, want, src_lead);
            std::memcpy(sb.data() + i * moves, sp + j * moves, sizeof(int32_t) * moves);
            std::memcpy(pb.data() + i * moves, pp + j * moves, sizeof(int32_t) * moves);
        }
        sp = sb.data();
        pp = pb.data();
    }
    /* one group of items per thread (each group reads every step's keys once for all its items) */
    const int64_t pieces = items < pool.num_threads() + 1 ? items : pool.num_threads() + 1;
    const int64_t grain = (items + pieces - 1) / pieces;
    std::atomic<int> failed{0};
    crossfhe::parallel_for(pool, items, grain, [&](int64_t lo, int64_t hi) {
        int rc = cf_blind_rotate_grouped(dst + lo * words, sp + lo * moves, pp + lo * moves, key.typed_data(),
                                         hi - lo, groups, comps, t_count, k1, levels, n, base_log, scale,
                                         static_cast<uint64_t>(q), inv_q, tw.typed_data(), twist.typed_data(),
                                         roots.typed_data(), zeta.typed_data(), slot_k.typed_data());
        if (rc != 0) failed.store(rc);
    });
    if (failed.load() == -1) return ffi::Error::Internal("crossfhe_tfhe_rotate: no scratch memory");
    if (failed.load() != 0) return ffi::Error::Internal("crossfhe_tfhe_rotate: the kernel refused its sizes");
    return ffi::Error::Success();
}

/* The kernel's FFT of each row of (re, im) float64 [..., h] (forward: the DFT in the kernel's slot order;
   inverse: back to natural order, times h); tw float64 [2, h]. Results: the transformed re and im planes. */
ffi::Error fft(ffi::Buffer<ffi::F64> re, ffi::Buffer<ffi::F64> im, ffi::Buffer<ffi::F64> tw,
               ffi::ResultBuffer<ffi::F64> out_re, ffi::ResultBuffer<ffi::F64> out_im, int32_t inverse) {
    auto dims = re.dimensions();
    if (dims.size() == 0 || im.element_count() != re.element_count())
        return ffi::Error::InvalidArgument("crossfhe_tfhe_fft: re and im must be [..., h] of one shape");
    const int64_t h = dims[dims.size() - 1], total = static_cast<int64_t>(re.element_count());
    if (h < 1 || (h & (h - 1)) || static_cast<int64_t>(tw.element_count()) != 2 * h)
        return ffi::Error::InvalidArgument("crossfhe_tfhe_fft: h must be a power of two, tw [2, h]");
    double *r = out_re->typed_data(), *i = out_im->typed_data();
    std::memcpy(r, re.typed_data(), sizeof(double) * total);
    std::memcpy(i, im.typed_data(), sizeof(double) * total);
    for (int64_t row = 0; row < total; row += h) {
        if (inverse)
            cf_fft_inverse(r + row, i + row, tw.typed_data(), h);
        else
            cf_fft_forward(r + row, i + row, tw.typed_data(), h);
    }
    return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_tfhe_rotate_ffi, blind_rotate,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U64>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::U64>>()
                                  .Attr<int64_t>("levels")
                                  .Attr<int64_t>("base_log")
                                  .Attr<double>("scale")
                                  .Attr<int64_t>("q")
                                  .Attr<double>("inv_q"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_tfhe_fft_ffi, fft,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Attr<int32_t>("inverse"));
