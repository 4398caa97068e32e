#include "kernels/random.h"

#include <cmath>

#include "core/prng.h"

namespace stk::kernels {

namespace {
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
inline uint64_t output_at(uint64_t seed, uint64_t k) {
    uint64_t state = seed + k * kGolden;  // splitmix64_next adds kGolden before mixing
    return splitmix64_next(&state);
}
}  // namespace

void gaussian_pair(uint64_t seed, uint64_t pair, double *g0, double *g1) {
    double u = to_unit(output_at(seed, 2 * pair));
    double v = to_unit(output_at(seed, 2 * pair + 1));
    const double lo = 0x1.0p-52, hi = 1.0 - 0x1.0p-52;
    if (u < lo) u = lo;
    if (u > hi) u = hi;
    double radius = std::sqrt(-2.0 * std::log(u));
    double angle = 2.0 * M_PI * v;
    *g0 = radius * std::cos(angle);
    *g1 = radius * std::sin(angle);
}

void gaussians(uint64_t seed, uint64_t first, size_t n, double *out) {
    size_t i = 0;
    double g0, g1;
    if (first & 1) {
        gaussian_pair(seed, first / 2, &g0, &g1);
        if (n) out[i++] = g1;
    }
    for (uint64_t p = (first + 1) / 2; i + 1 < n; p++) {
        gaussian_pair(seed, p, &g0, &g1);
        out[i++] = g0;
        out[i++] = g1;
    }
    if (i < n) {
        gaussian_pair(seed, (first + i) / 2, &g0, &g1);
        out[i] = g0;
    }
}

double random_sign(uint64_t seed, uint64_t index) { return (output_at(seed, index) >> 63) ? -1.0 : 1.0; }

}  // namespace stk::kernels
