// The reference runtime of the arrays: see refrun.h, docs/format.md "Reference runtime" and
// docs/decisions.md "The reference runtime".
#include "runtime/refrun.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/prng.h"
#include "kernels/random.h"
#include "runtime/generation.h"

namespace stk {

namespace {

constexpr uint64_t kPrfMagic = 0x3130667270746b73ull;   // "stkprf01"
constexpr uint64_t kMemMagic = 0x31306d656d746b73ull;   // "stkmem01"
constexpr uint64_t kFfnMagic = 0x31306e6666746b73ull;   // "stkffn01"
constexpr size_t kPrfHeader = 64;                       // 8 u64/f64 words
constexpr size_t kMemHeader = 32;
constexpr size_t kFfnHeader = 64;

// An array of the manifest by name: its view (mapped and verified on first use), or null.
const stk_array_view *find_array(const stk_generation &g, const char *name, stk_array_view &v) {
    const auto &arrays = g.manifest.arrays;
    for (uint32_t i = 0; i < arrays.size(); i++)
        if (std::strncmp(arrays[i].name, name, sizeof arrays[i].name) == 0) {
            std::memset(&v, 0, sizeof v);
            v.struct_size = sizeof v;
            generation_array(g, i, v);
            return &v;
        }
    return nullptr;
}

// Why a module is off: the manifest's "feature disabled" record, else the absent array.
std::string why_disabled(const Manifest &m, uint32_t feature, const char *array) {
    for (const ManifestRecord &r : m.records)
        if (r.kind == kRecordFeatureDisabled && r.feature == feature)
            return "disabled in this generation: " + std::string(r.text, strnlen(r.text, sizeof r.text));
    return std::string("this generation has no arrays/") + array;
}

void need(bool ok, const char *array, const char *what) {
    if (!ok) throw_error(STK_E_CORRUPT, "arrays/%s: %s", array, what);
}

bool dims_are(const stk_array_view &v, uint32_t dtype, std::initializer_list<uint64_t> dims) {
    if (v.dtype != dtype || v.rank != dims.size()) return false;
    uint32_t i = 0;
    for (uint64_t d : dims)
        if (v.dims[i++] != d) return false;
    return true;
}

// D of layer l from prf_W[l] = f32(g * sqrt(D)) and the generator's draws g (stream(3, l),
// master seed 0): per column the least-squares scale sqrt(D_j) = sum_i g_ij p_ij / sum_i g_ij^2,
// then every stored entry checked to be f32(g_ij * sqrt(D_j)) within one f32 ulp: D is then
// known to the f32 rounding of prf_W (relative error ~1e-8), not bit-exactly (it is not stored).
void recover_diag(const float *w, uint32_t layer, uint64_t r, uint64_t d, double *diag) {
    std::vector<double> g(size_t(r * d)), num(d, 0.0), den(d, 0.0);
    kernels::gaussians(stream_seed(0, kernels::kStreamPrf, layer), 0, size_t(r * d), g.data());
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t j = 0; j < d; j++) {
            double gi = g[i * d + j], p = w[i * d + j];
            num[j] += gi * p;
            den[j] += gi * gi;
        }
    for (uint64_t j = 0; j < d; j++) {
        double s = den[j] > 0 ? num[j] / den[j] : 0;
        for (uint64_t i = 0; i < r; i++) {
            float want = w[i * d + j], got = float(g[i * d + j] * s);
            if (got != want && std::nextafter(got, want) != want)
                throw_error(STK_E_CORRUPT,
                            "arrays/prf_W.bin: layer %u row %llu column %llu: %.9g is not f32(g * sqrt(D)) of the "
                            "generator's Gaussians (seed 0, stream 3): the reference runtime cannot recover D",
                            layer, (unsigned long long)i, (unsigned long long)j, double(want));
        }
        diag[j] = s * s;
    }
}

std::unique_ptr<RefrunModel> build_model(const stk_generation &g) {
    auto m = std::make_unique<RefrunModel>();
    const Manifest &man = g.manifest;
    m->tag = load_le<uint64_t>(man.curr_hash);
    m->tau = man.fields.prf.tau;
    m->beta_floor = man.fields.denominator.beta_floor;
    m->eps = man.fields.prf.whitening_eps;
    stk_array_view w, mu, sig2, r0, s0;
    if (find_array(g, "prf_W.bin", w)) {
        need(w.dtype == uint32_t(DType::F32) && w.rank == 3 && w.dims[0] >= 1 && w.dims[1] >= 1 && w.dims[2] >= 1 &&
                 w.dims[0] <= 65536 && w.dims[1] <= 65536 && w.dims[2] <= (1u << 24),
             "prf_W.bin", "not an [L, r, d_model] f32 array");
        m->n_layers = uint32_t(w.dims[0]);
        m->r = uint32_t(w.dims[1]);
        m->d_model = uint32_t(w.dims[2]);
        const uint64_t L = m->n_layers, r = m->r;
        for (auto [name, view] : {std::pair{"whitening_mu.bin", &mu}, {"whitening_sig2.bin", &sig2}, {"s_init.bin", &s0}}) {
            if (!find_array(g, name, *view))
                throw_error(STK_E_MISSING_ARRAY, "%s: prf_W.bin is present but arrays/%s is not", g.dir.c_str(), name);
            need(dims_are(*view, uint32_t(DType::F32), {L, r}), name, "not [L, r] f32 beside prf_W.bin");
        }
        if (!find_array(g, "R_init.bin", r0))
            throw_error(STK_E_MISSING_ARRAY, "%s: prf_W.bin is present but arrays/R_init.bin is not", g.dir.c_str());
        need(r0.dtype == uint32_t(DType::F32) && r0.rank == 3 && r0.dims[0] == L && r0.dims[1] == r && r0.dims[2] >= 1 &&
                 r0.dims[2] <= (1u << 24),
             "R_init.bin", "not [L, r, d_v] f32 beside prf_W.bin");
        m->d_v = uint32_t(r0.dims[2]);
        need(m->tau > 0 && m->beta_floor > 0, "prf_W.bin", "the manifest's prf.tau and beta_floor must be positive");
        m->prf_w = static_cast<const float *>(w.data);
        m->mu = static_cast<const float *>(mu.data);
        m->sig2 = static_cast<const float *>(sig2.data);
        m->r_init = static_cast<const float *>(r0.data);
        m->s_init = static_cast<const float *>(s0.data);
        m->diag.resize(size_t(L * m->d_model));
        for (uint32_t l = 0; l < L; l++)
            recover_diag(m->prf_w + uint64_t(l) * r * m->d_model, l, r, m->d_model, m->diag.data() + uint64_t(l) * m->d_model);
        m->inv_sig.resize(size_t(L * r));
        m->mu_d.resize(size_t(L * r));
        for (uint64_t i = 0; i < L * r; i++) {
            m->inv_sig[i] = 1.0 / std::sqrt(std::max(double(m->sig2[i]), m->eps));
            m->mu_d[i] = m->mu[i];
        }
        for (uint64_t i = 0; i < L * r * m->d_v && m->init_zero; i++) m->init_zero = m->r_init[i] == 0;
        for (uint64_t i = 0; i < L * r && m->init_zero; i++) m->init_zero = m->s_init[i] == 0;
        m->has_prf = true;
    } else {
        m->prf_reason = why_disabled(man, kFeaturePrf, "prf_W.bin");
    }
    stk_array_view h, u, z;
    if (m->has_prf && find_array(g, "overlays_H.bin", h)) {
        if (!find_array(g, "overlays_U.bin", u) || !find_array(g, "overlays_DeltaW.bin", z))
            throw_error(STK_E_MISSING_ARRAY, "%s: overlays_H.bin is present but overlays_U.bin or overlays_DeltaW.bin is not",
                        g.dir.c_str());
        need(h.dtype == uint32_t(DType::F32) && h.rank == 3 && h.dims[0] == m->n_layers && h.dims[1] == m->r && h.dims[2] >= 1 &&
                 h.dims[2] <= 4096,
             "overlays_H.bin", "not [L, r, r_v] f32 beside prf_W.bin");
        m->r_v = uint32_t(h.dims[2]);
        need(dims_are(u, uint32_t(DType::F32), {m->n_layers, m->d_v, m->r_v}), "overlays_U.bin", "not [L, d_v, r_v] f32");
        need(dims_are(z, uint32_t(DType::F32), {m->n_layers, m->r_v, m->r_v}), "overlays_DeltaW.bin", "not [L, r_v, r_v] f32");
        m->ov_h = static_cast<const float *>(h.data);
        m->ov_u = static_cast<const float *>(u.data);
        m->ov_z = static_cast<const float *>(z.data);
        m->has_overlays = true;
    } else {
        m->overlays_reason = m->has_prf ? why_disabled(man, kFeatureOverlays, "overlays_H.bin")
                                        : "overlays read the PRF features, and " + m->prf_reason;
    }
    stk_array_view mc, mz;
    if (find_array(g, "memory_coeff.bin", mc)) {
        if (!find_array(g, "delaybuf_init.bin", mz))
            throw_error(STK_E_MISSING_ARRAY, "%s: memory_coeff.bin is present but delaybuf_init.bin is not", g.dir.c_str());
        need(mc.dtype == uint32_t(DType::F64) && mc.rank == 2 && mc.dims[1] == 4 && mc.dims[0] >= 1 && mc.dims[0] <= 64,
             "memory_coeff.bin", "not [K, 4] f64 with 1 <= K <= 64");
        need(dims_are(mz, uint32_t(DType::F64), {mc.dims[0], 2}), "delaybuf_init.bin", "not [K, 2] f64 beside memory_coeff.bin");
        const uint64_t K = mc.dims[0];
        for (uint64_t k = 0; k < K; k++) {
            double c[4], s[2];
            std::memcpy(c, static_cast<const uint8_t *>(mc.data) + 32 * k, 32);
            std::memcpy(s, static_cast<const uint8_t *>(mz.data) + 16 * k, 16);
            m->sections.push_back(SosSection{c[0], c[1], c[2], c[3]});
            m->regs0.push_back(SosState{s[0], s[1]});
        }
        m->has_memory = true;
    } else {
        m->memory_reason = why_disabled(man, kFeatureMemory, "memory_coeff.bin");
    }
    if (g.has_linear) {
        // d_model: prf_W's, else the bridge's projection width, else linear_bias's length, else
        // the largest index the keys name.
        uint32_t dm = m->d_model ? m->d_model : man.fields.bridge.proj_cols;
        stk_array_view b;
        if (find_array(g, "linear_bias.bin", b)) {
            need(b.dtype == uint32_t(DType::F32) && b.rank == 1 && b.dims[0] >= 1 && b.dims[0] <= (1u << 24), "linear_bias.bin",
                 "not a [d_model] f32 array");
            if (!dm) dm = uint32_t(b.dims[0]);
            need(b.dims[0] == dm, "linear_bias.bin", "its length is not d_model (prf_W.bin's)");
            m->linear_bias = static_cast<const float *>(b.data);
            m->has_linear_bias = true;
        }
        uint64_t max_u = 0, max_ij = 0;
        auto visit = [&](uint64_t key) {
            max_u = std::max<uint64_t>(max_u, (key >> 48) & 0x7FFF);
            max_ij = std::max<uint64_t>(max_ij, std::max<uint64_t>((key >> 24) & 0xFFFFFF, key & 0xFFFFFF));
        };
        for (uint64_t k = 0; k < g.linear_count; k++) visit(load_le<uint64_t>(g.linear_keys + 8 * k));
        const CuckooTable &t = g.linear_delta;
        for (uint64_t s = 0; s < t.n_buckets * t.b; s++)
            if (t.occ[s / t.b] >> (s % t.b) & 1) visit(t.key_at(s));
        for (uint32_t s = 0; s < t.stash_count; s++) visit(load_le<uint64_t>(t.skeys + 8 * s));
        if (t.emergency_used) visit(t.emergency_key);
        if (!dm) dm = uint32_t(max_ij + 1);
        if (max_ij >= dm)
            throw_error(STK_E_CORRUPT, "arrays/linear_keys.bin: a key names index %llu, d_model is %u", (unsigned long long)max_ij,
                        dm);
        if (!m->d_model) m->d_model = dm;
        m->n_units = g.linear_count || t.items ? uint32_t(max_u + 1) : 0;
        m->n_entries = g.linear_count + t.items;
        m->has_linear = true;
    } else {
        m->linear_reason = why_disabled(man, kFeatureLinear, "linear_mphf.bin");
    }
    refrun_sizes(*m);
    return m;
}

// ---- argument checks ---------------------------------------------------------------------------

void check_layer(const RefrunModel &m, uint32_t layer, const char *fn) {
    if (layer >= m.n_layers)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: layer %u, the generation has %u layers", fn, layer, m.n_layers);
}

void check_buf(const void *p, size_t have, size_t want, const char *fn, const char *what) {
    if (!p) throw_error(STK_E_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
    if (reinterpret_cast<uintptr_t>(p) % 8)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: %s is not 8-byte aligned", fn, what);
    if (have < want)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: %s has %zu bytes, it needs %zu (stk_refrun_info)", fn, what, have, want);
}

void check_ptr(const void *p, const char *fn, const char *what) {
    if (!p) throw_error(STK_E_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
}

void need_prf(const RefrunModel &m, const char *fn) {
    if (!m.has_prf) throw_error(STK_E_MISSING_ARRAY, "%s: no PRF attention: %s", fn, m.prf_reason.c_str());
}

// The PRF state: header words, then R~ [r, d_v], s~ [r], then (memory) the registers.
struct PrfState {
    uint64_t magic, layer_flags, tag;
    double offset;  // M: R = R~ exp(M), s = s~ exp(M)
    uint64_t n_keys, reserved[3];
};
static_assert(sizeof(PrfState) == kPrfHeader);

PrfState *prf_state(const RefrunModel &m, uint32_t layer, void *state, size_t bytes, const char *fn) {
    check_buf(state, bytes, m.prf_state_bytes, fn, "state");
    auto *st = static_cast<PrfState *>(state);
    if (st->magic != kPrfMagic || st->tag != m.tag)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: state was not set by stk_prf_reset on this generation", fn);
    if (uint32_t(st->layer_flags) != layer)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: state belongs to layer %u, not %u", fn, uint32_t(st->layer_flags), layer);
    if ((st->layer_flags >> 32) & kPrfMemory) check_buf(state, bytes, m.prf_state_bytes_memory, fn, "state (memory-filtered)");
    return st;
}

// ---- PRF features ------------------------------------------------------------------------------

// sum_j a[j] b[j] over 8 lanes (lane k: j = k mod 8, j ascending), lanes summed in a fixed tree.
inline double dot8(const float *a, const float *b, uint64_t n) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    uint64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += double(a[j + k]) * double(b[j + k]);
    for (int k = 0; j < n; j++, k++) acc[k] += double(a[j]) * double(b[j]);
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// e[i] = w_i . x / sqrt(tau) - x^T D x / (2 tau) (the log of phi_i without r^-1/2); returns max_i e[i].
double exponents(const RefrunModel &m, uint32_t layer, const float *x, double *e) {
    const uint64_t d = m.d_model;
    const double *D = m.diag.data() + uint64_t(layer) * d;
    double q = 0;
    for (uint64_t j = 0; j < d; j++) q += D[j] * double(x[j]) * double(x[j]);
    const double st = std::sqrt(m.tau), half = q / (2 * m.tau);
    const float *w = m.prf_w + uint64_t(layer) * m.r * d;
    double mx = -std::numeric_limits<double>::infinity();
    for (uint64_t i = 0; i < m.r; i++) {
        e[i] = dot8(w + i * d, x, d) / st - half;
        if (e[i] > mx || std::isnan(e[i])) mx = e[i];
    }
    return mx;
}

// f~[i] = phi_w_i(x) exp(-shift) = (r^-1/2 exp(e_i - shift) - mu_i exp(-shift)) / sqrt(max(sig2_i, eps)).
void features(const RefrunModel &m, uint32_t layer, const double *e, double shift, double *f) {
    const double rs = 1.0 / std::sqrt(double(m.r));
    const double *inv = m.inv_sig.data() + uint64_t(layer) * m.r, *mu = m.mu_d.data() + uint64_t(layer) * m.r;
    for (uint64_t i = 0; i < m.r; i++) {
        double v = rs * std::exp(e[i] - shift);
        if (mu[i] != 0) v -= mu[i] * std::exp(-shift);
        f[i] = v * inv[i];
    }
}

void add_key_e(const RefrunModel &m, PrfState *st, const double *e, double emax, const float *v, double *f) {
    const uint64_t r = m.r, dv = m.d_v;
    double *R = reinterpret_cast<double *>(st + 1), *s = R + r * dv;
    const bool mem = (st->layer_flags >> 32) & kPrfMemory;
    const uint32_t K = uint32_t(m.sections.size());
    SosState *regs = mem ? reinterpret_cast<SosState *>(s + r) : nullptr;
    const uint64_t channels = r * dv + r;
    // A larger exponent than the state's offset: rescale the state (and the filter's registers:
    // the bank is linear) to the new offset first.
    if (emax > st->offset || std::isnan(emax)) {
        const double c = std::exp(st->offset - emax);  // offset -inf (empty): 0
        for (uint64_t k = 0; k < channels; k++) R[k] = R[k] == 0 ? 0 : R[k] * c;
        if (mem)
            for (uint64_t k = 0; k < channels * K; k++) {
                regs[k].s1 = regs[k].s1 == 0 ? 0 : regs[k].s1 * c;
                regs[k].s2 = regs[k].s2 == 0 ? 0 : regs[k].s2 * c;
            }
        st->offset = emax;
    }
    features(m, uint32_t(st->layer_flags), e, st->offset, f);
    if (!mem) {
        for (uint64_t i = 0; i < r; i++) {
            const double fi = f[i];
            double *Ri = R + i * dv;
            for (uint64_t j = 0; j < dv; j++) Ri[j] += fi * double(v[j]);
            s[i] += fi;
        }
    } else {
        const SosSection *sec = m.sections.data();
        for (uint64_t i = 0; i < r; i++) {
            const double fi = f[i];
            double *Ri = R + i * dv;
            SosState *ri = regs + i * dv * K;
            for (uint64_t j = 0; j < dv; j++) Ri[j] = memory_step(sec, ri + j * K, K, fi * double(v[j]));
        }
        SosState *rs = regs + r * dv * K;
        for (uint64_t i = 0; i < r; i++) s[i] = memory_step(sec, rs + i * K, K, f[i]);
    }
    st->n_keys++;
}

// log_den null: the floored read of stk_prf_read.  Else num / den unfloored and log(den) unshifted.
void read_e(const RefrunModel &m, const PrfState *st, const double *e, double emax, float *out, double *f, double *acc,
            double *log_den = nullptr) {
    const uint64_t r = m.r, dv = m.d_v;
    const double *R = reinterpret_cast<const double *>(st + 1), *s = R + r * dv;
    features(m, uint32_t(st->layer_flags), e, emax, f);
    double den = 0;
    for (uint64_t i = 0; i < r; i++) den += f[i] * s[i];
    for (uint64_t j = 0; j < dv; j++) acc[j] = 0;
    for (uint64_t i = 0; i < r; i++) {
        const double fi = f[i];
        const double *Ri = R + i * dv;
        for (uint64_t j = 0; j < dv; j++) acc[j] += fi * Ri[j];
    }
    if (log_den) {
        const bool empty = !(den > 0);
        *log_den = empty ? -std::numeric_limits<double>::infinity() : std::log(den) + emax + st->offset;
        for (uint64_t j = 0; j < dv; j++) out[j] = empty ? 0.0f : float(acc[j] / den);
        return;
    }
    // num and den carry exp(-(emax + offset)); the floor is compared in the same scale.
    const double floor = m.beta_floor * std::exp(-(emax + st->offset));
    const double d = den >= floor ? den : floor;
    for (uint64_t j = 0; j < dv; j++) out[j] = float(acc[j] / d);
}

struct Scratch {
    double *e, *f, *acc, *a, *b;
};
Scratch scratch_of(const RefrunModel &m, void *scratch) {
    Scratch s;
    s.e = static_cast<double *>(scratch);
    s.f = s.e + m.r;
    s.acc = s.f + m.r;
    s.a = s.acc + std::max(m.d_v, m.d_model);
    s.b = s.a + m.r_v;
    return s;
}

void delta_e(const RefrunModel &m, uint32_t layer, const double *e, double emax, float *out, const Scratch &s) {
    const uint64_t r = m.r, rv = m.r_v, dv = m.d_v;
    const float *H = m.ov_h + uint64_t(layer) * r * rv, *U = m.ov_u + uint64_t(layer) * dv * rv,
                *Z = m.ov_z + uint64_t(layer) * rv * rv;
    features(m, layer, e, emax, s.f);
    for (uint64_t c = 0; c < rv; c++) s.a[c] = 0;
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t c = 0; c < rv; c++) s.a[c] += s.f[i] * double(H[i * rv + c]);
    const double scale = std::exp(emax);
    for (uint64_t c = 0; c < rv; c++) s.a[c] *= scale;  // phi_w(q)^T H, unshifted
    for (uint64_t c = 0; c < rv; c++) {
        double t = 0;
        for (uint64_t i = 0; i < rv; i++) t += s.a[i] * double(Z[i * rv + c]);
        s.b[c] = t;
    }
    for (uint64_t j = 0; j < dv; j++) {
        double t = 0;
        for (uint64_t c = 0; c < rv; c++) t += double(U[j * rv + c]) * s.b[c];
        out[j] = float(t);
    }
}

// ---- FFN index ---------------------------------------------------------------------------------

struct FfnHeader {
    uint64_t magic, tag;
    uint32_t d_model, n_units;
    uint64_t n_entries, reserved[4];
};
static_assert(sizeof(FfnHeader) == kFfnHeader);
struct FfnEntry {
    uint32_t i;
    float v;
};

}  // namespace

void refrun_sizes(RefrunModel &m) {
    // Buffer sizes (checked arithmetic: the dims are bounded above, but their products are not).
    const char *what = "reference runtime buffer size";
    if (m.has_prf) {
        const uint64_t channels = checked_add(checked_mul(m.r, m.d_v, what), m.r, what);
        m.prf_state_bytes = size_t(checked_add(kPrfHeader, checked_mul(channels, 8, what), what));
        if (m.has_memory)
            m.prf_state_bytes_memory = size_t(
                checked_add(m.prf_state_bytes, checked_mul(channels, 16 * uint64_t(m.sections.size()), what), what));
        m.scratch_bytes = size_t(8 * (2 * uint64_t(m.r) + std::max<uint64_t>(m.d_v, m.d_model) + 2 * uint64_t(m.r_v)));
    }
    if (m.has_memory) m.memory_state_bytes = kMemHeader + 16 * m.sections.size();
    if (m.has_linear) {
        const uint64_t buckets = checked_mul(uint64_t(m.n_units) * 2, m.d_model, what);
        m.ffn_index_bytes = size_t(
            checked_add(checked_add(kFfnHeader, checked_mul(buckets + 1, 8, what), what), checked_mul(m.n_entries, 8, what), what));
    }
}

const RefrunModel &refrun_model(const stk_generation &g) {
    std::lock_guard<std::mutex> lock(g.refrun_mu);
    if (!g.refrun) g.refrun = std::shared_ptr<const RefrunModel>(build_model(g).release());
    return *g.refrun;
}

void prf_reset(const RefrunModel &m, uint32_t layer, uint32_t flags, void *state, size_t bytes) {
    const char *fn = "stk_prf_reset";
    need_prf(m, fn);
    check_layer(m, layer, fn);
    if (flags & ~kPrfMemory) throw_error(STK_E_INVALID_ARGUMENT, "%s: unknown flags 0x%x", fn, flags & ~kPrfMemory);
    const bool mem = flags & kPrfMemory;
    if (mem && !m.has_memory)
        throw_error(STK_E_MISSING_ARRAY, "%s: STK_PRF_MEMORY needs the positional memory: %s", fn, m.memory_reason.c_str());
    check_buf(state, bytes, mem ? m.prf_state_bytes_memory : m.prf_state_bytes, fn, "state");
    auto *st = static_cast<PrfState *>(state);
    std::memset(st, 0, kPrfHeader);
    st->magic = kPrfMagic;
    st->layer_flags = layer | (uint64_t(flags) << 32);
    st->tag = m.tag;
    // R_init / s_init all zero (every generation today): no key yet, offset -inf (exp(-inf) = 0
    // rescales the empty state to any first key's scale).  Otherwise the arrays at offset 0.
    st->offset = m.init_zero ? -std::numeric_limits<double>::infinity() : 0.0;
    const uint64_t r = m.r, dv = m.d_v;
    double *R = reinterpret_cast<double *>(st + 1), *s = R + r * dv;
    const float *R0 = m.r_init + uint64_t(layer) * r * dv, *s0 = m.s_init + uint64_t(layer) * r;
    for (uint64_t k = 0; k < r * dv; k++) R[k] = R0[k];
    for (uint64_t k = 0; k < r; k++) s[k] = s0[k];
    if (mem) {
        const uint64_t K = m.sections.size();
        SosState *regs = reinterpret_cast<SosState *>(s + r);
        for (uint64_t c = 0; c < r * dv + r; c++)
            for (uint64_t k = 0; k < K; k++) regs[c * K + k] = m.regs0[k];
    }
}

void prf_add_key(const RefrunModel &m, uint32_t layer, void *state, size_t state_bytes, const float *x, const float *v,
                 void *scratch, size_t scratch_bytes) {
    const char *fn = "stk_prf_add_key";
    need_prf(m, fn);
    check_layer(m, layer, fn);
    PrfState *st = prf_state(m, layer, state, state_bytes, fn);
    check_ptr(x, fn, "x_key");
    check_ptr(v, fn, "v");
    check_buf(scratch, scratch_bytes, m.scratch_bytes, fn, "scratch");
    Scratch s = scratch_of(m, scratch);
    double emax = exponents(m, layer, x, s.e);
    add_key_e(m, st, s.e, emax, v, s.f);
}

void prf_read(const RefrunModel &m, uint32_t layer, const void *state, size_t state_bytes, const float *x, float *out,
              void *scratch, size_t scratch_bytes) {
    const char *fn = "stk_prf_read";
    need_prf(m, fn);
    check_layer(m, layer, fn);
    const PrfState *st = prf_state(m, layer, const_cast<void *>(state), state_bytes, fn);
    check_ptr(x, fn, "x_query");
    check_ptr(out, fn, "out");
    check_buf(scratch, scratch_bytes, m.scratch_bytes, fn, "scratch");
    Scratch s = scratch_of(m, scratch);
    double emax = exponents(m, layer, x, s.e);
    read_e(m, st, s.e, emax, out, s.f, s.acc);
}

void prf_read_parts(const RefrunModel &m, uint32_t layer, const void *state, size_t state_bytes, const float *x, float *out,
                    double *log_den, void *scratch, size_t scratch_bytes) {
    const char *fn = "stk_prf_read_parts";
    need_prf(m, fn);
    check_layer(m, layer, fn);
    const PrfState *st = prf_state(m, layer, const_cast<void *>(state), state_bytes, fn);
    check_ptr(x, fn, "x_query");
    check_ptr(out, fn, "out");
    check_ptr(log_den, fn, "out_log_den");
    check_buf(scratch, scratch_bytes, m.scratch_bytes, fn, "scratch");
    Scratch s = scratch_of(m, scratch);
    double emax = exponents(m, layer, x, s.e);
    read_e(m, st, s.e, emax, out, s.f, s.acc, log_den);
}

void prf_run(const RefrunModel &m, uint32_t layer, void *state, size_t state_bytes, uint64_t n, const float *x, const float *v,
             float *out, void *scratch, size_t scratch_bytes) {
    const char *fn = "stk_prf_run";
    need_prf(m, fn);
    check_layer(m, layer, fn);
    PrfState *st = prf_state(m, layer, state, state_bytes, fn);
    if (n) {
        check_ptr(x, fn, "x");
        check_ptr(v, fn, "v");
        check_ptr(out, fn, "out");
    }
    check_buf(scratch, scratch_bytes, m.scratch_bytes, fn, "scratch");
    Scratch s = scratch_of(m, scratch);
    for (uint64_t t = 0; t < n; t++) {
        const float *xt = x + t * m.d_model;
        double emax = exponents(m, layer, xt, s.e);  // the key and the query are the same hidden state
        add_key_e(m, st, s.e, emax, v + t * m.d_v, s.f);
        read_e(m, st, s.e, emax, out + t * m.d_v, s.f, s.acc);
    }
}

void overlay_delta(const RefrunModel &m, uint32_t layer, const float *x, float *out, void *scratch, size_t scratch_bytes) {
    overlay_run(m, layer, 1, x, out, scratch, scratch_bytes);
}

void overlay_run(const RefrunModel &m, uint32_t layer, uint64_t n, const float *x, float *out, void *scratch,
                 size_t scratch_bytes) {
    const char *fn = n == 1 ? "stk_overlay_delta" : "stk_overlay_run";
    if (!m.has_overlays) throw_error(STK_E_MISSING_ARRAY, "%s: no overlays: %s", fn, m.overlays_reason.c_str());
    check_layer(m, layer, fn);
    if (n) {
        check_ptr(x, fn, "x_query");
        check_ptr(out, fn, "out");
    }
    check_buf(scratch, scratch_bytes, m.scratch_bytes, fn, "scratch");
    Scratch s = scratch_of(m, scratch);
    for (uint64_t t = 0; t < n; t++) {
        double emax = exponents(m, layer, x + t * m.d_model, s.e);
        delta_e(m, layer, s.e, emax, out + t * m.d_v, s);
    }
}

void ffn_index_from(const RefrunModel &m, void *index, size_t bytes, const uint64_t *keys, const float *values, uint64_t n) {
    const char *fn = "stk_ffn_index_build";
    check_buf(index, bytes, m.ffn_index_bytes, fn, "index");
    if (n > m.n_entries)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: %llu entries, the index was sized for %llu", fn, (unsigned long long)n,
                    (unsigned long long)m.n_entries);
    auto *h = static_cast<FfnHeader *>(index);
    std::memset(h, 0, kFfnHeader);
    const uint64_t d = m.d_model, buckets = uint64_t(m.n_units) * 2 * d;
    uint64_t *off = reinterpret_cast<uint64_t *>(h + 1);
    FfnEntry *ent = reinterpret_cast<FfnEntry *>(off + buckets + 1);
    for (uint64_t b = 0; b <= buckets; b++) off[b] = 0;
    auto bucket_of = [&](uint64_t key) {
        const uint64_t s = key >> 63, u = (key >> 48) & 0x7FFF, i = (key >> 24) & 0xFFFFFF, j = key & 0xFFFFFF;
        if (u >= m.n_units || i >= d || j >= d)
            throw_error(STK_E_CORRUPT, "%s: key %016llx outside %u units of d_model %u", fn, (unsigned long long)key, m.n_units,
                        m.d_model);
        return (u * 2 + s) * d + j;
    };
    for (uint64_t k = 0; k < n; k++) off[bucket_of(keys[k]) + 1]++;
    for (uint64_t b = 0; b < buckets; b++) off[b + 1] += off[b];
    // Fill: off[b] walks bucket b's slots, then is shifted back.
    for (uint64_t k = 0; k < n; k++) ent[off[bucket_of(keys[k])]++] = FfnEntry{uint32_t((keys[k] >> 24) & 0xFFFFFF), values[k]};
    for (uint64_t b = buckets; b > 0; b--) off[b] = off[b - 1];
    off[0] = 0;
    for (uint64_t b = 0; b < buckets; b++)
        std::sort(ent + off[b], ent + off[b + 1], [](const FfnEntry &a, const FfnEntry &c) { return a.i < c.i; });
    h->magic = kFfnMagic;
    h->tag = m.tag;
    h->d_model = m.d_model;
    h->n_units = m.n_units;
    h->n_entries = n;
}

