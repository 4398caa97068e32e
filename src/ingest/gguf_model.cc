#include "ingest/gguf_model.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/checked.h"
#include "core/error.h"
#include "core/float16.h"
#include "format/ggml_dequant.h"
#include "ingest/family.h"
#include "ingest/gguf.h"
#include "ingest/mxfp4.h"
#include "ingest/source.h"

namespace stk {

// ---------------------------------------------------------------------------------------------
// Which file.

namespace {

bool is_dir(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool starts_with_gguf_magic(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    uint8_t m[4] = {};
    ssize_t n = ::read(fd, m, 4);
    ::close(fd);
    return n == 4 && std::memcmp(m, "GGUF", 4) == 0;
}

bool ends_with(const std::string &s, const char *suffix) {
    size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

std::string gguf_model_file(const std::string &path) {
    // A file: by its magic, or by its name (a damaged .gguf is opened, and refused for what it is,
    // not taken for a file of the HuggingFace directory around it).
    if (!is_dir(path)) return file_exists(path) && (starts_with_gguf_magic(path) || ends_with(path, ".gguf")) ? path : std::string();
    std::string dir = path;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (file_exists(dir + "/config.json")) return {};  // a HuggingFace directory, whatever else it holds
    return find_gguf(dir);
}

// ---------------------------------------------------------------------------------------------
// Architectures: the HF model_type each GGUF architecture comes from, and what llama.cpp's
// converter did to its tensors (conversion/<family>.py, LlamaModel.permute, Gemma's norm_shift).

namespace {

enum class Names : uint8_t {
    Llama,
    Gemma3,
    Gpt2,
    GptNeox,
    Bloom,
    Falcon,
    Deepseek2,
    Phimoe,
    Granite,
    GptOss,
    Internlm2,
    Phi3,
    Starcoder2,
    Phi2,
    Starcoder,
    Mpt,
};

// Per family (the family table's FamilyDef::name; which GGUF architectures belong to a family is
// the table's gguf_archs): the converter's changes to undo.
struct ArchDef {
    const char *family;
    Names names;
    bool permute_qk;     // Q/K rows permuted per head for llama.cpp's RoPE (LlamaModel.permute)
    bool norm_plus_one;  // "*norm.weight" stored as weight + 1 (Gemma3Model.norm_shift)
    bool fused_qkv;      // attn_qkv stored [Q; K; V]: put back in the HF layout
};

const ArchDef kArchs[] = {
    {"llama", Names::Llama, true, false, false},
    {"qwen2", Names::Llama, false, false, false},
    {"qwen2_moe", Names::Llama, false, false, false},
    {"gemma3", Names::Gemma3, false, true, false},
    {"gpt2", Names::Gpt2, false, false, false},
    {"gpt_neox", Names::GptNeox, false, false, true},
    {"bloom", Names::Bloom, false, false, true},
    {"falcon", Names::Falcon, false, false, true},
    // conversion/deepseek.py (DeepseekV2Model, V2 and V3 alike), phi.py (PhiMoeModel), granite.py
    // (GraniteModel / GraniteMoeModel: LlamaModel's permute), gpt_oss.py, internlm.py (InternLM2Model:
    // wqkv split into permuted q / k and v).
    {"deepseek_v2", Names::Deepseek2, false, false, false},
    {"phimoe", Names::Phimoe, false, false, false},
    {"granite", Names::Granite, true, false, false},
    {"granitemoe", Names::Granite, true, false, false},
    {"gpt_oss", Names::GptOss, false, false, false},
    {"internlm2", Names::Internlm2, false, false, false},
    // qwen.py (Qwen3Model / Qwen3MoeModel: Qwen2's, no permute), olmo.py (Olmo2Model, OlmoeModel:
    // TextModel's, no permute; only OLMo 1 permutes).
    {"qwen3", Names::Llama, false, false, false},
    {"qwen3_moe", Names::Llama, false, false, false},
    {"olmo2", Names::Llama, false, false, false},
    {"olmoe", Names::Llama, false, false, false},
    // gemma.py (GemmaModel, Gemma2Model: 1 added to every *norm.weight, stored F32; Gemma 1 has
    // Llama's two norms, Gemma 2 Gemma 3's four), stablelm.py (StableLMModel: Llama names, no
    // permute), phi.py (Phi3MiniModel: qkv_proj and gate_up_proj kept fused as attn_qkv / ffn_up).
    {"gemma", Names::Llama, false, true, false},
    {"gemma2", Names::Gemma3, false, true, false},
    {"stablelm", Names::Llama, false, false, false},
    {"phi3", Names::Phi3, false, false, false},
    // command_r.py (CommandR2Model: TextModel's, no permute: HF's RoPE is interleaved as llama.cpp's),
    // llama.py (ArceeModel: LlamaModel's permute).
    {"cohere", Names::Llama, false, false, false},
    {"arcee", Names::Llama, true, false, false},
    // starcoder.py (StarCoder2Model: TextModel's, no permute; c_fc / c_proj as ffn_up / ffn_down).
    {"starcoder2", Names::Starcoder2, false, false, false},
    // phi.py (Phi2Model: q / k / v separate, no permute; its feed_forward_length and head_count_kv
    // are not the model's: read from the tensors).
    {"phi", Names::Phi2, false, false, false},
    // starcoder.py (StarCoderModel: GPT-BigCode's nn.Linear names renamed, c_attn kept whole; its
    // feed_forward_length and head_count_kv are not the model's: read from the tensors).
    {"gpt_bigcode", Names::Starcoder, false, false, false},
    // mpt.py (MPTModel: Wqkv kept whole as attn_qkv, renamed only).
    {"mpt", Names::Mpt, false, false, false},
};

struct Arch {
    const ArchDef *def;
    const FamilyDef *family;
};

Arch find_arch(const std::string &arch, const std::string &path) {
    const FamilyDef &f = family_def(family_by_gguf_arch(arch));
    for (const ArchDef &a : kArchs)
        if (f.gguf_archs && f.gguf_archs[0] && std::strcmp(f.name, a.family) == 0) return {&a, &f};
    // Only the architectures this file maps (a family may list one it does not map yet).
    std::vector<std::string> names;
    for (uint32_t i = 0; i < kFamilyCount; i++) {
        bool mapped = false;
        for (const ArchDef &a : kArchs) mapped = mapped || std::strcmp(kFamilyDefs[i]->name, a.family) == 0;
        for (const char *const *g = kFamilyDefs[i]->gguf_archs; mapped && g && *g; g++)
            if (std::find(names.begin(), names.end(), *g) == names.end()) names.push_back(*g);
    }
    std::string known;
    for (const std::string &n : names) known += (known.empty() ? "" : ", ") + n;
    throw_error(STK_E_UNKNOWN_MODEL,
                "%s: GGUF architecture '%s' (general.architecture) has no mapping to a HuggingFace model in stk "
                "(GGUF architectures stk reads: %s)",
                path.c_str(), printable(arch).c_str(), known.c_str());
}

std::string arch_of(const GgufFile &f, const std::string &path) {
    const GgufValue *a = f.find("general.architecture");
    if (!a) throw_error(STK_E_CORRUPT, "%s: no general.architecture key: not a model GGUF", path.c_str());
    return std::string(a->str());
}

// JSON for config.json, built key by key.
struct Json {
    std::string s = "{";
    void key(const char *k) { s += (s.size() > 1 ? ", \"" : "\"") + std::string(k) + "\": "; }
    void u(const char *k, uint64_t v) {
        key(k);
        s += std::to_string(v);
    }
    void f(const char *k, double v) {
        key(k);
        s += format("%.17g", v);
    }
    // A metadata float: an f32 as the shortest decimal that reads back to it (the converter wrote
    // config.json's 1e-05 as the f32 nearest it; this gives 1e-05 back, not 9.99999975e-06).
    void f(const char *k, const GgufValue &v) {
        key(k);
        char buf[64];
        auto r = v.type() == GgufType::F32 ? std::to_chars(buf, buf + sizeof buf, v.f32())
                                           : std::to_chars(buf, buf + sizeof buf, v.as_float());
        s.append(buf, r.ptr);
    }
    void b(const char *k, bool v) {
        key(k);
        s += v ? "true" : "false";
    }
    void str(const char *k, const std::string &v) {
        key(k);
        s += '"';
        for (char c : v) {
            if (c == '"' || c == '\\') s += '\\';
            if (uint8_t(c) < 0x20) s += format("\\u%04x", c);
            else s += c;
        }
        s += '"';
    }
    void raw(const char *k, const std::string &v) {
        key(k);
        s += v;
    }
    std::string done() { return s + "}"; }
};

const GgufTensorInfo *tensor(const GgufFile &f, const char *name) { return f.find_tensor(name); }

// The FFN width as the tensors give it: the rows of blk.0.ffn_up.weight (stored [F, d] by every
// converter that writes these architectures).  For those whose feed_forward_length the converter
// writes as 4 x hidden whatever the model has (Phi2Model, StarCoderModel, GPT2Model, FalconModel).
uint64_t ffn_width_from_tensors(const GgufFile &f, const std::string &path) {
    const GgufTensorInfo *up = tensor(f, "blk.0.ffn_up.weight");
    if (!up || up->shape.size() != 2)
        throw_error(STK_E_CORRUPT, "%s: no 2-D blk.0.ffn_up.weight: the FFN width is unknown", path.c_str());
    return up->shape[0];
}

// GPT2Model in converters before mid-2025 wrote output.weight as a copy of token_embd.weight
// ("GPT2 output is tied to (same as) wte"): the same type, shape and bytes are the tied head, not
// a second matrix (so the GGUF reads as the HF checkpoint it came from).
bool head_copies_embedding(const GgufFile &f) {
    const GgufTensorInfo *out = tensor(f, "output.weight"), *emb = tensor(f, "token_embd.weight");
    if (!out || !emb || out->type != emb->type || out->shape != emb->shape || out->n_bytes != emb->n_bytes) return false;
    return std::memcmp(f.tensor_data(*out), f.tensor_data(*emb), size_t(out->n_bytes)) == 0;
}

// A metadata value of {arch}.KEY that must be a scalar (nullptr when absent).
const GgufValue *scalar(const GgufFile &f, const std::string &arch, const char *k, const std::string &path) {
    const GgufValue *v = f.find(arch + "." + k);
    if (v && v->type() == GgufType::ARRAY)
        throw_error(STK_E_UNSUPPORTED, "%s: %s.%s is an array (a value per layer), which stk does not read", path.c_str(),
                    arch.c_str(), k);
    return v;
}

// An f32 metadata value as the shortest decimal that reads back to it (see Json::f).
std::string f32_text(const GgufValue &v) {
    char buf[64];
    auto r = v.type() == GgufType::F32 ? std::to_chars(buf, buf + sizeof buf, v.f32())
                                       : std::to_chars(buf, buf + sizeof buf, v.as_float());
    return std::string(buf, r.ptr);
}

// The f32 values of a 1-D metadata-like tensor (Phi-3's rope_factors_long / _short), as a JSON array.
std::string f32_tensor_json(const GgufFile &f, const GgufTensorInfo &t, const std::string &path) {
    if (t.type != 0 || t.shape.size() != 1 || t.n_elements == 0 || t.n_elements > 256)
        throw_error(STK_E_UNSUPPORTED, "%s: GGUF tensor '%s' (offset %llu): RoPE factors must be 1 to 256 F32 values",
                    path.c_str(), printable(t.name).c_str(), (unsigned long long)t.data_offset);
    const uint8_t *d = f.tensor_data(t);
    std::string out = "[";
    for (uint64_t i = 0; i < t.n_elements; i++) {
        float v;
        std::memcpy(&v, d + 4 * i, 4);
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, v);
        if (!std::isfinite(v))
            throw_error(STK_E_CORRUPT, "%s: GGUF tensor '%s' (offset %llu): RoPE factor %llu is not finite", path.c_str(),
                        printable(t.name).c_str(), (unsigned long long)t.data_offset, (unsigned long long)i);
        out += (i ? ", " : "") + std::string(buf, r.ptr);
    }
    return out + "]";
}

// rope_scaling from rope.scaling.* (the keys TextModel.set_gguf_parameters writes), "" when none.
// Phi-3's longrope (Phi3MiniModel.generate_extra_tensors) has no type key: its long and short
// factors are the tensors rope_factors_long / rope_factors_short, read back into the config here
// (the tensor loop then skips them, as rope_freqs).
std::string rope_scaling_json(const GgufFile &f, const std::string &arch, const std::string &path) {
    const GgufTensorInfo *lf = f.find_tensor("rope_factors_long.weight"), *sf = f.find_tensor("rope_factors_short.weight");
    if (lf || sf) {
        if (!lf || !sf)
            throw_error(STK_E_CORRUPT, "%s: GGUF tensor '%s' without '%s': longrope needs both", path.c_str(),
                        lf ? "rope_factors_long.weight" : "rope_factors_short.weight",
                        lf ? "rope_factors_short.weight" : "rope_factors_long.weight");
        std::string rs = "{\"rope_type\": \"longrope\", \"long_factor\": " + f32_tensor_json(f, *lf, path) +
                         ", \"short_factor\": " + f32_tensor_json(f, *sf, path);
        if (const GgufValue *v = scalar(f, arch, "rope.scaling.original_context_length", path))
            rs += format(", \"original_max_position_embeddings\": %llu", (unsigned long long)v->as_uint());
        return rs + "}";
    }
    const GgufValue *type = scalar(f, arch, "rope.scaling.type", path);
    if (!type || type->str() == "none") return {};
    std::string rs = "{\"rope_type\": \"" + printable(type->str()) + "\"";
    if (const GgufValue *v = scalar(f, arch, "rope.scaling.factor", path)) rs += ", \"factor\": " + f32_text(*v);
    if (const GgufValue *v = scalar(f, arch, "rope.scaling.original_context_length", path))
        rs += format(", \"original_max_position_embeddings\": %llu", (unsigned long long)v->as_uint());
    if (const GgufValue *v = scalar(f, arch, "rope.scaling.yarn_beta_fast", path)) rs += ", \"beta_fast\": " + f32_text(*v);
    if (const GgufValue *v = scalar(f, arch, "rope.scaling.yarn_beta_slow", path)) rs += ", \"beta_slow\": " + f32_text(*v);
    if (const GgufValue *v = scalar(f, arch, "rope.scaling.yarn_attn_factor", path))
        rs += ", \"attention_factor\": " + f32_text(*v);
    if (arch == "deepseek2")
        if (const GgufValue *v = scalar(f, arch, "rope.scaling.yarn_log_multiplier", path)) {
            // DeepseekV2Model writes f32(0.1 x mscale_all_dim); llama.cpp then takes mscale =
            // mscale_all_dim (the hub's V2 / V3 configs have the two equal), so the yarn factor on
            // cos / sin is 1.  The config's decimal back: the shortest whose f32(0.1 x it) is the
            // stored value (0.707, not 0.70699996).
            const float stored = v->type() == GgufType::F32 ? v->f32() : float(v->as_float());
            std::string t = format("%.17g", double(stored) / 0.1);
            for (int digits = 1; digits <= 17; digits++) {
                std::string c = format("%.*g", digits, double(stored) / 0.1);
                if (float(0.1 * std::strtod(c.c_str(), nullptr)) == stored) {
                    t = c;
                    break;
                }
            }
            rs += ", \"mscale_all_dim\": " + t + ", \"mscale\": " + t;
        }
    // gpt-oss's YaRN keeps the correction range unrounded (its config says "truncate": false).
    if (arch == "gpt-oss") rs += ", \"truncate\": false";
    return rs + "}";
}

// DeepSeek-V2 / V3 (llama.cpp's "deepseek2"): DeepseekV2Model writes MLA as MQA (head_count_kv 1,
// key_length kv_lora_rank + rope) and the real dimensions as *_mla keys; V3 differs by its sigmoid
// gating (expert_gating_func 2) and the router's score bias.  Converters before the *_mla keys
// (those that stored attn_kv_b whole) wrote key_length = nope + rope and value_length = v.
std::string deepseek2_config_json(const GgufFile &f, const std::string &path, const std::string &arch, uint64_t d,
                                  uint64_t layers, uint64_t heads, uint64_t vocab) {
    auto get = [&](const char *k) { return scalar(f, arch, k, path); };
    auto need = [&](const char *k) -> uint64_t {
        const GgufValue *v = get(k);
        if (!v) throw_error(STK_E_CORRUPT, "%s: metadata key %s.%s is missing (DeepSeek MLA)", path.c_str(), arch.c_str(), k);
        return v->as_uint();
    };
    const uint64_t rope = need("rope.dimension_count");
    uint64_t qk, v;
    if (get("attention.key_length_mla")) qk = need("attention.key_length_mla"), v = need("attention.value_length_mla");
    else qk = need("attention.key_length"), v = need("attention.value_length");
    if (qk <= rope)
        throw_error(STK_E_CORRUPT, "%s: DeepSeek MLA key length %llu is not more than its rotary part %llu", path.c_str(),
                    (unsigned long long)qk, (unsigned long long)rope);
    const GgufValue *gating = get("expert_gating_func");
    const bool v3 = (gating && gating->as_uint() == 2) || tensor(f, "blk.0.exp_probs_b.bias") ||
                    tensor(f, (format("blk.%llu.exp_probs_b.bias", (unsigned long long)(layers ? layers - 1 : 0))).c_str());
    Json j;
    j.str("model_type", v3 ? "deepseek_v3" : "deepseek_v2");
    j.u("vocab_size", vocab);
    j.u("hidden_size", d);
    j.u("num_hidden_layers", layers);
    j.u("num_attention_heads", heads);
    j.u("num_key_value_heads", heads);  // MLA: one kv head per head (the GGUF's 1 is llama.cpp's MQA form)
    if (const GgufValue *x = get("feed_forward_length")) j.u("intermediate_size", x->as_uint());
    if (const GgufValue *x = get("context_length")) j.u("max_position_embeddings", x->as_uint());
    if (const GgufValue *x = get("attention.layer_norm_rms_epsilon")) j.f("rms_norm_eps", *x);
    if (const GgufValue *x = get("rope.freq_base")) j.f("rope_theta", *x);
    if (std::string rs = rope_scaling_json(f, arch, path); !rs.empty()) j.raw("rope_scaling", rs);
    if (const GgufValue *x = get("attention.q_lora_rank")) j.u("q_lora_rank", x->as_uint());
    j.u("kv_lora_rank", need("attention.kv_lora_rank"));
    j.u("qk_rope_head_dim", rope);
    j.u("qk_nope_head_dim", qk - rope);
    j.u("v_head_dim", v);
    if (const GgufValue *x = get("expert_count"); x && x->as_uint() > 0) {
        j.u("n_routed_experts", x->as_uint());
        j.u("num_experts_per_tok", need("expert_used_count"));
        j.u("moe_intermediate_size", need("expert_feed_forward_length"));
        if (const GgufValue *y = get("expert_shared_count")) j.u("n_shared_experts", y->as_uint());
        if (const GgufValue *y = get("leading_dense_block_count")) j.u("first_k_dense_replace", y->as_uint());
        if (const GgufValue *y = get("expert_weights_scale")) j.f("routed_scaling_factor", *y);
        const GgufValue *norm = get("expert_weights_norm");
        j.b("norm_topk_prob", norm && norm->boolean());
        const GgufValue *groups = get("expert_group_count"), *used = get("expert_group_used_count");
        if (groups) j.u("n_group", groups->as_uint());
        else if (v3) j.u("n_group", 1);  // converters before the group keys: llama.cpp runs one group
        if (used) j.u("topk_group", used->as_uint());
        else if (v3 && !groups) j.u("topk_group", 1);
        // The router: V3's "noaux_tc"; V2's greedy, or group_limited_greedy when it has groups.
        j.str("topk_method", v3 ? "noaux_tc" : groups && groups->as_uint() > 1 ? "group_limited_greedy" : "greedy");
    }
    j.b("tie_word_embeddings", tensor(f, "output.weight") == nullptr);
    j.b("attention_bias", false);
    return j.done();
}

}  // namespace

std::string gguf_config_json(const GgufFile &f, const std::string &path) {
    const std::string arch = arch_of(f, path);
    const Arch found = find_arch(arch, path);
    const ArchDef &A = *found.def;
    auto key = [&](const char *k) { return arch + "." + k; };
    auto get = [&](const char *k) -> const GgufValue * {
        const GgufValue *v = f.find(key(k));
        if (v && v->type() == GgufType::ARRAY)
            throw_error(STK_E_UNSUPPORTED, "%s: %s is an array (a value per layer), which stk does not read", path.c_str(),
                        key(k).c_str());
        return v;
    };
    auto need_u = [&](const char *k) -> uint64_t {
        const GgufValue *v = get(k);
        if (!v) throw_error(STK_E_CORRUPT, "%s: metadata key %s is missing", path.c_str(), key(k).c_str());
        return v->as_uint();
    };

    const GgufTensorInfo *emb = tensor(f, "token_embd.weight");
    if (!emb || emb->shape.size() != 2)
        throw_error(STK_E_CORRUPT, "%s: no 2-D token_embd.weight: the vocabulary size is unknown", path.c_str());
    const uint64_t d = need_u("embedding_length"), layers = need_u("block_count"), heads = need_u("attention.head_count");
    uint64_t kv = heads;
    if (const GgufValue *v = get("attention.head_count_kv")) kv = v->as_uint();
    if (const GgufTensorInfo *k = tensor(f, "blk.0.attn_k.weight");
        A.names == Names::Phi2 && k && k->shape.size() == 2 && heads && d % heads == 0)
        kv = k->shape[0] / (d / heads);  // Phi2Model writes head_count_kv = heads whatever the model has
    const uint64_t experts = get("expert_count") ? get("expert_count")->as_uint() : 0;
    if (A.names == Names::Deepseek2) return deepseek2_config_json(f, path, arch, d, layers, heads, emb->shape[0]);

    Json j;
    std::string model_type = found.family->model_types[0];
    if (A.names == Names::Llama && arch == "llama" && experts > 0) model_type = "mixtral";
    j.str("model_type", model_type);
    j.u("vocab_size", emb->shape[0]);
    j.u("hidden_size", d);
    j.u("num_hidden_layers", layers);
    j.u("num_attention_heads", heads);
    if (A.names == Names::Falcon) {
        // Falcon: 1 kv head without new_decoder_architecture is multi_query; ln_attn/ln_mlp
        // (attn_norm_2) mark the new architecture.
        bool new_arch = tensor(f, "blk.0.attn_norm_2.weight") != nullptr;
        j.b("new_decoder_architecture", new_arch);
        j.b("multi_query", !new_arch && kv == 1);
        j.u("num_kv_heads", kv);
        j.b("parallel_attn", true);
        j.b("bias", tensor(f, "blk.0.attn_qkv.bias") != nullptr);
    } else if (A.names != Names::Gpt2 && A.names != Names::Bloom) {
        j.u("num_key_value_heads", kv);
    }
    if (const GgufValue *v = get("attention.key_length"); v && heads && v->as_uint() != d / heads) j.u("head_dim", v->as_uint());
    if (A.names == Names::Phi2) {
        // Phi2Model writes feed_forward_length = 4 x hidden, whatever intermediate_size is.
        j.u("intermediate_size", ffn_width_from_tensors(f, path));
    } else if (A.names == Names::Falcon) {
        // FalconModel writes feed_forward_length = 4 x hidden, whatever ffn_hidden_size is.
        j.u("ffn_hidden_size", ffn_width_from_tensors(f, path));
    } else if (const GgufValue *v = get("feed_forward_length")) {
        j.u("intermediate_size", v->as_uint());
    }
    if (const GgufValue *v = get("context_length"); v && A.names == Names::Bloom) {
        // BloomModel writes seq_length, or n_embed where the config has none (transformers' BloomConfig
        // has none: ALiBi has no length): that placeholder is no context length.
        if (v->as_uint() != d) j.u("seq_length", v->as_uint());
    } else if (v) {
        j.u("max_position_embeddings", v->as_uint());
    }
    if (const GgufValue *v = get("attention.layer_norm_rms_epsilon")) j.f("rms_norm_eps", *v);
    if (const GgufValue *v = get("attention.layer_norm_epsilon")) j.f("layer_norm_epsilon", *v);
    if (const GgufValue *v = get("rope.freq_base")) j.f("rope_theta", *v);
    if (const GgufValue *v = get("rope.dimension_count");
        v && heads && (A.names == Names::GptNeox || A.names == Names::Phi3 || A.names == Names::Phi2 || arch == "stablelm")) {
        const GgufValue *kl = get("attention.key_length");
        uint64_t hd = kl ? kl->as_uint() : d / heads;
        if (hd) j.f("rotary_pct", double(v->as_uint()) / double(hd));
    }
    if (std::string rs = rope_scaling_json(f, arch, path); !rs.empty()) j.raw("rope_scaling", rs);
    if (A.names == Names::GptNeox || arch == "stablelm")
        if (const GgufValue *v = get("use_parallel_residual")) j.b("use_parallel_residual", v->boolean());
    if (arch == "stablelm") {
        j.b("use_qkv_bias", tensor(f, "blk.0.attn_q.bias") != nullptr);
        // Per-head Q/K LayerNorms (StableLM 2 12B) are stacked as attn_q_norm / attn_k_norm, which
        // no rename maps: such a file is refused by that tensor's name below.
    }
    if (A.names == Names::Starcoder2) j.b("use_bias", tensor(f, "blk.0.attn_q.bias") != nullptr);
    if (arch == "command-r") {
        if (const GgufValue *v = get("logit_scale")) j.f("logit_scale", *v);
        // Command R+'s per-head Q/K LayerNorms: the family refuses use_qk_norm by name.
        j.b("use_qk_norm", tensor(f, "blk.0.attn_q_norm.weight") != nullptr);
    }
    if (A.names == Names::Phi3) {
        if (const GgufValue *v = get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
        if (const GgufValue *v = get("rope.scaling.original_context_length"))
            j.u("original_max_position_embeddings", v->as_uint());
    }
    if (experts > 0) {
        j.u(A.names == Names::Llama && arch == "llama" ? "num_local_experts" : "num_experts", experts);
        if (const GgufValue *v = get("expert_used_count")) j.u("num_experts_per_tok", v->as_uint());
        if (const GgufValue *v = get("expert_feed_forward_length")) j.u("moe_intermediate_size", v->as_uint());
        if (const GgufValue *v = get("expert_shared_feed_forward_length")) j.u("shared_expert_intermediate_size", v->as_uint());
        else if (const GgufTensorInfo *t = tensor(f, "blk.0.ffn_up_shexp.weight"); t && t->shape.size() == 2)
            j.u("shared_expert_intermediate_size", t->shape[0]);
        // No key records it: what llama.cpp applies per architecture (the hub configs agree).
        if (const GgufValue *v = get("expert_weights_norm")) j.b("norm_topk_prob", v->boolean());
        else if (arch == "qwen2moe" || arch == "olmoe") j.b("norm_topk_prob", false);  // Qwen2MoeConfig's / OlmoeConfig's default
        else if (arch == "qwen3moe") j.b("norm_topk_prob", true);
    }
    if (A.names == Names::Granite) {
        // GraniteModel writes the multipliers under llama.cpp's *_scale names (only when non-zero).
        if (const GgufValue *v = get("attention.scale")) j.f("attention_multiplier", *v);
        if (const GgufValue *v = get("embedding_scale")) j.f("embedding_multiplier", *v);
        if (const GgufValue *v = get("residual_scale")) j.f("residual_multiplier", *v);
        if (const GgufValue *v = get("logit_scale")) j.f("logits_scaling", *v);
        j.b("attention_bias", tensor(f, "blk.0.attn_q.bias") != nullptr);
    }
    if (A.names == Names::Phimoe || A.names == Names::GptOss) {
        if (const GgufValue *v = get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
        j.b("attention_bias", tensor(f, "blk.0.attn_q.bias") != nullptr);
    }
    if (A.names == Names::Phimoe) j.b("lm_head_bias", tensor(f, "output.bias") != nullptr);
    if (A.names == Names::GptOss) {
        // The experts as the hub ships them (MXFP4 blocks) or dequantised (a bf16 checkpoint's
        // conversion): the checkpoint below presents the matching HF layout.
        const GgufTensorInfo *g = tensor(f, "blk.0.ffn_gate_exps.weight");
        if (g && g->type == kGgmlMxfp4) j.raw("quantization_config", "{\"quant_method\": \"mxfp4\"}");
    }
    if (A.names == Names::Internlm2) {
        // InternLM2Model splits wqkv and cannot split a bias (it reshapes it as a matrix): none.
        j.b("bias", false);
    }
    if (A.names == Names::Gemma3) {
        if (const GgufValue *v = get("attention.sliding_window")) j.u("sliding_window", v->as_uint());
        if (const GgufValue *v = get("final_logit_softcapping")) j.f("final_logit_softcapping", *v);
        if (const GgufValue *v = get("attn_logit_softcapping")) j.f("attn_logit_softcapping", *v);
        // No key records query_pre_attn_scalar: llama.cpp scales by the head size, except for
        // Gemma 2 27B (46 layers), where it takes hidden / heads (that model's 144).
        if (arch == "gemma2" && layers == 46 && heads) j.u("query_pre_attn_scalar", d / heads);
        else if (const GgufValue *v = get("attention.key_length")) j.u("query_pre_attn_scalar", v->as_uint());
    }
    // What only the tensors say.
    j.b("tie_word_embeddings", tensor(f, "output.weight") == nullptr);
    if (A.names == Names::Llama && (arch == "llama" || arch == "arcee" || arch == "command-r")) {
        j.b("attention_bias", tensor(f, "blk.0.attn_q.bias") != nullptr);
        j.b("mlp_bias", tensor(f, "blk.0.ffn_up.bias") != nullptr);
    }
    if (A.names == Names::Gpt2) {
        // GPT2Config spellings (n_inner = the FFN width).
        Json g;
        g.str("model_type", "gpt2");
        g.u("vocab_size", emb->shape[0]);
        g.u("n_embd", d);
        g.u("n_layer", layers);
        g.u("n_head", heads);
        // GPT2Model writes feed_forward_length = 4 x n_embd, whatever n_inner is.
        g.u("n_inner", ffn_width_from_tensors(f, path));
        const GgufTensorInfo *pos = tensor(f, "position_embd.weight");
        if (pos && pos->shape.size() == 2) g.u("n_positions", pos->shape[0]);
        else if (const GgufValue *v = get("context_length")) g.u("n_positions", v->as_uint());
        if (const GgufValue *v = get("attention.layer_norm_epsilon")) g.f("layer_norm_epsilon", *v);
        g.b("tie_word_embeddings", tensor(f, "output.weight") == nullptr || head_copies_embedding(f));
        return g.done();
    }
    if (A.names == Names::Starcoder) {
        // GPTBigCodeConfig spellings. StarCoderModel writes feed_forward_length = 4 x hidden and
        // head_count_kv = 1 whatever the model has: the FFN width from ffn_up, multi-query from
        // attn_qkv's rows (d + 2 head_dim: one K/V head; 3d: one per head).
        const GgufTensorInfo *up = tensor(f, "blk.0.ffn_up.weight"), *qkv = tensor(f, "blk.0.attn_qkv.weight");
        if (!up || up->shape.size() != 2 || !qkv || qkv->shape.size() != 2 || !heads || d % heads)
            throw_error(STK_E_CORRUPT,
                        "%s: no 2-D blk.0.ffn_up.weight / blk.0.attn_qkv.weight: the FFN width or "
                        "the K/V heads are unknown",
                        path.c_str());
        const uint64_t hd = d / heads;
        if (qkv->shape[0] != d + 2 * hd && qkv->shape[0] != 3 * d)
            throw_error(STK_E_CORRUPT,
                        "%s: GGUF tensor 'blk.0.attn_qkv.weight' (offset %llu): %llu rows, neither "
                        "multi-query (%llu) nor one K/V per head (%llu)",
                        path.c_str(), (unsigned long long)qkv->data_offset, (unsigned long long)qkv->shape[0],
                        (unsigned long long)(d + 2 * hd), (unsigned long long)(3 * d));
        Json g;
        g.str("model_type", "gpt_bigcode");
        g.u("vocab_size", emb->shape[0]);
        g.u("n_embd", d);
        g.u("n_layer", layers);
        g.u("n_head", heads);
        g.u("n_inner", up->shape[0]);
        g.b("multi_query", qkv->shape[0] == d + 2 * hd);
        const GgufTensorInfo *pos = tensor(f, "position_embd.weight");
        if (pos && pos->shape.size() == 2) g.u("n_positions", pos->shape[0]);
        else if (const GgufValue *v = get("context_length")) g.u("n_positions", v->as_uint());
        if (const GgufValue *v = get("attention.layer_norm_epsilon")) g.f("layer_norm_epsilon", *v);
        g.b("tie_word_embeddings", tensor(f, "output.weight") == nullptr);
        return g.done();
    }
    if (A.names == Names::Mpt) {
        // MptConfig spellings; the ALiBi bias maximum and clip_qkv under attn_config (the family
        // refuses any but the released models' alibi 8, no clip).
        Json g;
        g.str("model_type", "mpt");
        g.u("vocab_size", emb->shape[0]);
        g.u("d_model", d);
        g.u("n_layers", layers);
        g.u("n_heads", heads);
        if (const GgufValue *v = get("context_length")) g.u("max_seq_len", v->as_uint());
        if (const GgufValue *v = get("attention.layer_norm_epsilon")) g.f("layer_norm_epsilon", *v);
        g.b("no_bias", tensor(f, "blk.0.attn_qkv.bias") == nullptr);
        Json a;
        const GgufValue *bias_max = get("attention.max_alibi_bias");
        a.b("alibi", bias_max && bias_max->as_float() > 0);
        if (bias_max && bias_max->as_float() > 0) {
            const double bm = bias_max->as_float();
            if (bm != std::floor(bm) || bm > 1e6)
                throw_error(STK_E_UNSUPPORTED, "%s: metadata key %s is %g, not the whole number MPT's alibi_bias_max is",
                            path.c_str(), key("attention.max_alibi_bias").c_str(), bm);
            a.u("alibi_bias_max", uint64_t(bm));
        }
        if (const GgufValue *v = get("attention.clamp_kqv")) a.f("clip_qkv", *v);
        if (kv != heads) a.u("kv_n_heads", kv);
        g.raw("attn_config", a.done());
        g.b("tie_word_embeddings", tensor(f, "output.weight") == nullptr);
        return g.done();
    }
    if (A.names == Names::Bloom) j.u("n_head", heads);
    return j.done();
}

// ---------------------------------------------------------------------------------------------
// Tensor names and layouts.

namespace {

// How an HF tensor's bytes come from its GGUF tensor.
enum class Fix : uint8_t {
    None,       // as stored
    Unpermute,  // Llama Q/K rows: GGUF row h*hd + 2i + j holds HF row h*hd + j*hd/2 + i
    Qkv,        // fused [Q; K; V] rows back to the config's fused layout
    Transpose,  // GPT-2 Conv1D: stored [out, in], HF [in, out]
    MinusOne,   // Gemma norm weight: stored weight + 1 (as f32)
    Expert,     // one expert of a [experts, rows, cols] stack
    Gather,     // one HF tensor put together from several GGUF tensors (Gather below)
};

struct Mapped {
    uint32_t raw = 0;  // index into the raw checkpoint's tensors
    Fix fix = Fix::None;
    uint32_t heads = 0;   // Unpermute: heads of this projection
    uint32_t expert = 0;  // Expert: which slice
    uint32_t gather = 0;  // Gather: index into the checkpoint's gathers
};

// HF tensors that llama.cpp's converter split into several GGUF tensors (or re-laid element by
// element), and how each HF row or element is found again.
enum class Gk : uint8_t {
    GraniteGateUp,     // input_linear [E, 2F, D] = per expert [gate_e; up_e] (GraniteMoeModel splits it)
    InternlmQkv,       // wqkv, per kv head [its q heads; k; v], q / k rows permuted (InternLM2Model)
    DeepseekKvB,       // kv_b_proj [H (nope + v), kv_lora] = per head [k_b^T; v_b] (DeepseekV2Model)
    GptOssGateUp,      // gate_up_proj [E, D, 2F]: [in, out], gate / up columns alternating (GptOssModel)
    GptOssGateUpBias,  // gate_up_proj_bias [E, 2F]: gate / up alternating
    GptOssDown,        // down_proj [E, F, D]: the stored [E, D, F] transposed
};
constexpr uint32_t gather_parts(Gk k) { return k == Gk::InternlmQkv ? 3 : k == Gk::GptOssDown ? 1 : 2; }

struct Gather {
    Gk kind;
    bool mxfp4 = false;                   // ggml MXFP4 rows re-laid as transformers' _blocks + _scales
    bool elements = false;                // gathered element by element (a transpose), else by stored rows
    bool f32 = false;                     // parts dequantised to f32 first (a transpose of blocks, or
                                          // parts of different types: quantised files mix them)
    uint32_t raw[3] = {};                 // the GGUF tensors (raw checkpoint indices), in gather_parts order
    uint64_t a = 0, b = 0, c = 0, e = 0;  // the kind's dimensions (Gather::source)
    uint64_t out_rows = 0;                // row gathers: rows of the result

    // Row gathers: the part and stored row that hold result row r.
    std::pair<uint32_t, uint64_t> row(uint64_t r) const {
        switch (kind) {
            case Gk::GraniteGateUp: {  // a = experts, b = F
                const uint64_t ex = r / (2 * b), j = r % (2 * b);
                return j < b ? std::pair<uint32_t, uint64_t>{0, ex * b + j} : std::pair<uint32_t, uint64_t>{1, ex * b + j - b};
            }
            case Gk::InternlmQkv: {  // a = heads, b = kv heads, c = head_dim
                const uint64_t qpk = a / b, g = r / ((qpk + 2) * c), slot = (r / c) % (qpk + 2), w = r % c, half = c / 2;
                const uint64_t unperm = 2 * (w % half) + w / half;  // LlamaModel.permute undone
                if (slot < qpk) return {0, (g * qpk + slot) * c + unperm};
                if (slot == qpk) return {1, g * c + unperm};
                return {2, g * c + w};
            }
            case Gk::GptOssGateUp: {  // MXFP4 rows [E, 2F, D]: a = experts, b = F
                const uint64_t ex = r / (2 * b), n = r % (2 * b);
                return {uint32_t(n % 2), ex * b + n / 2};
            }
            default: return {0, r};  // GptOssDown in MXFP4: the stored rows as they are
        }
    }
    // Element gathers: the part and element index that hold result element i.
    std::pair<uint32_t, uint64_t> element(uint64_t i) const {
        switch (kind) {
            case Gk::DeepseekKvB: {  // a = heads, b = nope, c = v, e = kv_lora
                const uint64_t r = i / e, col = i % e, h = r / (b + c), j = r % (b + c);
                if (j < b) return {0, (h * e + col) * b + j};  // k_b stored [H, kv_lora, nope]
                return {1, (h * c + (j - b)) * e + col};       // v_b stored [H, v, kv_lora]
            }
            case Gk::GptOssGateUp: {  // [E, D, 2F] from [E, F, D]: a = experts, b = F, c = D
                const uint64_t ex = i / (c * 2 * b), d = (i / (2 * b)) % c, n = i % (2 * b);
                return {uint32_t(n % 2), (ex * b + n / 2) * c + d};
            }
            case Gk::GptOssGateUpBias: {  // [E, 2F] from [E, F]: b = F
                const uint64_t ex = i / (2 * b), n = i % (2 * b);
                return {uint32_t(n % 2), ex * b + n / 2};
            }
            default: {  // GptOssDown: [E, F, D] from [E, D, F]: b = D, c = F
                const uint64_t ex = i / (c * b), f = (i / b) % c, d = i % b;
                return {0, (ex * b + d) * c + f};
            }
        }
    }
};

struct Rename {
    const char *gguf;  // name after "blk.N." (layer tensors) or whole (global tensors)
    const char *hf;    // with {L} for the layer and {E} for the expert
};

// Layer tensors per name table (suffix .weight / .bias kept as is).
const Rename kLlamaLayer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_gate", "model.layers.{L}.mlp.gate_proj"},
    {"ffn_up", "model.layers.{L}.mlp.up_proj"},
    {"ffn_down", "model.layers.{L}.mlp.down_proj"},
    // Qwen3 / OLMo2 / OLMoE q/k norms, OLMo2's post-sublayer norms (absent from Llama files)
    {"attn_q_norm", "model.layers.{L}.self_attn.q_norm"},
    {"attn_k_norm", "model.layers.{L}.self_attn.k_norm"},
    {"post_attention_norm", "model.layers.{L}.post_attention_layernorm"},
    {"post_ffw_norm", "model.layers.{L}.post_feedforward_layernorm"},
};
const Rename kMixtralLayer[] = {
    {"ffn_gate_inp", "model.layers.{L}.block_sparse_moe.gate"},
    {"ffn_gate_exps", "model.layers.{L}.block_sparse_moe.experts.{E}.w1"},
    {"ffn_down_exps", "model.layers.{L}.block_sparse_moe.experts.{E}.w2"},
    {"ffn_up_exps", "model.layers.{L}.block_sparse_moe.experts.{E}.w3"},
};
const Rename kQwen2MoeLayer[] = {
    {"ffn_gate_inp", "model.layers.{L}.mlp.gate"},
    {"ffn_gate_exps", "model.layers.{L}.mlp.experts.{E}.gate_proj"},
    {"ffn_up_exps", "model.layers.{L}.mlp.experts.{E}.up_proj"},
    {"ffn_down_exps", "model.layers.{L}.mlp.experts.{E}.down_proj"},
    {"ffn_gate_inp_shexp", "model.layers.{L}.mlp.shared_expert_gate"},
    {"ffn_gate_shexp", "model.layers.{L}.mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "model.layers.{L}.mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "model.layers.{L}.mlp.shared_expert.down_proj"},
};
const Rename kGemma3Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"attn_q_norm", "model.layers.{L}.self_attn.q_norm"},
    {"attn_k_norm", "model.layers.{L}.self_attn.k_norm"},
    {"post_attention_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_norm", "model.layers.{L}.pre_feedforward_layernorm"},
    {"post_ffw_norm", "model.layers.{L}.post_feedforward_layernorm"},
    {"ffn_gate", "model.layers.{L}.mlp.gate_proj"},
    {"ffn_up", "model.layers.{L}.mlp.up_proj"},
    {"ffn_down", "model.layers.{L}.mlp.down_proj"},
};
const Rename kGpt2Layer[] = {
    {"attn_norm", "h.{L}.ln_1"}, {"attn_qkv", "h.{L}.attn.c_attn"}, {"attn_output", "h.{L}.attn.c_proj"},
    {"ffn_norm", "h.{L}.ln_2"},  {"ffn_up", "h.{L}.mlp.c_fc"},      {"ffn_down", "h.{L}.mlp.c_proj"},
};
const Rename kNeoxLayer[] = {
    {"attn_norm", "gpt_neox.layers.{L}.input_layernorm"},   {"attn_qkv", "gpt_neox.layers.{L}.attention.query_key_value"},
    {"attn_output", "gpt_neox.layers.{L}.attention.dense"}, {"ffn_norm", "gpt_neox.layers.{L}.post_attention_layernorm"},
    {"ffn_up", "gpt_neox.layers.{L}.mlp.dense_h_to_4h"},    {"ffn_down", "gpt_neox.layers.{L}.mlp.dense_4h_to_h"},
};
// BLOOM under transformers' names today (BloomForCausalLM's save_pretrained: transformer.h.N...;
// the hub's older checkpoints have bare h.N..., which the family reads too: docs/decisions.md).
const Rename kBloomLayer[] = {
    {"attn_norm", "transformer.h.{L}.input_layernorm"},
    {"attn_qkv", "transformer.h.{L}.self_attention.query_key_value"},
    {"attn_output", "transformer.h.{L}.self_attention.dense"},
    {"ffn_norm", "transformer.h.{L}.post_attention_layernorm"},
    {"ffn_up", "transformer.h.{L}.mlp.dense_h_to_4h"},
    {"ffn_down", "transformer.h.{L}.mlp.dense_4h_to_h"},
};
const Rename kFalconLayer[] = {
    // new_decoder_architecture: gguf-py maps ln_mlp (the FFN's norm) to attn_norm and ln_attn to
    // attn_norm_2 (llama.cpp's Falcon-40B graph: attn_norm_2 before attention, attn_norm before the FFN)
    {"attn_norm", "transformer.h.{L}.input_layernorm"},
    {"attn_norm_2", "transformer.h.{L}.ln_attn"},
    {"attn_qkv", "transformer.h.{L}.self_attention.query_key_value"},
    {"attn_output", "transformer.h.{L}.self_attention.dense"},
    {"ffn_up", "transformer.h.{L}.mlp.dense_h_to_4h"},
    {"ffn_down", "transformer.h.{L}.mlp.dense_4h_to_h"},
};

// An HF name ending in '$' takes no .weight / .bias suffix (HF's own suffix-less names).
const Rename kDeepseekLayer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_q_a", "model.layers.{L}.self_attn.q_a_proj"},
    {"attn_q_a_norm", "model.layers.{L}.self_attn.q_a_layernorm"},
    {"attn_q_b", "model.layers.{L}.self_attn.q_b_proj"},
    {"attn_kv_a_mqa", "model.layers.{L}.self_attn.kv_a_proj_with_mqa"},
    {"attn_kv_a_norm", "model.layers.{L}.self_attn.kv_a_layernorm"},
    {"attn_kv_b", "model.layers.{L}.self_attn.kv_b_proj"},  // converters before attn_k_b / attn_v_b
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"ffn_gate", "model.layers.{L}.mlp.gate_proj"},
    {"ffn_up", "model.layers.{L}.mlp.up_proj"},
    {"ffn_down", "model.layers.{L}.mlp.down_proj"},
    {"ffn_gate_inp", "model.layers.{L}.mlp.gate"},
    {"exp_probs_b", "model.layers.{L}.mlp.gate.e_score_correction_bias$"},
    {"ffn_gate_shexp", "model.layers.{L}.mlp.shared_experts.gate_proj"},
    {"ffn_up_shexp", "model.layers.{L}.mlp.shared_experts.up_proj"},
    {"ffn_down_shexp", "model.layers.{L}.mlp.shared_experts.down_proj"},
};
const Rename kDeepseekMoe[] = {
    {"ffn_gate_exps", "model.layers.{L}.mlp.experts.{E}.gate_proj"},
    {"ffn_up_exps", "model.layers.{L}.mlp.experts.{E}.up_proj"},
    {"ffn_down_exps", "model.layers.{L}.mlp.experts.{E}.down_proj"},
};
const Rename kGraniteMoe[] = {
    {"ffn_gate_inp", "model.layers.{L}.block_sparse_moe.router.layer"},
    {"ffn_down_exps", "model.layers.{L}.block_sparse_moe.output_linear"},  // [E, D, F] as HF stores it
};
const Rename kGptOssLayer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"post_attention_norm", "model.layers.{L}.post_attention_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"attn_sinks", "model.layers.{L}.self_attn.sinks$"},
    {"ffn_gate_inp", "model.layers.{L}.mlp.router"},
    {"ffn_down_exps", "model.layers.{L}.mlp.experts.down_proj_bias$"},  // the .bias; .weight is a gather
};
// Phi-3: the fused projections renamed as they are (HF keeps them fused too).
const Rename kPhi3Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},    {"attn_qkv", "model.layers.{L}.self_attn.qkv_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"}, {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_up", "model.layers.{L}.mlp.gate_up_proj"},      {"ffn_down", "model.layers.{L}.mlp.down_proj"},
};
const Rename kStarcoder2Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.o_proj"},
    {"ffn_norm", "model.layers.{L}.post_attention_layernorm"},
    {"ffn_up", "model.layers.{L}.mlp.c_fc"},
    {"ffn_down", "model.layers.{L}.mlp.c_proj"},
};
const Rename kPhi2Layer[] = {
    {"attn_norm", "model.layers.{L}.input_layernorm"},
    {"attn_q", "model.layers.{L}.self_attn.q_proj"},
    {"attn_k", "model.layers.{L}.self_attn.k_proj"},
    {"attn_v", "model.layers.{L}.self_attn.v_proj"},
    {"attn_output", "model.layers.{L}.self_attn.dense"},
    {"ffn_up", "model.layers.{L}.mlp.fc1"},
    {"ffn_down", "model.layers.{L}.mlp.fc2"},
};
const Rename kStarcoderLayer[] = {
    {"attn_norm", "transformer.h.{L}.ln_1"},          {"attn_qkv", "transformer.h.{L}.attn.c_attn"},
    {"attn_output", "transformer.h.{L}.attn.c_proj"}, {"ffn_norm", "transformer.h.{L}.ln_2"},
    {"ffn_up", "transformer.h.{L}.mlp.c_fc"},         {"ffn_down", "transformer.h.{L}.mlp.c_proj"},
};
const Rename kMptLayer[] = {
    {"attn_norm", "transformer.blocks.{L}.norm_1"},          {"attn_qkv", "transformer.blocks.{L}.attn.Wqkv"},
    {"attn_output", "transformer.blocks.{L}.attn.out_proj"}, {"ffn_norm", "transformer.blocks.{L}.norm_2"},
    {"ffn_up", "transformer.blocks.{L}.ffn.up_proj"},        {"ffn_down", "transformer.blocks.{L}.ffn.down_proj"},
};
const Rename kInternlm2Layer[] = {
    {"attn_norm", "model.layers.{L}.attention_norm"}, {"ffn_norm", "model.layers.{L}.ffn_norm"},
    {"attn_output", "model.layers.{L}.attention.wo"}, {"ffn_gate", "model.layers.{L}.feed_forward.w1"},
    {"ffn_up", "model.layers.{L}.feed_forward.w3"},   {"ffn_down", "model.layers.{L}.feed_forward.w2"},
};

