// The language-model runtime's C entry points (lm/forward.h holds the forward, lm/weights.h the
// weights it reads).
#include <cstddef>
#include <cstring>
#include <memory>

#include "core/abi.h"
#include "core/error.h"
#include "format/array.h"
#include "format/manifest.h"
#include "lm/forward.h"
#include "api/lm_open.h"
#include "lm/from_generation.h"
#include "lm/weights.h"
#include "stk/stk.h"

using namespace stk;

struct stk_lm {
    std::unique_ptr<lm::WeightSource> weights;
    uint32_t ffn_dtype = 0;  // a checkpoint's FFN width as opened (array dtype code); a generation's is its block's
};

struct stk_seq {
    std::unique_ptr<lm::Sequence> seq;
    stk_probe_fn probe = nullptr;  // the caller's callback and its argument (stk_seq_set_probe)
    void *probe_user = nullptr;
};

namespace {

const lm::WeightSource &weights(const stk_lm *m, const char *fn) {
    if (!m || !m->weights) throw_error(STK_E_INVALID_ARGUMENT, "%s: lm is NULL", fn);
    return *m->weights;
}

// The sequence's options; STK_SEQ_POLICY_DEFAULT (or a struct that ends before `policy`) takes
// the generation's policy, and its recent count when the caller's is 0 (window on a checkpoint).
lm::SeqOptions options(const stk_lm *m, const stk_seq_params *params, const char *fn) {
    if (!params) throw_error(STK_E_INVALID_ARGUMENT, "%s: params is NULL", fn);
    const lm::WeightSource &w = weights(m, fn);
    const bool has_policy = params->struct_size >= offsetof(stk_seq_params, policy) + sizeof params->policy;
    const stk_seq_params p = abi_read(params);
    lm::SeqOptions o;
    o.sinks = p.sinks;
    o.window = p.window;
    o.threads = p.threads ? p.threads : 1;
    o.max_batch = p.max_batch ? p.max_batch : 64;
    o.policy = lm::Policy(p.policy);  // range checked by the sequence
    o.recent = p.recent;
    if (!has_policy || p.policy == STK_SEQ_POLICY_DEFAULT) {
        const lm::RuntimeDefaults *d = w.runtime_defaults();
        o.policy = d ? lm::Policy(d->policy) : lm::Policy::Window;
        if (d && !o.recent && o.policy == lm::Policy::H2o) o.recent = d->recent;
    }
    return o;
}

static_assert(uint32_t(lm::Point::FfnOut) == STK_PROBE_FFN_OUT && uint32_t(lm::Point::AttnOut) == STK_PROBE_ATTN_OUT &&
                  uint32_t(lm::Point::QPre) == STK_PROBE_Q_PRE && lm::kPointCount == STK_PROBE_POINTS,
              "lm::Point numbers are stk.h's STK_PROBE_*");
static_assert(lm::kProbeMoe == STK_PROBE_LAYER_MOE && lm::kProbeSliding == STK_PROBE_LAYER_SLIDING &&
                  lm::kProbeInterleaved == STK_PROBE_ROPE_INTERLEAVED,
              "lm probe flags are stk.h's");

// The forward's probe, handed on to the caller's callback as stk.h's struct.
int probe_trampoline(void *user, const lm::ProbeData &p) {
    const stk_seq *s = static_cast<const stk_seq *>(user);
    stk_probe_data d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.layer = p.layer;
    d.point = uint32_t(p.point);
    d.position = p.position;
    d.n_tokens = p.n;
    d.width = p.width;
    d.data = p.data;
    d.writable = p.writable ? 1u : 0u;
    d.flags = p.flags;
    d.heads = p.heads;
    d.head_width = p.head_width;
    d.rot_offset = p.rot_offset;
    d.rot_pairs = p.rot_pairs;
    return s->probe(s->probe_user, &d);
}

}  // namespace

