// Replay (spec-notes 19, seed 17.3): per token, the O(1) path over every module a published
// generation holds, one diagnostic line per token and a state digest.  The definition (which
// keys and vectors a token touches, the digest's bytes) is docs/decisions.md "`stk replay`";
// stk replay (src/cli/cmd_replay.cc) and acceptance 16.5 print and compare what this computes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "format/array.h"
#include "format/manifest.h"
#include "runtime/generation.h"
#include "runtime/memory_step.h"

namespace stk {

// The modules, in the order they are walked, printed and hashed.
enum ReplayModuleId { kReplayToken, kReplayLinear, kReplayPrf, kReplayOverlays, kReplayMemory, kReplayBridge, kReplayModules };

struct ReplayModuleStatus {
    const char *name;  // "token", "linear", "prf", "overlays", "memory", "bridge"
    bool enabled = false;
    std::string detail;  // enabled: what it walks; disabled: why (the manifest's record, or the absent array)
};

// What one token did in each module (fields of a disabled module stay zero).
struct ReplayToken {
    uint32_t id = 0;
    std::string bytes;        // token tables present: the token's bytes (stk_lookup TOKEN_BYTES)
    bool round_trip = false;  // TOKEN_ID(bytes) == id
    // linear: unit u, input j, sign s; outputs i < d read through linear_find
    uint32_t lin_unit = 0, lin_input = 0, lin_sign = 0, lin_base = 0, lin_delta = 0, lin_zero = 0, lin_probes = 0;
    double lin_norm = 0;
    // prf: layer 0's denominator, layers whose denominator hit beta_floor, sum of all features
    double prf_den0 = 0, prf_feat_sum = 0;
    uint32_t prf_floored = 0;
    // overlays: |deltaC| over all layers (root of the sum of squares)
    double ov_norm = 0;
    // memory: input u_t and output y_t (f32, the single reduction site)
    double mem_u = 0;
    float mem_y = 0;
    // bridge: the position's context (two previous tokens) and the set bits of HUB(token, context)
    uint32_t hub_context = 0, hub_bits = 0;
    bool hub_outside = false;  // the bridge has no row for this id (HUB: key not found)
};

class Replayer {
public:
    // g: a generation opened by stk_generation_open (manifest and every array verified).
    explicit Replayer(const stk_generation &g);
    const std::vector<ReplayModuleStatus> &modules() const { return modules_; }
    // One token: every enabled module's step; the digest is fed.
    ReplayToken step(uint32_t id);
    // The diagnostic line of a token (index i), identical bytes for identical generations.
    std::string line(size_t i, const ReplayToken &t) const;
    // SHA-256 (hex) of everything fed so far, then the final states; call once, last.
    std::string finish_digest();

private:
    void open_prf(const std::string &arrays);
    void open_overlays(const std::string &arrays);
    void open_memory(const std::string &arrays);
    void probe(uint32_t id, uint64_t n);  // x = the token's probe vector (first n entries)
    void linear_step(ReplayToken &t);
    void prf_step(ReplayToken &t);
    void overlays_step(ReplayToken &t);
    void memory_step_(ReplayToken &t);
    void hub_step(ReplayToken &t);
    void put_f64(const double *v, size_t n);

    const stk_generation &g_;
    uint32_t prev1_ = 0xFFFFFFFFu, prev2_ = 0xFFFFFFFFu;  // the two previous token ids (bridge context)
    Manifest manifest_;
    std::vector<ReplayModuleStatus> modules_;
    Sha256 sha_;
    std::vector<double> x_;  // probe vector
    // linear
    uint64_t lin_d_ = 0, lin_units_ = 0;
    std::vector<double> lin_y_;
    // prf
    std::unique_ptr<ArrayReader> prf_w_, prf_mu_, prf_sig2_, prf_s0_;
    uint64_t L_ = 0, r_ = 0, d_ = 0;
    double tau_ = 0, eps_ = 0, beta_floor_ = 0;
    std::vector<double> dhat_;  // [L, d]: mean_i prf_W[l, i, j]^2, the column variance of prf_W
    std::vector<double> s_;     // [L, r]: the normaliser state (from s_init)
    std::vector<double> f_;     // [L, r]: this token's whitened features
    // overlays
    std::unique_ptr<ArrayReader> ov_h_, ov_u_, ov_z_;
    uint64_t rv_ = 0, dv_ = 0;
    std::vector<double> dc_;  // [dv]
    // memory
    std::vector<SosSection> sec_;
    std::vector<SosState> st_;
};

// The prompt's token ids: the generation's greedy tables (*mode "greedy"), else the model's own
// tokenizer from model_dir ("ext"; STK_E_INVALID_ARGUMENT when model_dir is empty).  With
// byte_ids_fallback, a model without tokenizer files replays the prompt's bytes as ids ("bytes":
// acceptance 16.5 on the tiny test models).  texts, when given, gets each token's text in "ext"
// mode (the vocabulary's raw bytes of the piece; ReplayToken.bytes stays empty there, as the state
// digest defines it) and stays empty in the other modes.
std::vector<uint32_t> replay_token_ids(const stk_generation &g, const std::string &prompt, const std::string &model_dir,
                                       bool byte_ids_fallback, std::string *mode, std::vector<std::string> *texts = nullptr);

// The whole replay of `prompt` over the generation in dir as one text: the mode, one line per
// module, one line per token, the state digest.  What acceptance 16.5 compares.
std::string replay_snapshot(const std::string &dir, const std::string &prompt, const std::string &model_dir);

}  // namespace stk