// The GGUF tensors (name after "blk.N.", suffix included) that are parts of a gather.
struct GatherRule {
    Names names;
    const char *gguf;
    Gk kind;
    uint8_t part;
    const char *hf;
};
const GatherRule kGatherRules[] = {
    {Names::Granite, "ffn_gate_exps.weight", Gk::GraniteGateUp, 0, "model.layers.{L}.block_sparse_moe.input_linear.weight"},
    {Names::Granite, "ffn_up_exps.weight", Gk::GraniteGateUp, 1, "model.layers.{L}.block_sparse_moe.input_linear.weight"},
    {Names::Internlm2, "attn_q.weight", Gk::InternlmQkv, 0, "model.layers.{L}.attention.wqkv.weight"},
    {Names::Internlm2, "attn_k.weight", Gk::InternlmQkv, 1, "model.layers.{L}.attention.wqkv.weight"},
    {Names::Internlm2, "attn_v.weight", Gk::InternlmQkv, 2, "model.layers.{L}.attention.wqkv.weight"},
    {Names::Deepseek2, "attn_k_b.weight", Gk::DeepseekKvB, 0, "model.layers.{L}.self_attn.kv_b_proj.weight"},
    {Names::Deepseek2, "attn_v_b.weight", Gk::DeepseekKvB, 1, "model.layers.{L}.self_attn.kv_b_proj.weight"},
    {Names::GptOss, "ffn_gate_exps.weight", Gk::GptOssGateUp, 0, "model.layers.{L}.mlp.experts.gate_up_proj"},
    {Names::GptOss, "ffn_up_exps.weight", Gk::GptOssGateUp, 1, "model.layers.{L}.mlp.experts.gate_up_proj"},
    {Names::GptOss, "ffn_gate_exps.bias", Gk::GptOssGateUpBias, 0, "model.layers.{L}.mlp.experts.gate_up_proj_bias"},
    {Names::GptOss, "ffn_up_exps.bias", Gk::GptOssGateUpBias, 1, "model.layers.{L}.mlp.experts.gate_up_proj_bias"},
    {Names::GptOss, "ffn_down_exps.weight", Gk::GptOssDown, 0, "model.layers.{L}.mlp.experts.down_proj"},
};