void ffn_index_build(const stk_generation &g, const RefrunModel &m, void *index, size_t bytes) {
    const char *fn = "stk_ffn_index_build";
    if (!m.has_linear) throw_error(STK_E_MISSING_ARRAY, "%s: no linear dictionary: %s", fn, m.linear_reason.c_str());
    check_buf(index, bytes, m.ffn_index_bytes, fn, "index");
    const CuckooTable &t = g.linear_delta;
    std::vector<uint64_t> keys;
    std::vector<float> values;
    keys.reserve(size_t(m.n_entries));
    values.reserve(size_t(m.n_entries));
    // Every key resolved through the lookup path (linear_find: MPHF + key guard, then the cuckoo
    // table).  A delta key the MPHF's guard also answers (a key in both) is never reached by a
    // lookup: the base value is what stk_lookup gives, and the key is counted once.
    auto add = [&](uint64_t key, bool base) {
        if (!base) {
            uint64_t idx = g.linear_mphf.index_u64(key);
            if (idx < g.linear_count && load_le<uint64_t>(g.linear_keys + 8 * idx) == key) return;
        }
        float v = 0;
        if (!linear_find(g, key, &v, nullptr))
            throw_error(STK_E_CORRUPT, "%s: key %016llx enumerated from the arrays is not found by the lookup", fn,
                        (unsigned long long)key);
        keys.push_back(key);
        values.push_back(v);
    };
    for (uint64_t k = 0; k < g.linear_count; k++) add(load_le<uint64_t>(g.linear_keys + 8 * k), true);
    for (uint64_t sl = 0; sl < t.n_buckets * t.b; sl++)
        if (t.occ[sl / t.b] >> (sl % t.b) & 1) add(t.key_at(sl), false);
    for (uint32_t sl = 0; sl < t.stash_count; sl++) add(load_le<uint64_t>(t.skeys + 8 * sl), false);
    if (t.emergency_used) add(t.emergency_key, false);
    ffn_index_from(m, index, bytes, keys.data(), values.data(), keys.size());
}

