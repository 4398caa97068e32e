#include "lm/from_generation.h"

#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "format/array.h"
#include "format/manifest.h"
#include "ingest/faithful_names.h"
#include "ingest/family.h"

namespace stk::lm {

namespace {

using Key = std::tuple<int, int, int32_t, int32_t>;  // role, slot, layer, expert

std::string str32(const uint8_t s[32]) { return std::string(reinterpret_cast<const char *>(s), strnlen(reinterpret_cast<const char *>(s), 32)); }

// The ModelConfig the runtime block describes (the fields the forward reads; the block holds
// every one of them, docs/format.md "Runtime block").
ModelConfig config_from_runtime(const ManifestRuntime &r, const std::vector<RuntimeLayer> &layers) {
    ModelConfig c;
    const std::string mt = str32(r.model_type);
    copy_config_str(c.model_type, sizeof c.model_type, mt);
    c.family = family_by_model_type(mt);
    c.d_model = r.d_model, c.n_layers = r.n_layers, c.n_heads = r.n_heads, c.n_kv_heads = r.n_kv_heads;
    c.head_dim = r.head_dim, c.vocab_size = r.vocab_size, c.ffn_dim = r.ffn_dim;
    c.ffn_kind = FfnKind(r.ffn_kind);
    copy_config_str(c.activation, sizeof c.activation, str32(r.activation));
    c.norm = NormKind(r.norm_kind), c.norm_eps = r.norm_eps, c.norms_per_layer = r.norms_per_layer;
    c.post_norms = r.post_norms, c.norm_offset = r.norm_offset, c.qk_norm = QkNorm(r.qk_norm);
    c.emb_multiplier = r.emb_multiplier;
    c.positions = PosKind(r.positions), c.rope_theta = r.rope_theta, c.rotary_dim = r.rotary_dim;
    copy_config_str(c.rope_scaling_type, sizeof c.rope_scaling_type, str32(r.rope_scaling_type));
    c.rope_scaling_factor = r.rope_scaling_factor, c.rope_original_max = r.rope_original_max;
    c.rope_low_freq_factor = r.rope_low_freq_factor, c.rope_high_freq_factor = r.rope_high_freq_factor;
    c.rope_beta_fast = r.rope_beta_fast, c.rope_beta_slow = r.rope_beta_slow, c.rope_yarn_truncate = r.rope_yarn_truncate;
    c.rope_attn_factor = r.rope_attn_factor, c.max_positions = r.max_positions, c.rope_local_theta = r.rope_local_theta;
    c.sliding_window = r.sliding_window;
    for (uint32_t l = 0; l < r.n_layers && l < kMaxLayers; l++)
        if (layers[l].kind == 1) c.sliding_layers[l / 8] |= uint8_t(1u << (l % 8));
    c.attn_softcap = r.attn_softcap, c.final_softcap = r.final_softcap, c.attn_scale = r.score_scale;
    c.logit_scale = r.logit_scale, c.residual_multiplier = r.residual_multiplier;
    c.rope_interleaved = r.rope_interleaved, c.alibi_scale = r.alibi_scale, c.attn_sinks = r.attn_sinks;
    c.mla = r.mla, c.mla_rope_interleaved = r.mla_rope_interleaved, c.q_lora_rank = r.q_lora_rank;
    c.kv_lora_rank = r.kv_lora_rank, c.qk_nope_dim = r.qk_nope_dim, c.qk_rope_dim = r.qk_rope_dim, c.v_head_dim = r.v_head_dim;
    c.mla_rope_gain = r.mla_rope_gain;
    c.n_experts = r.n_experts, c.top_k = r.top_k, c.moe_ffn_dim = r.moe_ffn_dim, c.shared_expert_ffn_dim = r.shared_expert_ffn_dim;
    c.shared_expert_gate = r.shared_expert_gate, c.norm_topk_prob = r.norm_topk_prob, c.expert_bias = r.expert_bias;
    c.swiglu_limit = r.swiglu_limit, c.gated_up_offset = r.gated_up_offset;
    copy_config_str(c.router, sizeof c.router, str32(r.router));
    c.moe_layer_step = r.moe_layer_step, c.first_moe_layer = r.first_moe_layer, c.routed_scaling = r.routed_scaling;
    c.n_group = r.n_group, c.topk_group = r.topk_group, c.router_bias = r.router_bias;
    // The per-layer table is the truth: a layer the step rule calls sparse but the table dense is
    // listed in dense_layers (qwen2_moe's mlp_only_layers).
    for (uint32_t l = 0; l < r.n_layers; l++)
        if (c.layer_is_moe(l) != (layers[l].moe == 1)) {
            if (layers[l].moe == 1 || c.n_dense_layers >= kMaxDenseLayerList)
                throw_error(STK_E_CORRUPT, "runtime block: layer %u's moe flag disagrees with the block's routing fields", l);
            c.dense_layers[c.n_dense_layers++] = l;
        }
    c.tied_embeddings = r.tied_embeddings, c.parallel_attn = r.parallel_attn, c.qkv_bias = r.qkv_bias, c.o_bias = r.o_bias;
    c.mlp_bias = r.mlp_bias, c.emb_norm = r.emb_norm, c.norm_bias = r.norm_bias, c.lm_head_bias = r.lm_head_bias;
    c.pos_offset = r.pos_offset;
    return c;
}

WDType wdtype_of(uint16_t dtype, const std::string &file) {
    switch (DType(dtype)) {
        case DType::F32: return WDType::F32;
        case DType::BF16: return WDType::BF16;
        case DType::I8: return WDType::I8;
        case DType::Q4_0: return WDType::Q4_0;
        case DType::Q8_0: return WDType::Q8_0;
        default: break;
    }
    throw_error(STK_E_BAD_DTYPE, "%s: dtype %s is not a weight type of the faithful profile", file.c_str(), dtype_name(dtype));
}

class GenerationWeights final : public WeightSource {
public:
    explicit GenerationWeights(const std::string &dir) : dir_(dir) {
        const Manifest m = read_manifest(dir + "/" + kManifestFileName);
        if (!m.has_runtime)
            throw_error(STK_E_INVALID_ARGUMENT,
                        "%s: a default-profile generation (no runtime block): the runtime needs one converted with "
                        "--profile faithful",
                        dir.c_str());
        config_ = config_from_runtime(m.runtime, m.runtime_layers);
        defaults_.sinks = m.runtime.sinks, defaults_.window = m.runtime.window, defaults_.policy = m.runtime.policy;
        defaults_.recent = m.runtime.recent, defaults_.ffn_dtype = m.runtime.ffn_dtype;
        std::map<std::string, const ArrayReader *> by_name;
        for (const ManifestArray &e : m.arrays) {
            const std::string path = dir + "/" + kArraysDirName + "/" + e.name;
            auto a = std::make_unique<ArrayReader>(path, true);  // header + payload checksums
            const ArrayHeader &h = a->header();
            bool same = h.dtype == e.dtype && h.rank == e.rank && h.byte_len == e.byte_len && h.crc32c == e.crc32c &&
                        h.sha256_low64 == e.sha256_low64 && h.flags == e.flags;
            for (uint32_t i = 0; i < kMaxRank; i++) same = same && h.dims[i] == e.dims[i];
            if (!same)
                throw_error(STK_E_CHECKSUM, "%s: its header differs from the manifest's entry for %s", path.c_str(), e.name);
            by_name[e.name] = a.get();
            arrays_.push_back(std::move(a));
        }
        for (const auto &[name, a] : by_name) {
            const FaithfulKind *k = nullptr;
            int32_t layer = kNoLayer;
            if (!parse_faithful_file_name(name, &k, &layer)) continue;  // rope table, scales, tokenizer arrays
            const ArrayHeader &h = a->header();
            const WDType wt = wdtype_of(h.dtype, a->path());
            const bool stacked = k->expert == ExpertClass::Routed;
            const uint32_t lead = stacked ? 1 : 0;
            const uint64_t count = stacked ? h.dims[0] : 1;
            const uint64_t rows = h.dims[lead], cols = h.rank > lead + 1 ? h.dims[lead + 1] : 1;
            const float *scales = nullptr;
            if (wt == WDType::I8) {
                auto it = by_name.find(name.substr(0, name.size() - 4) + ".scale.bin");
                if (it == by_name.end() || it->second->header().dtype != uint16_t(DType::F32) ||
                    it->second->header().dims[0] != count || it->second->header().rank != 1)
                    throw_error(STK_E_MISSING_ARRAY, "%s: int8 weights without their %s.scale.bin of %llu f32", a->path().c_str(),
                                name.substr(0, name.size() - 4).c_str(), (unsigned long long)count);
                scales = reinterpret_cast<const float *>(it->second->payload());
            }
            // One matrix's bytes (rows x cols elements, or rows x cols / 32 blocks: the header's
            // check made the last dim whole blocks).
            uint64_t per = 0;
            const uint64_t mdims[2] = {rows, cols};
            if (array_bytes_of(h.dtype, 2, mdims, &per) != ArrayBytes::Ok || per * count != h.byte_len)
                throw_error(STK_E_SIZE_MISMATCH, "%s: %llu bytes do not hold %llu matrices [%llu, %llu] of %s", a->path().c_str(),
                            (unsigned long long)h.byte_len, (unsigned long long)count, (unsigned long long)rows,
                            (unsigned long long)cols, dtype_name(h.dtype));
            for (uint64_t e = 0; e < count; e++) {
                TensorView v;
                v.data = a->payload() + e * per;
                v.dtype = wt;
                v.rows = rows, v.cols = cols;
                if (scales) {
                    row_scales_.emplace_back(size_t(rows), scales[e]);  // one scale per matrix, repeated per row
                    v.row_scale = row_scales_.back().data();
                }
                const int32_t expert = stacked ? int32_t(e) : k->expert == ExpertClass::Shared ? kSharedExpert : kNoExpert;
                views_[Key{int(k->role), int(k->slot), layer, expert}] = v;
            }
        }
    }
    const ModelConfig &config() const override { return config_; }
    const RuntimeDefaults *runtime_defaults() const override { return &defaults_; }
    TensorView find(const WeightKey &key) const override {
        auto it = views_.find(Key{int(key.role), int(key.slot), key.layer, key.expert});
        return it == views_.end() ? TensorView() : it->second;
    }
    std::string describe() const override { return "generation " + dir_; }

private:
    std::string dir_;
    ModelConfig config_;
    RuntimeDefaults defaults_;
    std::vector<std::unique_ptr<ArrayReader>> arrays_;
    std::vector<std::vector<float>> row_scales_;  // vectors never move their buffers when the outer one grows
    std::map<Key, TensorView> views_;
};

}  // namespace

std::unique_ptr<WeightSource> open_generation_weights(const std::string &gen_dir) {
    return std::make_unique<GenerationWeights>(gen_dir);
}

}  // namespace stk::lm