struct Table {
    const Rename *layer;
    size_t n_layer;
    const Rename *moe = nullptr;
    size_t n_moe = 0;
    const char *emb, *pos, *emb_norm, *final_norm, *head;
};

template <size_t N>
constexpr size_t count(const Rename (&)[N]) {
    return N;
}

Table table_for(const ArchDef &A, const std::string &arch) {
    switch (A.names) {
        case Names::Llama: {
            Table t{kLlamaLayer, count(kLlamaLayer), nullptr, 0, "model.embed_tokens", nullptr, nullptr, "model.norm", "lm_head"};
            if (arch == "llama") t.moe = kMixtralLayer, t.n_moe = count(kMixtralLayer);
            if (arch == "qwen2moe" || arch == "qwen3moe" || arch == "olmoe")
                t.moe = kQwen2MoeLayer, t.n_moe = count(kQwen2MoeLayer);
            return t;
        }
        case Names::Gemma3:
            return {kGemma3Layer, count(kGemma3Layer), nullptr,  0, "model.embed_tokens", nullptr,
                    nullptr,      "model.norm",        "lm_head"};
        case Names::Gpt2: return {kGpt2Layer, count(kGpt2Layer), nullptr, 0, "wte", "wpe", nullptr, "ln_f", "lm_head"};
        case Names::GptNeox:
            return {kNeoxLayer, count(kNeoxLayer),           nullptr,    0, "gpt_neox.embed_in", nullptr,
                    nullptr,    "gpt_neox.final_layer_norm", "embed_out"};
        case Names::Bloom:
            return {kBloomLayer, count(kBloomLayer), nullptr, 0, "transformer.word_embeddings", nullptr,
                    "transformer.word_embeddings_layernorm", "transformer.ln_f", "lm_head"};
        case Names::Falcon:
            return {kFalconLayer, count(kFalconLayer), nullptr,  0, "transformer.word_embeddings", nullptr,
                    nullptr,      "transformer.ln_f",  "lm_head"};
        case Names::Deepseek2:
            return {kDeepseekLayer, count(kDeepseekLayer), kDeepseekMoe, count(kDeepseekMoe), "model.embed_tokens", nullptr,
                    nullptr,        "model.norm",          "lm_head"};
        case Names::Phimoe:
            return {kLlamaLayer, count(kLlamaLayer), kMixtralLayer, count(kMixtralLayer), "model.embed_tokens", nullptr,
                    nullptr,     "model.norm",       "lm_head"};
        case Names::Granite:
            return {kLlamaLayer, count(kLlamaLayer), kGraniteMoe, count(kGraniteMoe), "model.embed_tokens", nullptr,
                    nullptr,     "model.norm",       "lm_head"};
        case Names::GptOss:
            return {kGptOssLayer, count(kGptOssLayer), nullptr,  0, "model.embed_tokens", nullptr,
                    nullptr,      "model.norm",        "lm_head"};
        case Names::Phi3:
            return {kPhi3Layer, count(kPhi3Layer), nullptr, 0, "model.embed_tokens", nullptr, nullptr, "model.norm", "lm_head"};
        case Names::Starcoder2:
            return {kStarcoder2Layer, count(kStarcoder2Layer), nullptr, 0, "model.embed_tokens", nullptr, nullptr, "model.norm",
                    "lm_head"};
        case Names::Phi2:
            return {kPhi2Layer, count(kPhi2Layer),       nullptr,  0, "model.embed_tokens", nullptr,
                    nullptr,    "model.final_layernorm", "lm_head"};
        case Names::Starcoder:
            return {kStarcoderLayer, count(kStarcoderLayer), nullptr,  0, "transformer.wte", "transformer.wpe",
                    nullptr,         "transformer.ln_f",     "lm_head"};
        case Names::Mpt:
            return {kMptLayer, count(kMptLayer),     nullptr,  0, "transformer.wte", nullptr,
                    nullptr,   "transformer.norm_f", "lm_head"};
        case Names::Internlm2:
            return {kInternlm2Layer, count(kInternlm2Layer), nullptr, 0, "model.tok_embeddings", nullptr,
                    nullptr,         "model.norm",           "output"};
    }
    return {};
}