void ffn_apply(const RefrunModel &m, const void *index, size_t bytes, uint32_t unit, uint64_t n, const float *x, float *y) {
    const char *fn = n == 1 ? "stk_ffn_apply" : "stk_ffn_apply_batch";
    if (!m.has_linear) throw_error(STK_E_MISSING_ARRAY, "%s: no linear dictionary: %s", fn, m.linear_reason.c_str());
    check_buf(index, bytes, m.ffn_index_bytes, fn, "index");
    const auto *h = static_cast<const FfnHeader *>(index);
    if (h->magic != kFfnMagic || h->tag != m.tag || h->d_model != m.d_model || h->n_units != m.n_units ||
        h->n_entries > m.n_entries)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: index was not built by stk_ffn_index_build on this generation", fn);
    if (unit >= m.n_units)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: unit %u, the dictionary has %u FFN units", fn, unit, m.n_units);
    if (n) {
        check_ptr(x, fn, "x");
        check_ptr(y, fn, "y");
    }
    const uint64_t d = m.d_model;
    const uint64_t *off = reinterpret_cast<const uint64_t *>(h + 1);
    const FfnEntry *ent = reinterpret_cast<const FfnEntry *>(off + uint64_t(m.n_units) * 2 * d + 1);
    // One double accumulator per output, held on the stack for a block of outputs at a time;
    // every output is the sum over j ascending whatever the block.
    constexpr uint64_t kBlock = 1024;
    double acc[kBlock];
    for (uint64_t t = 0; t < n; t++) {
        const float *xt = x + t * d;
        float *yt = y + t * d;
        for (uint64_t i0 = 0; i0 < d; i0 += kBlock) {
            const uint64_t i1 = std::min(d, i0 + kBlock);
            for (uint64_t i = i0; i < i1; i++) acc[i - i0] = 0;
            for (uint64_t j = 0; j < d; j++) {
                const float xj = xt[j];
                if (xj == 0) continue;  // |x_j| M[:, j] adds zeros
                const uint64_t s = std::signbit(xj) ? 1 : 0;
                const double a = std::fabs(double(xj));
                const uint64_t b = (uint64_t(unit) * 2 + s) * d + j;
                const uint64_t lo = off[b], hi = off[b + 1];
                if (lo > hi || hi > h->n_entries)
                    throw_error(STK_E_INVALID_ARGUMENT, "%s: index offsets are damaged (bucket %llu)", fn, (unsigned long long)b);
                // Entries are sorted by output i: skip to this block's outputs.
                uint64_t k = lo;
                if (i0) k = uint64_t(std::lower_bound(ent + lo, ent + hi, uint32_t(i0),
                                                      [](const FfnEntry &e, uint32_t v) { return e.i < v; }) -
                                     ent);
                for (; k < hi && ent[k].i < i1; k++) {
                    if (ent[k].i < i0)
                        throw_error(STK_E_INVALID_ARGUMENT, "%s: index entries are damaged (bucket %llu)", fn,
                                    (unsigned long long)b);
                    acc[ent[k].i - i0] += a * double(ent[k].v);
                }
            }
            for (uint64_t i = i0; i < i1; i++) yt[i] = float(acc[i - i0]);
        }
    }
}

