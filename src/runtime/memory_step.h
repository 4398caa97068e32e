// The positional memory of seed 8 at runtime: a parallel bank of second-order sections, each in
// transposed direct form II (DF-II-T), states in double, the bank's sum Kahan-compensated in
// double, and one rounding back to f32 (seed 8.3 / 12.5: a single reduction site).
//
// Section k: y_k[t] = b0 u[t] + b1 u[t-1] + a1 y_k[t-1] + a2 y_k[t-2]
// (the spec's sign convention: y_t = a1 y_{t-1} + a2 y_{t-2} + u_t).  Output y[t] = sum_k y_k[t].
#pragma once

#include <cstddef>
#include <cstdint>

namespace stk {

struct SosSection {
    double b0 = 0, b1 = 0, a1 = 0, a2 = 0;
};
struct SosState {
    double s1 = 0, s2 = 0;  // the two DF-II-T delay registers (delaybuf_init.bin: zeros)
};

// One step of the bank: returns the output in f64 (sum Kahan-compensated in fixed section
// order); the caller rounds it to f32 once (memory_step_f32).
double memory_step(const SosSection *sec, SosState *st, uint32_t n_sections, double u);
inline float memory_step_f32(const SosSection *sec, SosState *st, uint32_t n_sections, float u) {
    return float(memory_step(sec, st, n_sections, double(u)));
}

// The bank's impulse response h[0..n) from zero state; *max_state gets max |register|.
void memory_impulse_response(const SosSection *sec, uint32_t n_sections, size_t n, double *h, double *max_state);

// The largest and smallest pole radius of the bank's sections (a first-order section, a2 = 0,
// has one pole a1; a section with a1 = a2 = 0 has none).
void memory_pole_radii(const SosSection *sec, uint32_t n_sections, double *max_radius, double *min_radius);

}  // namespace stk