std::string subst(const char *pattern, uint64_t layer, uint64_t expert) {
    std::string out;
    for (const char *p = pattern; *p; p++) {
        if (p[0] == '{' && p[1] == 'L' && p[2] == '}') out += std::to_string(layer), p += 2;
        else if (p[0] == '{' && p[1] == 'E' && p[2] == '}') out += std::to_string(expert), p += 2;
        else out += *p;
    }
    return out;
}

bool split_suffix(const std::string &name, std::string *stem, std::string *suffix) {
    for (const char *s : {".weight", ".bias"})
        if (ends_with(name, s)) {
            *stem = name.substr(0, name.size() - std::strlen(s));
            *suffix = s;
            return true;
        }
    return false;
}

// Stored bytes of `n` elements of t from a block boundary (n a whole number of its blocks when
// t is quantised: GGUF rows are).
uint64_t stored_bytes(const TensorRef &t, uint64_t n) {
    if (!t.ggml_type) return checked_mul(n, src_dtype_size(t.dtype), "tensor bytes");
    const GgmlTypeInfo *info = ggml_type_info(t.ggml_type);
    const uint64_t block = info ? info->block : 0;
    if (!block || n % block)
        throw_error(STK_E_UNSUPPORTED, "%s: tensor '%s': %llu elements are not whole ggml blocks of %llu", t.file.c_str(),
                    t.name.c_str(), (unsigned long long)n, (unsigned long long)block);
    return checked_mul(n / block, info->block_bytes, "tensor bytes");
}