void ffn_bias(const RefrunModel &m, float *out, size_t n) {
    const char *fn = "stk_ffn_bias";
    if (!m.has_linear) throw_error(STK_E_MISSING_ARRAY, "%s: no linear dictionary: %s", fn, m.linear_reason.c_str());
    if (!m.has_linear_bias)
        throw_error(STK_E_MISSING_ARRAY, "%s: this generation has no arrays/linear_bias.bin (the model's FFNs have no biases)",
                    fn);
    check_ptr(out, fn, "out");
    if (n != m.d_model) throw_error(STK_E_INVALID_ARGUMENT, "%s: n is %zu, d_model is %u", fn, n, m.d_model);
    std::memcpy(out, m.linear_bias, 4 * n);
}

void memory_reset(const RefrunModel &m, void *state, size_t bytes) {
    const char *fn = "stk_memory_reset";
    if (!m.has_memory) throw_error(STK_E_MISSING_ARRAY, "%s: no positional memory: %s", fn, m.memory_reason.c_str());
    check_buf(state, bytes, m.memory_state_bytes, fn, "state");
    uint64_t *h = static_cast<uint64_t *>(state);
    h[0] = kMemMagic;
    h[1] = m.tag;
    h[2] = m.sections.size();
    h[3] = 0;
    std::memcpy(h + 4, m.regs0.data(), 16 * m.sections.size());
}

void memory_step_state(const RefrunModel &m, void *state, size_t bytes, float u, float *y) {
    const char *fn = "stk_memory_step";
    if (!m.has_memory) throw_error(STK_E_MISSING_ARRAY, "%s: no positional memory: %s", fn, m.memory_reason.c_str());
    check_buf(state, bytes, m.memory_state_bytes, fn, "state");
    check_ptr(y, fn, "y");
    uint64_t *h = static_cast<uint64_t *>(state);
    if (h[0] != kMemMagic || h[1] != m.tag)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: state was not set by stk_memory_reset on this generation", fn);
    *y = memory_step_f32(m.sections.data(), reinterpret_cast<SosState *>(h + 4), uint32_t(m.sections.size()), u);
}

}  // namespace stk
