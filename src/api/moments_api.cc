// The calibration moments' C entry points (kernels/moments.h): argument checks, the scratch
// (bounded by the arguments), the numeric mode's CPU check.
#include <vector>

#include "core/error.h"
#include "kernels/moments.h"
#include "kernels/numeric_mode.h"
#include "stk/stk.h"

using namespace stk;

namespace {
// A dimension the GEMMs take (BLIS's dim_t, and room for the products below).
constexpr uint64_t kMaxDim = uint64_t(1) << 24;

void check_dims(const char *fn, std::initializer_list<std::pair<const char *, size_t>> dims, unsigned threads) {
    for (const auto &[name, v] : dims)
        if (v > kMaxDim) throw_error(STK_E_INVALID_ARGUMENT, "%s: %s = %zu is above %llu", fn, name, v, (unsigned long long)kMaxDim);
    if (threads == 0 || threads > 1024) throw_error(STK_E_INVALID_ARGUMENT, "%s: threads = %u (1..1024)", fn, threads);
}

}  // namespace

STK_API stk_status stk_moment_gram(const float *a, size_t rows, size_t n, double *acc, uint32_t threads) {
    return guard([&] {
        check_dims("stk_moment_gram", {{"rows", rows}, {"n", n}}, threads);
        if (!acc || (rows && n && !a)) throw_error(STK_E_INVALID_ARGUMENT, "stk_moment_gram: NULL argument");
        if (rows == 0 || n == 0) return;
        kernels::require_numeric_mode();
        std::vector<float> scratch(kernels::moment_gram_scratch(n));
        kernels::moment_gram(a, rows, n, acc, scratch.data(), threads);
    });
}

STK_API stk_status stk_moment_cross(const float *a, const float *b, size_t rows, size_t n, size_t m, double *acc,
                                    uint32_t threads) {
    return guard([&] {
        check_dims("stk_moment_cross", {{"rows", rows}, {"n", n}, {"m", m}}, threads);
        if (!acc || (rows && n && m && (!a || !b))) throw_error(STK_E_INVALID_ARGUMENT, "stk_moment_cross: NULL argument");
        if (rows == 0 || n == 0 || m == 0) return;
        kernels::require_numeric_mode();
        std::vector<float> scratch(kernels::moment_cross_scratch(n, m));
        kernels::moment_cross(a, b, rows, n, m, acc, scratch.data(), threads);
    });
}

STK_API stk_status stk_moment_causal_pairs(const float *x, const float *q, const float *k, size_t rows, size_t d, size_t dq,
                                           double scale, const double *weights, double *acc_m, double *acc_b, double *acc_l,
                                           uint32_t threads) {
    return guard([&] {
        const char *fn = "stk_moment_causal_pairs";
        check_dims(fn, {{"rows", rows}, {"d", d}, {"dq", dq}}, threads);
        if (!acc_m || !acc_b || !acc_l) throw_error(STK_E_INVALID_ARGUMENT, "%s: NULL accumulator", fn);
        if (rows == 0 || d == 0) return;
        if (!x || !weights || (dq && (!q || !k))) throw_error(STK_E_INVALID_ARGUMENT, "%s: NULL argument", fn);
        kernels::require_numeric_mode();
        std::vector<float> scratch(kernels::moment_causal_pairs_scratch(rows, d));
        std::vector<double> scratch_f64(kernels::moment_causal_pairs_scratch_f64(rows, d));
        kernels::moment_causal_pairs(x, q, k, rows, d, dq, scale, weights, acc_m, acc_b, acc_l, scratch.data(), scratch_f64.data(),
                                     threads);
    });
}