std::string with_suffix(const std::string &hf, const std::string &suffix) {
    return !hf.empty() && hf.back() == '$' ? hf.substr(0, hf.size() - 1) : hf + suffix;
}

// The HF tensor a gather gives, its parts checked against each other and the config: every part
// present, one dtype / ggml type, the shapes the converter writes.  Refusals name the file, the
// GGUF tensor and what is wrong.
TensorRef build_gather(const std::string &path, const std::string &hf, Gk kind, const int64_t raw[3],
                       const std::vector<TensorRef> &rt, const ModelConfig &cfg, std::vector<Gather> *gathers) {
    static const char *const kParts[][3] = {
        {"ffn_gate_exps.weight", "ffn_up_exps.weight", ""}, {"attn_q.weight", "attn_k.weight", "attn_v.weight"},
        {"attn_k_b.weight", "attn_v_b.weight", ""},         {"ffn_gate_exps.weight", "ffn_up_exps.weight", ""},
        {"ffn_gate_exps.bias", "ffn_up_exps.bias", ""},     {"ffn_down_exps.weight", "", ""},
    };
    const uint32_t n = gather_parts(kind);
    const TensorRef *src[3] = {};
    for (uint32_t k = 0; k < n; k++) {
        if (raw[k] < 0) {
            const TensorRef &have = rt[size_t(raw[0] >= 0 ? raw[0] : raw[1] >= 0 ? raw[1] : raw[2])];
            throw_error(STK_E_CORRUPT,
                        "%s: GGUF tensor '%s' (offset %llu): '%s' needs its %s from the same block too, and the file has none",
                        path.c_str(), printable(have.name).c_str(), (unsigned long long)have.file_offset, hf.c_str(),
                        kParts[int(kind)][k]);
        }
        src[k] = &rt[size_t(raw[k])];
    }
    auto refuse = [&](const TensorRef &t, const std::string &why) {
        throw_error(STK_E_UNSUPPORTED, "%s: GGUF tensor '%s' (offset %llu): %s (for '%s')", path.c_str(),
                    printable(t.name).c_str(), (unsigned long long)t.file_offset, why.c_str(), hf.c_str());
    };
    auto dims = [](const TensorRef &t) {
        std::string s = "[";
        for (size_t i = 0; i < t.shape.size(); i++) s += (i ? ", " : "") + std::to_string(t.shape[i]);
        return s + "]";
    };
    bool same = true;
    for (uint32_t k = 1; k < n; k++) same = same && src[k]->dtype == src[0]->dtype && src[k]->ggml_type == src[0]->ggml_type;
    Gather g;
    g.kind = kind;
    for (uint32_t k = 0; k < n; k++) g.raw[k] = uint32_t(raw[k]);
    const TensorRef &s0 = *src[0];
    const bool mx = same && s0.ggml_type == kGgmlMxfp4;
    for (uint32_t k = 0; k < n; k++)
        if (src[k]->ggml_type == kGgmlMxfp4 && !(mx && (kind == Gk::GptOssGateUp || kind == Gk::GptOssDown)))
            refuse(*src[k], "MXFP4 blocks, which stk reads only as gpt-oss's gate, up and down experts (both of a pair MXFP4)");
    std::vector<uint64_t> shape;
    switch (kind) {
        case Gk::GraniteGateUp:
        case Gk::GptOssGateUp: {
            if (s0.shape.size() != 3 || src[1]->shape != s0.shape)
                refuse(*src[1], "gate and up expert stacks of shapes " + dims(s0) + " and " + dims(*src[1]) +
                                    ", not two equal [experts, rows, cols]");
            g.a = s0.shape[0], g.b = s0.shape[1], g.c = s0.shape[2];
            if (kind == Gk::GraniteGateUp) {
                shape = {g.a, 2 * g.b, g.c};
            } else if (mx) {
                g.mxfp4 = true;
                shape = {g.a, 2 * g.b, g.c};
            } else {
                g.elements = true;
                shape = {g.a, g.c, 2 * g.b};
            }
            break;
        }
        case Gk::InternlmQkv: {
            const uint64_t hd = cfg.head_dim, q = uint64_t(cfg.n_heads) * hd, kv = uint64_t(cfg.n_kv_heads) * hd;
            g.a = cfg.n_heads, g.b = cfg.n_kv_heads, g.c = hd;
            const uint64_t want[3] = {q, kv, kv};
            for (uint32_t k = 0; k < 3; k++)
                if (src[k]->shape.size() != 2 || src[k]->shape[0] != want[k] || src[k]->shape[1] != s0.shape.back())
                    refuse(*src[k], "shape " + dims(*src[k]) + ", not the [" + std::to_string(want[k]) + ", d] the heads give");
            if (hd % 2 || g.b == 0 || g.a % g.b) refuse(s0, "heads that LlamaModel.permute cannot have written");
            shape = {q + 2 * kv, s0.shape[1]};
            break;
        }
        case Gk::DeepseekKvB: {
            g.a = cfg.n_heads, g.b = cfg.qk_nope_dim, g.c = cfg.v_head_dim, g.e = cfg.kv_lora_rank;
            if (s0.shape != std::vector<uint64_t>{g.a, g.e, g.b})
                refuse(s0, "shape " + dims(s0) + ", not [heads, kv_lora_rank, qk_nope_head_dim] = [" + std::to_string(g.a) +
                               ", " + std::to_string(g.e) + ", " + std::to_string(g.b) + "]");
            if (src[1]->shape != std::vector<uint64_t>{g.a, g.c, g.e})
                refuse(*src[1], "shape " + dims(*src[1]) + ", not [heads, v_head_dim, kv_lora_rank] = [" + std::to_string(g.a) +
                                    ", " + std::to_string(g.c) + ", " + std::to_string(g.e) + "]");
            g.elements = true;
            shape = {g.a * (g.b + g.c), g.e};
            break;
        }
        case Gk::GptOssGateUpBias: {
            if (s0.shape.size() != 2 || src[1]->shape != s0.shape)
                refuse(*src[1], "gate and up expert biases of shapes " + dims(s0) + " and " + dims(*src[1]) +
                                    ", not two equal [experts, rows]");
            g.a = s0.shape[0], g.b = s0.shape[1];
            g.elements = true;
            shape = {g.a, 2 * g.b};
            break;
        }
        case Gk::GptOssDown: {
            if (s0.shape.size() != 3) refuse(s0, "shape " + dims(s0) + ", not [experts, d, F]");
            g.a = s0.shape[0], g.b = s0.shape[1], g.c = s0.shape[2];
            if (mx) {
                g.mxfp4 = true;
                shape = s0.shape;
            } else {
                g.elements = true;
                shape = {g.a, g.c, g.b};
            }
            break;
        }
    }
    g.f32 = !g.mxfp4 && (!same || (g.elements && s0.ggml_type));
    TensorRef out = s0;
    out.name = g.mxfp4 ? hf + "_blocks" : hf;
    out.shape = shape;
    out.strides.clear();
    out.n_elements = 1;
    for (uint64_t x : shape) out.n_elements = checked_mul(out.n_elements, x, "tensor elements");
    if (g.mxfp4) {
        // As wrap_mxfp4 presents a hub checkpoint: dtype MXFP4, n_bytes = the blocks, scales after them.
        if (shape.back() % 32) refuse(s0, "MXFP4 rows that are not whole blocks of 32");
        out.dtype = SrcDType::MXFP4;
        out.ggml_type = 0;
        out.n_bytes = out.n_elements / 2;
        out.aux_offset = int64_t(out.n_bytes);
    } else if (g.f32) {
        out.dtype = SrcDType::F32;  // dequantised before the rows or elements move (gather_bytes)
        out.ggml_type = 0;
        out.n_bytes = checked_mul(out.n_elements, 4, "tensor bytes");
    } else {
        out.n_bytes = checked_mul(out.n_elements, src_dtype_size(out.dtype), "tensor bytes");
    }
    out.span_bytes = out.n_bytes;
    g.out_rows = g.elements ? 0 : out.n_elements / shape.back();
    gathers->push_back(g);
    return out;
}