extern "C" {

STK_API stk_status stk_lm_open(const char *path, uint32_t flags, stk_lm **out) {
    return guard([&] {
        if (!out) throw_error(STK_E_INVALID_ARGUMENT, "stk_lm_open: out is NULL");
        *out = nullptr;
        if (!path) throw_error(STK_E_INVALID_ARGUMENT, "stk_lm_open: path is NULL");
        const uint32_t width = flags & 0xfu, ffn = flags & 0xf0u;
        if (width > STK_LM_WEIGHTS_BF16 || (flags & ~0xffu) || (ffn != 0 && ffn != STK_LM_WEIGHTS_FFN_Q4_0 && ffn != STK_LM_WEIGHTS_FFN_Q8_0))
            throw_error(STK_E_INVALID_ARGUMENT, "stk_lm_open: flags 0x%x: not a weight width (STK_LM_WEIGHTS_*)", flags);
        auto m = std::make_unique<stk_lm>();
        // A faithful generation (root or directory) at the widths it was written in, or a model
        // read from its checkpoint at the flags' widths (api/lm_open.h open_weights).
        const lm::WDType ffn_t = ffn == STK_LM_WEIGHTS_FFN_Q4_0 ? lm::WDType::Q4_0 : ffn == STK_LM_WEIGHTS_FFN_Q8_0 ? lm::WDType::Q8_0 : lm::WDType::F32;
        m->weights = lm::open_weights(path, width == STK_LM_WEIGHTS_BF16 ? lm::WDType::BF16 : lm::WDType::F32, ffn_t);
        const DType held = ffn_t == lm::WDType::Q4_0 ? DType::Q4_0 : ffn_t == lm::WDType::Q8_0 ? DType::Q8_0
                           : width == STK_LM_WEIGHTS_BF16                ? DType::BF16
                                                                         : DType::F32;
        m->ffn_dtype = uint32_t(held);
        const std::string why = lm::unsupported(m->weights->config());
        if (!why.empty()) throw_error(STK_E_NOT_IMPLEMENTED, "%s: %s", path, why.c_str());
        *out = m.release();
    });
}

STK_API void stk_lm_close(stk_lm *lm) { delete lm; }

STK_API stk_status stk_lm_get_info(const stk_lm *lm, stk_lm_info *out) {
    return guard([&] {
        if (!out) throw_error(STK_E_INVALID_ARGUMENT, "stk_lm_get_info: out is NULL");
        abi_check_out(out);
        const ModelConfig &c = weights(lm, "stk_lm_get_info").config();
        stk_lm_info i;
        std::memset(&i, 0, sizeof i);
        i.struct_size = sizeof i;
        i.vocab_size = c.vocab_size;
        i.n_layers = c.n_layers;
        i.d_model = c.d_model;
        i.n_heads = c.n_heads;
        i.n_kv_heads = c.n_kv_heads;
        i.head_dim = c.head_dim;
        std::memcpy(i.model_type, c.model_type, sizeof i.model_type);
        i.model_type[sizeof i.model_type - 1] = 0;
        i.ffn_dtype = lm->ffn_dtype;
        if (const lm::RuntimeDefaults *d = lm->weights->runtime_defaults()) {
            i.generation = 1;
            i.sinks = d->sinks, i.window = d->window, i.policy = d->policy, i.recent = d->recent;
            i.ffn_dtype = d->ffn_dtype;
        }
        abi_write(out, i);
    });
}

STK_API stk_status stk_seq_arena_size(const stk_lm *lm, const stk_seq_params *params, size_t *out_bytes) {
    return guard([&] {
        if (!out_bytes) throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_arena_size: out_bytes is NULL");
        *out_bytes = lm::arena_size(weights(lm, "stk_seq_arena_size"), options(lm, params, "stk_seq_arena_size"));
    });
}

STK_API stk_status stk_seq_open(const stk_lm *lm, const stk_seq_params *params, void *arena, size_t arena_bytes, stk_seq **out) {
    return guard([&] {
        if (!out) throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_open: out is NULL");
        *out = nullptr;
        const lm::WeightSource &w = weights(lm, "stk_seq_open");
        const lm::SeqOptions o = options(lm, params, "stk_seq_open");
        if (!arena) throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_open: arena is NULL");
        const size_t need = lm::arena_size(w, o);
        if (arena_bytes < need)
            throw_error(STK_E_ARENA_TOO_SMALL, "stk_seq_open: the arena holds %zu bytes, the sequence needs %zu (stk_seq_arena_size)",
                        arena_bytes, need);
        auto s = std::make_unique<stk_seq>();
        s->seq = std::make_unique<lm::Sequence>(w, o, arena, arena_bytes);
        *out = s.release();
    });
}

STK_API stk_status stk_seq_feed(stk_seq *seq, const int32_t *tokens, size_t n, float *all_logits) {
    return guard([&] {
        if (!seq) throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_feed: seq is NULL");
        seq->seq->feed(tokens, n, all_logits);
    });
}

STK_API stk_status stk_seq_logits(const stk_seq *seq, const float **out, size_t *out_vocab, uint64_t *out_position) {
    return guard([&] {
        if (!seq) throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_logits: seq is NULL");
        if (out) *out = seq->seq->logits();
        if (out_vocab) *out_vocab = size_t(seq->seq->vocab());
        if (out_position) *out_position = seq->seq->position();
    });
}

STK_API stk_status stk_seq_reset(stk_seq *seq) {
    return guard([&] {
        if (!seq) throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_reset: seq is NULL");
        seq->seq->reset();
    });
}

STK_API stk_status stk_seq_kept(const stk_seq *seq, uint32_t layer, uint32_t kv_head, uint64_t *positions, size_t capacity,
                                size_t *out_n) {
    return guard([&] {
        if (!seq) throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_kept: seq is NULL");
        const size_t n = seq->seq->kept(layer, kv_head, positions, positions ? capacity : 0);
        if (out_n) *out_n = n;
    });
}

STK_API void stk_seq_close(stk_seq *seq) { delete seq; }

STK_API stk_status stk_seq_set_probe(stk_seq *seq, uint32_t points, stk_probe_fn fn, void *user) {
    return guard([&] {
        if (!seq) throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_set_probe: seq is NULL");
        if (points & ~uint32_t(STK_PROBE_ALL))
            throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_set_probe: points 0x%x: bits past STK_PROBE_ALL (0x%x)", points,
                        unsigned(STK_PROBE_ALL));
        seq->probe = fn;
        seq->probe_user = user;
        seq->seq->set_probe(fn ? points : 0, fn ? probe_trampoline : nullptr, seq);
    });
}

STK_API stk_status stk_seq_attn_project(stk_seq *seq, uint32_t layer, const float *x, uint64_t n, float *y) {
    return guard([&] {
        if (!seq) throw_error(STK_E_INVALID_ARGUMENT, "stk_seq_attn_project: seq is NULL");
        seq->seq->attn_project(layer, x, n, y);
    });
}

}  // extern "C"
