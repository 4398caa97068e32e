// The positional formulas of ingest/rope.h.
#include "ingest/rope.h"

#include <algorithm>
#include <cmath>

namespace stk {

uint32_t rope_angles(const ModelConfig &cfg, std::vector<double> &theta, std::string *note, bool local) {
    // transformers' rope initialisers (modeling_rope_utils), the angles at the model's full context.
    const uint32_t rot = cfg.rotary_dim ? cfg.rotary_dim : cfg.head_dim;
    const uint32_t n = rot / 2;
    theta.assign(n, 0);
    const double base = local && cfg.rope_local_theta > 0 ? cfg.rope_local_theta : cfg.rope_theta;
    for (uint32_t i = 0; i < n; i++) theta[i] = std::pow(base, -2.0 * i / double(rot));
    if (local) return n;  // transformers scales only the global layers' angles
    const std::string type = cfg.rope_scaling_type;
    const double factor = cfg.rope_scaling_factor;
    const double orig = double(cfg.rope_original_max ? cfg.rope_original_max : cfg.max_positions);
    auto unmodelled = [&](const char *why) {
        if (note) *note = "rope_scaling '" + type + "': " + why;
    };
    if (type.empty() || type == "default") return n;
    if (type == "linear" && factor > 0) {
        for (double &t : theta) t /= factor;
    } else if (type == "dynamic") {
        unmodelled("dynamic NTK changes the base only past max_position_embeddings: unscaled angles used");
    } else if (type == "llama3" && factor > 0 && orig > 0) {
        const double lo = cfg.rope_low_freq_factor > 0 ? cfg.rope_low_freq_factor : 1;
        const double hi = cfg.rope_high_freq_factor > 0 ? cfg.rope_high_freq_factor : 4;
        const double lo_wave = orig / lo, hi_wave = orig / hi;
        for (double &t : theta) {
            const double wave = 2 * M_PI / t;
            if (wave > lo_wave) t /= factor;
            else if (wave >= hi_wave) {
                const double smooth = (orig / wave - lo) / (hi - lo);
                t = (1 - smooth) * t / factor + smooth * t;
            }
        }
    } else if (type == "yarn" && factor > 0 && orig > 0) {
        const double fast = cfg.rope_beta_fast > 0 ? cfg.rope_beta_fast : 32,
                     slow = cfg.rope_beta_slow > 0 ? cfg.rope_beta_slow : 1;
        auto corr = [&](double rots) {
            return double(rot) * std::log(orig / (rots * 2 * M_PI)) / (2 * std::log(cfg.rope_theta));
        };
        double low = corr(fast), high = corr(slow);
        if (cfg.rope_yarn_truncate) low = std::floor(low), high = std::ceil(high);  // gpt-oss: "truncate": false
        low = std::max(0.0, low), high = std::min(double(rot - 1), high);
        if (low == high) high += 0.001;
        for (uint32_t i = 0; i < n; i++) {
            const double ramp = std::min(1.0, std::max(0.0, (double(i) - low) / (high - low)));
            const double extrap = 1 - ramp;  // transformers' inv_freq_extrapolation_factor
            theta[i] = theta[i] / factor * (1 - extrap) + theta[i] * extrap;
        }
    } else if (type == "longrope" && cfg.n_rope_long_factor == n) {
        // The long factors: the angles of the model's full context (the short ones hold below
        // original_max_position_embeddings).
        for (uint32_t i = 0; i < n; i++) theta[i] /= double(cfg.rope_long_factor[i]);
        unmodelled("longrope: the long_factor angles (full context) are used; the short ones hold below the original length");
    } else {
        unmodelled("not modelled: the unscaled angles are used (exact below the original context length)");
    }
    return n;
}

void alibi_slopes(uint32_t n_heads, double *out) {
    // BLOOM's build_alibi_tensor: slopes for the closest power of two, then the odd powers of
    // the next one's base for the remaining heads.
    uint32_t cp = 1;
    while (cp * 2 <= n_heads) cp *= 2;
    double base = std::pow(2.0, -std::pow(2.0, -(std::log2(double(cp)) - 3)));
    for (uint32_t i = 0; i < cp; i++) out[i] = std::pow(base, double(i + 1));
    if (cp < n_heads) {
        double extra = std::pow(2.0, -std::pow(2.0, -(std::log2(double(2 * cp)) - 3)));
        for (uint32_t i = 0; i < n_heads - cp; i++) out[cp + i] = std::pow(extra, double(2 * i + 1));
    }
}

}  // namespace stk