// The GGUF checkpoint under HF names: each tensor a view of one raw GGUF tensor and a fix.
class GgufCheckpoint final : public Checkpoint {
public:
    GgufCheckpoint(std::unique_ptr<Checkpoint> raw, std::vector<TensorRef> tensors, std::vector<Mapped> map,
                   std::vector<Gather> gathers, const ModelConfig &cfg)
        : raw_(std::move(raw)), tensors_(std::move(tensors)), map_(std::move(map)), gathers_(std::move(gathers)), cfg_(cfg) {}

    const char *format() const override { return raw_->format(); }
    const std::vector<TensorRef> &tensors() const override { return tensors_; }
    uint64_t file_bytes() const override { return raw_->file_bytes(); }
    std::vector<std::string> files() const override { return raw_->files(); }

    void release(const TensorRef &t) const override {
        const Mapped &m = map_[index(t)];
        if (m.fix != Fix::Gather) return raw_->release(raw_->tensors()[m.raw]);
        const Gather &g = gathers_[m.gather];
        for (uint32_t k = 0; k < gather_parts(g.kind); k++) raw_->release(raw_->tensors()[g.raw[k]]);
    }

    const uint8_t *tensor_bytes(const TensorRef &t, std::vector<uint8_t> &scratch) const override {
        const size_t i = index(t);
        const Mapped &m = map_[i];
        const TensorRef &out = tensors_[i];
        const TensorRef &src = raw_->tensors()[m.raw];
        if (m.fix == Fix::None) return raw_->tensor_bytes(src, scratch);
        if (m.fix == Fix::Gather) return gather_bytes(gathers_[m.gather], out, scratch);
        const uint8_t *in = raw_->tensor_bytes(src, scratch);  // mapped: scratch stays unused
        // Bytes per stored row (ggml blocks stay blocks: a GGUF row is a whole number of them).
        const uint64_t cols = src.shape.size() >= 2 ? src.shape.back() : 1;
        const uint64_t row_bytes = stored_bytes(src, cols);
        if (m.fix == Fix::Expert) return in + checked_mul(uint64_t(m.expert), stored_bytes(src, out.n_elements), "expert offset");
        if (m.fix == Fix::MinusOne) {
            scratch.resize(out.n_bytes);
            float *o = reinterpret_cast<float *>(scratch.data());
            convert_to_f32(src, in, 0, src.n_elements, o);
            for (uint64_t k = 0; k < src.n_elements; k++) o[k] -= 1.0f;
            return scratch.data();
        }
        if (m.fix == Fix::Transpose) {
            // GPT-2's [in, out] weights: element by element, so a quantised source goes to f32
            // first (the view then says plain F32: describe() clears its ggml_type).
            std::vector<uint8_t> deq;
            if (src.ggml_type) {
                deq.resize(size_t(checked_mul(src.n_elements, 4, "tensor bytes")));
                convert_to_f32(src, in, 0, src.n_elements, reinterpret_cast<float *>(deq.data()));
                in = deq.data();
            }
            const size_t es = src.ggml_type ? 4 : src_dtype_size(src.dtype);
            const uint64_t rows = src.shape[0];  // stored [out, in]
            scratch.resize(out.n_bytes);
            uint8_t *dst = scratch.data();
            for (uint64_t r = 0; r < rows; r++)
                for (uint64_t c = 0; c < cols; c++) std::memcpy(dst + (c * rows + r) * es, in + (r * cols + c) * es, es);
            return dst;
        }
        // Unpermute and Qkv move whole rows: their stored bytes, blocks or elements.
        const uint64_t rows = src.shape[0];
        scratch.resize(size_t(checked_mul(rows, row_bytes, "tensor bytes")));
        uint8_t *dst = scratch.data();
        for (uint64_t r = 0; r < rows; r++) std::memcpy(dst + r * row_bytes, in + source_row(m, r, rows) * row_bytes, row_bytes);
        return dst;
    }

private:
    // The whole HF tensor of a gather in `scratch` (one tensor's size: the bound every fix keeps).
    const uint8_t *gather_bytes(const Gather &g, const TensorRef &out, std::vector<uint8_t> &scratch) const {
        const uint32_t n = gather_parts(g.kind);
        const TensorRef *src[3] = {};
        const uint8_t *in[3] = {};
        std::vector<uint8_t> tmp[3];
        for (uint32_t k = 0; k < n; k++) src[k] = &raw_->tensors()[g.raw[k]], in[k] = raw_->tensor_bytes(*src[k], tmp[k]);
        const uint64_t cols = src[0]->shape.back();
        // Parts dequantised first (out says F32), else moved as stored (blocks or elements).
        std::vector<float> deq[3];
        if (g.f32)
            for (uint32_t k = 0; k < n; k++) {
                deq[k].resize(size_t(src[k]->n_elements));
                convert_to_f32(*src[k], in[k], 0, src[k]->n_elements, deq[k].data());
                in[k] = reinterpret_cast<const uint8_t *>(deq[k].data());
            }
        if (!g.elements) {
            const uint64_t row_bytes = g.f32 ? checked_mul(cols, 4, "row bytes") : stored_bytes(*src[0], cols);
            if (g.mxfp4) {
                // ggml blocks (17 bytes) -> transformers' blocks (16 bytes) then the scales, as
                // wrap_mxfp4 presents a hub checkpoint (aux_offset = the blocks' size).
                const uint64_t groups = cols / 32, blocks = checked_mul(checked_mul(g.out_rows, groups, "blocks"), 16, "bytes");
                scratch.resize(size_t(blocks + g.out_rows * groups));
                uint8_t *hb = scratch.data(), *hs = scratch.data() + blocks;
                for (uint64_t r = 0; r < g.out_rows; r++) {
                    const auto [p, q] = g.row(r);
                    const uint8_t *row = in[p] + q * row_bytes;
                    for (uint64_t x = 0; x < groups; x++)
                        mxfp4_ggml_to_hf(row + x * 17, hb + (r * groups + x) * 16, hs + r * groups + x);
                }
                return scratch.data();
            }
            scratch.resize(size_t(checked_mul(g.out_rows, row_bytes, "tensor bytes")));
            for (uint64_t r = 0; r < g.out_rows; r++) {
                const auto [p, q] = g.row(r);
                std::memcpy(scratch.data() + r * row_bytes, in[p] + q * row_bytes, row_bytes);
            }
            return scratch.data();
        }
        const size_t es = g.f32 ? 4 : src_dtype_size(src[0]->dtype);
        scratch.resize(size_t(checked_mul(out.n_elements, es, "tensor bytes")));
        for (uint64_t i = 0; i < out.n_elements; i++) {
            const auto [p, x] = g.element(i);
            std::memcpy(scratch.data() + i * es, in[p] + x * es, es);
        }
        return scratch.data();
    }

