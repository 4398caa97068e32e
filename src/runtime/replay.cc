// Replay: see replay.h and docs/decisions.md "`stk replay`".
#include "runtime/replay.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/bytes.h"
#include "core/error.h"
#include "core/prng.h"
#include "kernels/random.h"
#include "hash/hub_bits.h"
#include "tokenizer/bpe.h"
#include "tokenizer/greedy.h"
#include "tokenizer/vocab_io.h"

namespace stk {

namespace {

bool exists(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

const float *f32(const ArrayReader &a) { return reinterpret_cast<const float *>(a.payload()); }

// Why a module is off: the manifest's "feature disabled" record for it, else the absent array.
std::string disabled_reason(const Manifest &m, std::initializer_list<Feature> features, const char *array) {
    for (const ManifestRecord &r : m.records)
        if (r.kind == kRecordFeatureDisabled)
            for (Feature f : features)
                if (r.feature == f) return std::string(r.text, strnlen(r.text, sizeof r.text));
    return std::string("no ") + array + " in this generation";
}

void need(bool ok, const std::string &what) {
    if (!ok) throw_error(STK_E_CORRUPT, "replay: %s", what.c_str());
}

}  // namespace

Replayer::Replayer(const stk_generation &g) : g_(g), manifest_(read_manifest(g.dir + "/" + kManifestFileName)) {
    static const char kTag[] = "stk.replay.v1";
    sha_.update(kTag, sizeof kTag);
    const std::string arrays = g.dir + "/" + kArraysDirName + "/";
    modules_.resize(kReplayModules);
    const char *names[kReplayModules] = {"token", "linear", "prf", "overlays", "memory", "bridge"};
    for (int i = 0; i < kReplayModules; i++) modules_[i].name = names[i];

    ReplayModuleStatus &tok = modules_[kReplayToken];
    tok.enabled = g.has_tokenizer;
    tok.detail = g.has_tokenizer ? "greedy token tables: TOKEN_BYTES and TOKEN_ID round trip"
                                 : disabled_reason(manifest_, {kFeatureTokenizerFst}, "tokenizer_fst.bin") +
                                       " (ids from the model's own tokenizer)";

    ReplayModuleStatus &lin = modules_[kReplayLinear];
    if (g.has_linear) {
        // The dictionary's shape from its base keys (read once): d = 1 + the largest input or
        // output index, units = 1 + the largest unit.
        for (uint64_t r = 0; r < g.linear_count; r++) {
            uint64_t k = load_le<uint64_t>(g.linear_keys + 8 * r);
            lin_d_ = std::max<uint64_t>({lin_d_, (k & 0xFFFFFF) + 1, ((k >> 24) & 0xFFFFFF) + 1});
            lin_units_ = std::max<uint64_t>(lin_units_, ((k >> 48) & 0x7FFF) + 1);
        }
        need(lin_d_ > 0 && lin_units_ > 0, "the linear dictionary holds no keys");
        lin_y_.assign(lin_d_, 0.0);
        lin.enabled = true;
        lin.detail = format("%llu units, d %llu: column M^s[:, j] of one unit per token (base + delta)",
                            (unsigned long long)lin_units_, (unsigned long long)lin_d_);
    } else {
        lin.detail = disabled_reason(manifest_, {kFeatureLinear, kFeatureMphfCuckoo}, "linear_mphf.bin");
    }

    if (exists(arrays + "prf_W.bin")) open_prf(arrays);
    else modules_[kReplayPrf].detail = disabled_reason(manifest_, {kFeaturePrf}, "prf_W.bin");

    if (!exists(arrays + "overlays_H.bin"))
        modules_[kReplayOverlays].detail = disabled_reason(manifest_, {kFeatureOverlays}, "overlays_H.bin");
    else if (!modules_[kReplayPrf].enabled) modules_[kReplayOverlays].detail = "needs the prf features, and prf is disabled";
    else open_overlays(arrays);

    if (exists(arrays + "memory_coeff.bin")) open_memory(arrays);
    else modules_[kReplayMemory].detail = disabled_reason(manifest_, {kFeatureMemory}, "memory_coeff.bin");

    // The bridge's hub bitsets (seed 9.2) through stk_lookup(STK_LOOKUP_HUB): hub_step.
    if (exists(arrays + "bridge_hubs.bin")) {
        modules_[kReplayBridge].enabled = true;
        modules_[kReplayBridge].detail = "hub bitset of the token in its context (the two previous ids), STK_LOOKUP_HUB";
    } else {
        modules_[kReplayBridge].detail = disabled_reason(manifest_, {kFeatureBridge}, "bridge_hubs.bin");
    }
    // The digest names the modules that ran, so that a module turning off changes it.
    for (const ReplayModuleStatus &m : modules_) {
        uint8_t on = m.enabled;
        sha_.update(m.name, std::strlen(m.name) + 1);
        sha_.update(&on, 1);
    }
}

void Replayer::open_prf(const std::string &arrays) {
    prf_w_ = std::make_unique<ArrayReader>(arrays + "prf_W.bin", false);  // verified at open
    prf_mu_ = std::make_unique<ArrayReader>(arrays + "whitening_mu.bin", false);
    prf_sig2_ = std::make_unique<ArrayReader>(arrays + "whitening_sig2.bin", false);
    prf_s0_ = std::make_unique<ArrayReader>(arrays + "s_init.bin", false);
    const ArrayHeader &h = prf_w_->header();
    need(h.dtype == uint16_t(DType::F32) && h.rank == 3, "prf_W.bin is not [L, r, d_model] f32");
    L_ = h.dims[0];
    r_ = h.dims[1];
    d_ = h.dims[2];
    for (const ArrayReader *a : {prf_mu_.get(), prf_sig2_.get(), prf_s0_.get()})
        need(a->header().dtype == uint16_t(DType::F32) && a->header().rank == 2 && a->header().dims[0] == L_ &&
                 a->header().dims[1] == r_,
             a->path() + " is not [L, r] f32 beside prf_W.bin");
    tau_ = manifest_.fields.prf.tau;
    eps_ = manifest_.fields.prf.whitening_eps;
    beta_floor_ = manifest_.fields.denominator.beta_floor;
    need(tau_ > 0 && beta_floor_ > 0, "the manifest's prf.tau / beta_floor are not positive");
    // D is not stored (docs/format.md): its estimate from prf_W's own columns (prf_W[l, i, j] =
    // g sqrt(D_l[j])), so that the exponent's normaliser x^T D x uses the layer's scales.
    dhat_.assign(L_ * d_, 0.0);
    const float *w = f32(*prf_w_);
    for (uint64_t l = 0; l < L_; l++)
        for (uint64_t i = 0; i < r_; i++)
            for (uint64_t j = 0; j < d_; j++) {
                double v = w[(l * r_ + i) * d_ + j];
                dhat_[l * d_ + j] += v * v;
            }
    for (double &v : dhat_) v /= double(r_);
    s_.resize(L_ * r_);
    const float *s0 = f32(*prf_s0_);
    for (uint64_t i = 0; i < L_ * r_; i++) s_[i] = s0[i];
    f_.assign(L_ * r_, 0.0);
    modules_[kReplayPrf].enabled = true;
    modules_[kReplayPrf].detail = format(
        "L %llu, r %llu, d_model %llu: whitened features of the token's probe, "
        "denominator floored at beta_floor %g",
        (unsigned long long)L_, (unsigned long long)r_, (unsigned long long)d_, beta_floor_);
}

void Replayer::open_overlays(const std::string &arrays) {
    ov_h_ = std::make_unique<ArrayReader>(arrays + "overlays_H.bin", false);
    ov_u_ = std::make_unique<ArrayReader>(arrays + "overlays_U.bin", false);
    ov_z_ = std::make_unique<ArrayReader>(arrays + "overlays_DeltaW.bin", false);
    const ArrayHeader &h = ov_h_->header(), &u = ov_u_->header(), &z = ov_z_->header();
    need(h.rank == 3 && h.dims[0] == L_ && h.dims[1] == r_, "overlays_H.bin is not [L, r, r_v] beside prf_W.bin");
    rv_ = h.dims[2];
    need(u.rank == 3 && u.dims[0] == L_ && u.dims[2] == rv_, "overlays_U.bin is not [L, d_v, r_v]");
    dv_ = u.dims[1];
    need(z.rank == 3 && z.dims[0] == L_ && z.dims[1] == rv_ && z.dims[2] == rv_, "overlays_DeltaW.bin is not [L, r_v, r_v]");
    for (const ArrayHeader *a : {&h, &u, &z}) need(a->dtype == uint16_t(DType::F32), "overlay arrays must be f32");
    dc_.assign(dv_, 0.0);
    modules_[kReplayOverlays].enabled = true;
    modules_[kReplayOverlays].detail =
        format("r_v %llu, d_v %llu: deltaC = U Z^T H^T f per layer", (unsigned long long)rv_, (unsigned long long)dv_);
}

void Replayer::open_memory(const std::string &arrays) {
    ArrayReader c(arrays + "memory_coeff.bin", false), z(arrays + "delaybuf_init.bin", false);
    const ArrayHeader &hc = c.header(), &hz = z.header();
    need(hc.dtype == uint16_t(DType::F64) && hc.rank == 2 && hc.dims[1] == 4 && hc.dims[0] >= 1 && hc.dims[0] <= 64,
         "memory_coeff.bin is not [K, 4] f64");
    need(hz.dtype == uint16_t(DType::F64) && hz.rank == 2 && hz.dims[0] == hc.dims[0] && hz.dims[1] == 2,
         "delaybuf_init.bin is not [K, 2] f64");
    const uint64_t K = hc.dims[0];
    sec_.resize(K);
    st_.resize(K);
    for (uint64_t k = 0; k < K; k++) {
        double v[4], s[2];
        std::memcpy(v, c.payload() + 32 * k, 32);
        std::memcpy(s, z.payload() + 16 * k, 16);
        sec_[k] = SosSection{v[0], v[1], v[2], v[3]};
        st_[k] = SosState{s[0], s[1]};
    }
    modules_[kReplayMemory].enabled = true;
    modules_[kReplayMemory].detail = format("%llu sections: one DF-II-T step per token", (unsigned long long)K);
}

// The token's probe: Gaussians 0..n-1 of stream(master 0, module 0x1010, layer = token id).  The
// generation holds no embedding table; the probe is a fixed, seeded stand-in of the token's
// hidden state (N(0, I), as after a norm layer).
void Replayer::probe(uint32_t id, uint64_t n) {
    x_.resize(n);
    kernels::gaussians(stream_seed(0, kernels::kStreamReplay, id), 0, size_t(n), x_.data());
}

void Replayer::put_f64(const double *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint8_t b[8];
        uint64_t bits;
        std::memcpy(&bits, &v[i], 8);
        store_le<uint64_t>(b, bits);
        sha_.update(b, 8);
    }
}

// linear: the token activates input j = id mod d with sign s = (id / d) mod 2 in unit
// u = id mod units; it reads M^s[i, j] for every output i < d (base, else delta, else 0).
void Replayer::linear_step(ReplayToken &t) {
    t.lin_unit = uint32_t(t.id % lin_units_);
    t.lin_input = uint32_t(t.id % lin_d_);
    t.lin_sign = uint32_t((t.id / lin_d_) % 2);
    double sq = 0;
    for (uint64_t i = 0; i < lin_d_; i++) {
        uint64_t key = (uint64_t(t.lin_sign) << 63) | (uint64_t(t.lin_unit) << 48) | (i << 24) | t.lin_input;
        float v = 0;
        uint32_t probes = 0;
        bool found = linear_find(g_, key, &v, &probes);
        t.lin_probes = std::max(t.lin_probes, probes);
        if (!found) t.lin_zero++, v = 0;
        else if (probes == 1) t.lin_base++;
        else t.lin_delta++;
        lin_y_[i] = v;
        sq += double(v) * double(v);
    }
    t.lin_norm = std::sqrt(sq);
    put_f64(lin_y_.data(), lin_y_.size());
}

// prf, per layer l: phi_i = r^-1/2 exp(w_i . x / sqrt(tau) - x^T D x / (2 tau)); whitened
// f_i = (phi_i - mu_i) / sqrt(max(sig2_i, eps)); den = max(s . f, beta_floor); then s += f.
void Replayer::prf_step(ReplayToken &t) {
    const float *w = f32(*prf_w_), *mu = f32(*prf_mu_), *sig2 = f32(*prf_sig2_);
    const double st = std::sqrt(tau_), rs = 1.0 / std::sqrt(double(r_));
    for (uint64_t l = 0; l < L_; l++) {
        double q = 0;
        for (uint64_t j = 0; j < d_; j++) q += dhat_[l * d_ + j] * x_[j] * x_[j];
        double num = 0;
        double *f = &f_[l * r_];
        for (uint64_t i = 0; i < r_; i++) {
            const float *wi = w + (l * r_ + i) * d_;
            double dot = 0;
            for (uint64_t j = 0; j < d_; j++) dot += double(wi[j]) * x_[j];
            double phi = rs * std::exp(dot / st - q / (2 * tau_));
            f[i] = (phi - mu[l * r_ + i]) / std::sqrt(std::max(double(sig2[l * r_ + i]), eps_));
            num += s_[l * r_ + i] * f[i];
        }
        double den = num < beta_floor_ ? beta_floor_ : num;
        t.prf_floored += num < beta_floor_;
        if (l == 0) t.prf_den0 = den;
        for (uint64_t i = 0; i < r_; i++) {
            s_[l * r_ + i] += f[i];
            t.prf_feat_sum += f[i];
        }
        put_f64(&den, 1);
        put_f64(f, r_);
    }
}

// overlays, per layer: deltaC = U (Z^T (H^T f)) with the layer's whitened features f.
void Replayer::overlays_step(ReplayToken &t) {
    const float *H = f32(*ov_h_), *U = f32(*ov_u_), *Z = f32(*ov_z_);
    std::vector<double> t1(rv_), t2(rv_);
    double sq = 0;
    for (uint64_t l = 0; l < L_; l++) {
        const double *f = &f_[l * r_];
        for (uint64_t c = 0; c < rv_; c++) {
            double a = 0;
            for (uint64_t i = 0; i < r_; i++) a += double(H[(l * r_ + i) * rv_ + c]) * f[i];
            t1[c] = a;
        }
        for (uint64_t c = 0; c < rv_; c++) {
            double a = 0;
            for (uint64_t i = 0; i < rv_; i++) a += double(Z[(l * rv_ + i) * rv_ + c]) * t1[i];
            t2[c] = a;
        }
        for (uint64_t i = 0; i < dv_; i++) {
            double a = 0;
            for (uint64_t c = 0; c < rv_; c++) a += double(U[(l * dv_ + i) * rv_ + c]) * t2[c];
            dc_[i] = a;
            sq += a * a;
        }
        put_f64(dc_.data(), dc_.size());
    }
    t.ov_norm = std::sqrt(sq);
}

// memory: u_t = Gaussian 0 of the token's probe stream; one step of the bank.
void Replayer::memory_step_(ReplayToken &t) {
    double u = 0;
    kernels::gaussians(stream_seed(0, kernels::kStreamReplay, t.id), 0, 1, &u);
    t.mem_u = u;
    t.mem_y = memory_step_f32(sec_.data(), st_.data(), uint32_t(sec_.size()), float(u));
    double y = t.mem_y;
    put_f64(&y, 1);
}

// bridge: the hub bitset (seed 9.2) of the token in its context - the hash bucket of the two
// previous token ids (kBridgeNoToken at the start), as bridge_init defines it - through
// STK_LOOKUP_HUB; the count of set bits is the diagnostic, the bitset's bytes are hashed.
void Replayer::hub_step(ReplayToken &t) {
    t.hub_context = bridge_context_id(prev1_, prev2_, g_.bridge_contexts);
    uint8_t key[8], bits[64];
    store_le<uint32_t>(key, t.id);
    store_le<uint32_t>(key + 4, t.hub_context);
    size_t len = 0;
    // A token id the bridge has no row for (an id at or past the model's vocabulary: byte ids of
    // a prompt replayed without a tokenizer on a model with fewer than 256 tokens) has no hubs:
    // reported, hashed as zero words, never a failure of the replay.
    try {
        generation_lookup(g_, STK_LOOKUP_HUB, key, sizeof key, bits, sizeof bits, &len);
    } catch (const Error &e) {
        if (e.status() != STK_E_KEY_NOT_FOUND) throw;
        t.hub_outside = true;
        len = size_t(8) * g_.bridge_w;
        std::memset(bits, 0, len);
    }
    for (size_t i = 0; i < len; i++) t.hub_bits += uint32_t(__builtin_popcount(bits[i]));
    sha_.update(key + 4, 4);
    sha_.update(bits, len);
}

ReplayToken Replayer::step(uint32_t id) {
    ReplayToken t;
    t.id = id;
    if (g_.has_tokenizer) {
        char buf[256];
        size_t len = 0;
        uint8_t key[4];
        store_le<uint32_t>(key, id);
        generation_lookup(g_, STK_LOOKUP_TOKEN_BYTES, key, 4, buf, sizeof buf, &len);
        t.bytes.assign(buf, len);
        uint8_t back[4];
        size_t back_len = 0;
        try {
            generation_lookup(g_, STK_LOOKUP_TOKEN_ID, buf, len, back, sizeof back, &back_len);
            t.round_trip = back_len == 4 && load_le<uint32_t>(back) == id;
        } catch (const Error &e) {
            if (e.status() != STK_E_KEY_NOT_FOUND) throw;
        }
    }
    uint8_t hdr[9];
    store_le<uint32_t>(hdr, id);
    store_le<uint32_t>(hdr + 4, uint32_t(t.bytes.size()));
    hdr[8] = t.round_trip;
    sha_.update(hdr, sizeof hdr);
    sha_.update(t.bytes.data(), t.bytes.size());
    if (modules_[kReplayPrf].enabled) probe(id, d_);
    if (modules_[kReplayLinear].enabled) linear_step(t);
    if (modules_[kReplayPrf].enabled) prf_step(t);
    if (modules_[kReplayOverlays].enabled) overlays_step(t);
    if (modules_[kReplayMemory].enabled) memory_step_(t);
    if (modules_[kReplayBridge].enabled) hub_step(t);
    prev2_ = prev1_;
    prev1_ = id;
    return t;
}

std::string Replayer::line(size_t i, const ReplayToken &t) const {
    std::string s = format("%4zu id %6u", i, t.id);
    if (modules_[kReplayToken].enabled) s += format(" %s", t.round_trip ? "lookup-ok" : "LOOKUP-MISMATCH");
    if (modules_[kReplayLinear].enabled)
        s += format(" | linear u%u j%u s%u base %u delta %u zero %u probes %u |y| %.9g", t.lin_unit, t.lin_input, t.lin_sign,
                    t.lin_base, t.lin_delta, t.lin_zero, t.lin_probes, t.lin_norm);
    if (modules_[kReplayPrf].enabled)
        s += format(" | prf den0 %.9g floored %u/%llu sum(f) %.9g", t.prf_den0, t.prf_floored, (unsigned long long)L_,
                    t.prf_feat_sum);
    if (modules_[kReplayOverlays].enabled) s += format(" | overlays |dC| %.9g", t.ov_norm);
    if (modules_[kReplayMemory].enabled) s += format(" | memory u %.9g y %.9g", t.mem_u, double(t.mem_y));
    if (modules_[kReplayBridge].enabled)
        s += format(" | bridge ctx %u hub bits %u%s", t.hub_context, t.hub_bits,
                    t.hub_outside ? " (token outside the bridge)" : "");
    return s;
}

std::string Replayer::finish_digest() {
    static const char kEnd[] = "stk.replay.state";
    sha_.update(kEnd, sizeof kEnd);
    put_f64(s_.data(), s_.size());
    for (const SosState &st : st_) {
        double v[2] = {st.s1, st.s2};
        put_f64(v, 2);
    }
    Sha256Digest d = sha_.finish();
    std::string hex;
    for (int i = 0; i < 32; i++) hex += format("%02x", d.bytes[i]);
    return hex;
}

std::vector<uint32_t> replay_token_ids(const stk_generation &g, const std::string &prompt, const std::string &model_dir,
                                       bool byte_ids_fallback, std::string *mode, std::vector<std::string> *texts) {
    std::vector<uint32_t> ids;
    if (g.has_tokenizer) {
        *mode = "greedy";
        ids.resize(prompt.size());
        ids.resize(greedy_encode(g.tok, reinterpret_cast<const uint8_t *>(prompt.data()), prompt.size(), ids.data()));
        return ids;
    }
    if (model_dir.empty())
        throw_error(STK_E_INVALID_ARGUMENT,
                    "%s holds no greedy token tables (EXT mode): give --in MODEL_DIR to tokenize with the model's own tokenizer",
                    g.dir.c_str());
    Vocab vocab;
    try {
        vocab = load_vocab_dir(model_dir);
    } catch (const Error &e) {
        if (!byte_ids_fallback || e.status() != STK_E_NOT_FOUND) throw;
        *mode = "bytes";
        for (unsigned char c : prompt) ids.push_back(c);
        return ids;
    }
    *mode = "ext";
    Tokenizer tok(vocab);
    tok.encode(prompt, ids, false);
    if (texts)
        for (uint32_t id : ids) texts->push_back(id < vocab.pieces.size() ? vocab.pieces[id] : std::string());
    return ids;
}

std::string replay_snapshot(const std::string &dir, const std::string &prompt, const std::string &model_dir) {
    stk_generation *raw = nullptr;
    stk_status s = stk_generation_open(dir.c_str(), &raw);
    if (s != STK_OK) throw_error(s, "%s", last_error());
    std::unique_ptr<stk_generation, void (*)(stk_generation *)> g(raw, stk_generation_close);
    std::string mode;
    std::vector<uint32_t> ids = replay_token_ids(*g, prompt, model_dir, true, &mode);
    Replayer rp(*g);
    std::string out = "mode " + mode + "\n";
    for (const ReplayModuleStatus &m : rp.modules())
        out += format("module %s %s %s\n", m.name, m.enabled ? "enabled" : "disabled", m.detail.c_str());
    for (size_t i = 0; i < ids.size(); i++) out += rp.line(i, rp.step(ids[i])) + "\n";
    return out + "state digest " + rp.finish_digest() + "\n";
}

}  // namespace stk
