#include "runtime/memory_step.h"

#include <cmath>

namespace stk {

double memory_step(const SosSection *sec, SosState *st, uint32_t n_sections, double u) {
    double sum = 0, comp = 0;  // Kahan
    for (uint32_t k = 0; k < n_sections; k++) {
        const SosSection &s = sec[k];
        SosState &x = st[k];
        double y = s.b0 * u + x.s1;
        x.s1 = s.b1 * u + s.a1 * y + x.s2;
        x.s2 = s.a2 * y;
        double t = y - comp;
        double next = sum + t;
        comp = (next - sum) - t;
        sum = next;
    }
    return sum;
}

void memory_impulse_response(const SosSection *sec, uint32_t n_sections, size_t n, double *h, double *max_state) {
    SosState st[8];
    double worst = 0;
    for (uint32_t k = 0; k < n_sections && k < 8; k++) st[k] = SosState{};
    uint32_t m = n_sections < 8 ? n_sections : 8;
    for (size_t t = 0; t < n; t++) {
        h[t] = memory_step(sec, st, m, t == 0 ? 1.0 : 0.0);
        for (uint32_t k = 0; k < m; k++) {
            double a = std::fabs(st[k].s1), b = std::fabs(st[k].s2);
            if (!(a <= worst)) worst = a;
            if (!(b <= worst)) worst = b;
        }
    }
    if (max_state) *max_state = worst;
}

void memory_pole_radii(const SosSection *sec, uint32_t n_sections, double *max_radius, double *min_radius) {
    double hi = 0, lo = INFINITY;
    for (uint32_t k = 0; k < n_sections; k++) {
        double a1 = sec[k].a1, a2 = sec[k].a2;
        double r[2];
        int n = 0;
        if (a2 == 0) {
            if (a1 != 0) r[n++] = std::fabs(a1);
        } else {
            // z^2 - a1 z - a2 = 0
            double disc = a1 * a1 + 4 * a2;
            if (disc < 0) {
                r[n++] = std::sqrt(-a2);  // complex pair: |z|^2 = -a2
            } else {
                double sq = std::sqrt(disc);
                r[n++] = std::fabs((a1 + sq) / 2);
                r[n++] = std::fabs((a1 - sq) / 2);
            }
        }
        for (int i = 0; i < n; i++) {
            if (!(r[i] <= hi)) hi = r[i];
            if (r[i] < lo) lo = r[i];
        }
    }
    *max_radius = hi;
    *min_radius = std::isfinite(lo) ? lo : 0;
}

}  // namespace stk