    size_t index(const TensorRef &t) const {
        if (&t >= tensors_.data() && &t < tensors_.data() + tensors_.size()) return size_t(&t - tensors_.data());
        const TensorRef *found = find(t.name);
        if (!found) throw_error(STK_E_INTERNAL, "GGUF checkpoint: no tensor '%s'", t.name.c_str());
        return size_t(found - tensors_.data());
    }

    // The stored row that holds HF row r.
    uint64_t source_row(const Mapped &m, uint64_t r, uint64_t rows) const {
        if (m.fix == Fix::Unpermute) {
            const uint64_t hd = rows / m.heads, half = hd / 2, h = r / hd, w = r % hd;
            return h * hd + 2 * (w % half) + w / half;
        }
        // Fix::Qkv: GGUF [Q; K; V] -> the fused layout config.json's family uses.
        const uint64_t hd = cfg_.head_dim, q = uint64_t(cfg_.n_heads) * hd, kv = uint64_t(cfg_.n_kv_heads) * hd;
        const uint64_t off[3] = {0, q, q + kv};
        switch (cfg_.qkv_layout) {
            case QkvLayout::PerHead: {
                uint64_t h = r / (3 * hd), p = (r / hd) % 3, j = r % hd;
                return off[p] + h * hd + j;
            }
            case QkvLayout::Grouped: {
                uint64_t qpk = cfg_.n_heads / cfg_.n_kv_heads, g = r / ((qpk + 2) * hd), slot = (r / hd) % (qpk + 2), j = r % hd;
                if (slot < qpk) return (g * qpk + slot) * hd + j;
                return off[slot - qpk + 1] + g * hd + j;
            }
            default: return r;
        }
    }

    std::unique_ptr<Checkpoint> raw_;
    std::vector<TensorRef> tensors_;
    std::vector<Mapped> map_;
    std::vector<Gather> gathers_;
    ModelConfig cfg_;
};

}  // namespace

GgufModel open_gguf_model(const std::string &path) {
    GgufModel out;
    GgufFile meta(path);
    const std::string arch = arch_of(meta, path);
    const ArchDef &A = *find_arch(arch, path).def;
    out.parsed = parse_model_config(gguf_config_json(meta, path), path + " (GGUF metadata)");
    const ModelConfig &cfg = out.parsed.config;
    const Table T = table_for(A, arch);

    std::unique_ptr<Checkpoint> raw = open_checkpoint(path);
    const std::vector<TensorRef> &rt = raw->tensors();
    std::vector<std::pair<TensorRef, Mapped>> mapped;
    struct Pending {
        Gk kind;
        uint64_t layer;
        int64_t raw[3] = {-1, -1, -1};
    };
    std::map<std::string, Pending> pending;  // HF name -> the parts of a gather seen so far
    auto refuse = [&](const TensorRef &t, const char *why) {
        throw_error(STK_E_UNSUPPORTED, "%s: GGUF tensor '%s' (offset %llu): %s", path.c_str(), printable(t.name).c_str(),
                    (unsigned long long)t.file_offset, why);
    };
    for (uint32_t i = 0; i < rt.size(); i++) {
        const TensorRef &t = rt[i];
        std::string stem, suffix;
        if (!split_suffix(t.name, &stem, &suffix)) refuse(t, "not a .weight or .bias tensor, so no HF tensor corresponds");
        std::string hf;
        const char *part = nullptr;  // the GGUF name inside its block (layer tensors)
        uint64_t layer = 0;
        bool stack = false;
        if (stem.compare(0, 4, "blk.") == 0) {
            size_t dot = stem.find('.', 4);
            if (dot == std::string::npos || dot == 4 || dot > 10) refuse(t, "a blk. name without a layer number");
            for (size_t k = 4; k < dot; k++)
                if (stem[k] < '0' || stem[k] > '9') refuse(t, "a blk. name without a layer number");
            layer = std::stoull(stem.substr(4, dot - 4));
            part = stem.c_str() + dot + 1;
            const std::string full = part + suffix;
            const GatherRule *gr = nullptr;
            for (const GatherRule &g : kGatherRules)
                if (g.names == A.names && full == g.gguf) gr = &g;
            if (gr) {
                Pending &p = pending.try_emplace(subst(gr->hf, layer, 0), Pending{gr->kind, layer}).first->second;
                if (p.raw[gr->part] >= 0) refuse(t, "a second GGUF tensor of that name");
                p.raw[gr->part] = i;
                continue;
            }
            for (size_t k = 0; k < T.n_layer && hf.empty(); k++)
                if (std::strcmp(part, T.layer[k].gguf) == 0) hf = subst(T.layer[k].hf, layer, 0);
            for (size_t k = 0; k < T.n_moe && hf.empty(); k++)
                if (std::strcmp(part, T.moe[k].gguf) == 0) {
                    hf = T.moe[k].hf;
                    stack = hf.find("{E}") != std::string::npos;
                    if (!stack) hf = subst(T.moe[k].hf, layer, 0);
                }
            if (A.names == Names::Falcon && std::strcmp(part, "attn_norm") == 0 && cfg.norms_per_layer == 2)
                hf = subst("transformer.h.{L}.ln_mlp", layer, 0);
        } else if (stem == "token_embd") hf = T.emb;
        else if (stem == "position_embd" && T.pos) hf = T.pos;
        else if (stem == "token_embd_norm" && T.emb_norm) hf = T.emb_norm;
        else if (stem == "output_norm") hf = T.final_norm;
        else if (stem == "output" && A.names == Names::Gpt2 && suffix == ".weight" && head_copies_embedding(meta))
            continue;  // the tied head, stored again by older converters: wte is the head
        else if (stem == "output") hf = T.head;
        else if (stem == "rope_freqs" || stem == "rope_factors_long" || stem == "rope_factors_short")
            continue;  // Llama 3 / Phi-3 RoPE factors: in the config
        if (hf.empty())
            refuse(t, format("no HF name for it in the %s mapping (docs/format.md, \"GGUF input\")", arch.c_str()).c_str());

        Mapped m;
        m.raw = i;
        TensorRef h = t;
        h.strides.clear();
        h.span_bytes = h.n_bytes;
        if (stack) {
            if (t.shape.size() != 3) refuse(t, "an expert stack that is not 3-D [experts, rows, cols]");
            m.fix = Fix::Expert;
            h.shape = {t.shape[1], t.shape[2]};
            h.n_elements = t.shape[1] * t.shape[2];
            h.n_bytes = h.span_bytes = h.n_elements * src_dtype_size(t.dtype);
            for (uint64_t e = 0; e < t.shape[0]; e++) {
                TensorRef x = h;
                x.name = with_suffix(subst(hf.c_str(), layer, e), suffix);
                x.file_offset = t.file_offset + e * stored_bytes(t, h.n_elements);
                m.expert = uint32_t(e);
                mapped.emplace_back(x, m);
            }
            continue;
        }
        h.name = with_suffix(hf, suffix);
        const bool weight = suffix == ".weight";
        if (A.permute_qk && part && weight && (std::strcmp(part, "attn_q") == 0 || std::strcmp(part, "attn_k") == 0)) {
            m.fix = Fix::Unpermute;
            m.heads = std::strcmp(part, "attn_q") == 0 ? cfg.n_heads : cfg.n_kv_heads;
            if (t.shape.empty() || m.heads == 0 || t.shape[0] % (2 * uint64_t(m.heads)))
                refuse(t, "Q/K rows are not a whole number of heads of even size");
        } else if (A.fused_qkv && part && std::strcmp(part, "attn_qkv") == 0) {
            m.fix = Fix::Qkv;
            uint64_t want = (uint64_t(cfg.n_heads) + 2 * uint64_t(cfg.n_kv_heads)) * cfg.head_dim;
            if (t.shape.empty() || t.shape[0] != want) refuse(t, "fused QKV rows do not match the heads the metadata gives");
        } else if (A.names == Names::Gpt2 && part && weight && t.shape.size() == 2 &&
                   (std::strcmp(part, "attn_qkv") == 0 || std::strcmp(part, "attn_output") == 0 ||
                    std::strcmp(part, "ffn_up") == 0 || std::strcmp(part, "ffn_down") == 0)) {
            m.fix = Fix::Transpose;
            h.ggml_type = 0;  // transposed in f32 (tensor_bytes)
            h.shape = {t.shape[1], t.shape[0]};
        } else if (part && std::strcmp(part, "ffn_gate_inp_shexp") == 0 && t.shape.size() == 1) {
            h.shape = {1, t.shape[0]};  // llama.cpp stores Qwen2-MoE's [1, d] shared-expert gate as [d]
        } else if (A.norm_plus_one && weight && ends_with(stem, "norm")) {
            m.fix = Fix::MinusOne;
            h.ggml_type = 0;
            h.dtype = SrcDType::F32;
            h.n_bytes = h.span_bytes = checked_mul(h.n_elements, 4, "tensor bytes");
        }
        mapped.emplace_back(h, m);
    }
    std::vector<Gather> gathers;
    for (const auto &[hf, p] : pending) {
        // Converters that kept attn_kv_b beside attn_k_b / attn_v_b: the whole tensor is read, the
        // split copies (derived data) are not.
        if (p.kind == Gk::DeepseekKvB &&
            std::any_of(mapped.begin(), mapped.end(), [&name = hf](const auto &x) { return x.first.name == name; }))
            continue;
        Mapped m;
        m.fix = Fix::Gather;
        m.gather = uint32_t(gathers.size());
        m.raw = uint32_t(p.raw[0] >= 0 ? p.raw[0] : p.raw[1] >= 0 ? p.raw[1] : p.raw[2]);
        mapped.emplace_back(build_gather(path, hf, p.kind, p.raw, rt, cfg, &gathers), m);
    }
    std::sort(mapped.begin(), mapped.end(), [](const auto &a, const auto &b) { return a.first.name < b.first.name; });
    std::vector<TensorRef> tensors;
    std::vector<Mapped> map;
    for (size_t k = 0; k < mapped.size(); k++) {
        if (k && mapped[k].first.name == mapped[k - 1].first.name)
            throw_error(STK_E_CORRUPT, "%s: two GGUF tensors map to '%s'", path.c_str(), mapped[k].first.name.c_str());
        tensors.push_back(std::move(mapped[k].first));
        map.push_back(mapped[k].second);
    }
    out.checkpoint =
        std::make_unique<GgufCheckpoint>(std::move(raw), std::move(tensors), std::move(map), std::move(gathers), cfg);
    return out;
}

}  // namespace stk
