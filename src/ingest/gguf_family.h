// A family's GGUF part (issue 31): what llama.cpp's converter did to that family's tensors and
// metadata, as data and small hooks, defined in the family's own file (src/ingest/families/) and
// pointed to by its FamilyDef::gguf.  ingest/gguf_model.cc is the driver that reads any family's
// part, as config.cc is for config.json: it holds no family's name.
//
// A part cannot be declared without its tensor renames: GgufRenames has no default and is built
// from a non-empty array only, so `GgufFamily{.archs = ...}` alone does not compile
// (tests/test_gguf_model.cc checks that it stays so).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ingest/checkpoint.h"
#include "ingest/config.h"
#include "ingest/gguf.h"

namespace stk {

// One GGUF name and the HF name it came from.  Layer tensors: the name after "blk.N." and an HF
// pattern with {L} for the layer and {E} for the expert (a {E} name splits a [experts, rows, cols]
// stack into one HF tensor per expert).  The .weight / .bias suffix is kept, except that an HF
// name ending in '$' takes none (HF's own suffix-less names).
struct GgufRename {
    const char *gguf;
    const char *hf;
};

// A non-empty rename table.  No default constructor: a GGUF part must name its renames.
struct GgufRenames {
    const GgufRename *p;
    size_t n;
    template <size_t N>
    constexpr GgufRenames(const GgufRename (&a)[N]) : p(a), n(N) {}
};

// The whole-tensor names (nullptr: the family has none).
struct GgufGlobals {
    const char *emb;         // token_embd
    const char *pos;         // position_embd
    const char *emb_norm;    // token_embd_norm
    const char *final_norm;  // output_norm
    const char *head;        // output
};

// A gather: one HF tensor that the converter split into (or re-laid as) up to three GGUF tensors
// of one block.  The driver collects the parts by name, checks that each is present and that they
// agree in type, calls `plan` for the shapes, then moves rows or elements as `row` / `element` say.
struct GgufGatherDims {
    uint64_t a = 0, b = 0, c = 0, e = 0;  // the kind's dimensions (see each family's hooks)
};
struct GgufGatherPlan {
    const TensorRef *src[3] = {};  // the parts, in `parts` order
    uint32_t n = 0;
    const ModelConfig *cfg = nullptr;
    bool mxfp4 = false;  // every part is MXFP4 blocks (only where GgufGather::mxfp4 allows it)
    // Set by `plan`:
    GgufGatherDims dims;
    std::vector<uint64_t> shape;  // the HF tensor's
    bool elements = false;        // element by element (a transpose), else stored rows
    bool mxfp4_rows = false;      // MXFP4 rows re-laid as transformers' _blocks + _scales
    // Refusals, naming the file, the GGUF tensor and the HF tensor.
    const std::string *path = nullptr, *hf = nullptr;
    [[noreturn]] void refuse(const TensorRef &t, const std::string &why) const;
    static std::string dims_of(const TensorRef &t);
};
struct GgufGather {
    const char *hf;        // HF name with {L}
    const char *parts[3];  // GGUF names after "blk.N.", suffix included; "" past the last
    uint32_t n_parts;
    bool mxfp4;       // the parts may be MXFP4 blocks (both of a pair)
    bool whole_wins;  // a GGUF tensor renamed to `hf` itself (older converters) is read instead
    void (*plan)(GgufGatherPlan &g);
    std::pair<uint32_t, uint64_t> (*row)(const GgufGatherDims &d, uint64_t r);      // part, stored row
    std::pair<uint32_t, uint64_t> (*element)(const GgufGatherDims &d, uint64_t i);  // part, element
};

// config.json text built key by key.
struct GgufJson {
    std::string s = "{";
    void key(const char *k);
    void u(const char *k, uint64_t v);
    void f(const char *k, double v);
    // A metadata float: an f32 as the shortest decimal that reads back to it (the converter wrote
    // config.json's 1e-05 as the f32 nearest it; this gives 1e-05 back, not 9.99999975e-06).
    void f(const char *k, const GgufValue &v);
    void b(const char *k, bool v);
    void str(const char *k, const std::string &v);
    void raw(const char *k, const std::string &v);
    std::string done() const { return s + "}"; }
};
// An f32 metadata value as the shortest decimal that reads back to it.
std::string gguf_f32_text(const GgufValue &v);

// What a family's hooks read: the file, its architecture and the values every family has.
struct GgufMeta {
    const GgufFile &f;
    const std::string &path;
    const std::string &arch;  // general.architecture
    uint64_t d = 0, layers = 0, heads = 0, kv = 0, vocab = 0, experts = 0;

    std::string key(const char *k) const { return arch + "." + k; }
    // {arch}.k as a scalar (nullptr when absent; an array is refused).
    const GgufValue *get(const char *k) const;
    uint64_t need_u(const char *k) const;  // present, or STK_E_CORRUPT naming the key
    const GgufTensorInfo *tensor(const char *name) const { return f.find_tensor(name); }
    // The FFN width as the tensors give it: the rows of blk.0.ffn_up.weight.
    uint64_t ffn_width_from_tensors() const;
    // No output.weight, or output.weight the same type, shape and bytes as token_embd.weight:
    // converters store a tied head again as a copy (llama.cpp's BLOOM today, GPT-2 before mid-2025,
    // MPT's first script), and a head equal to the embedding bit for bit is the tied head in every
    // family (the same logits), so the copy is read as the tie, never as a second matrix.
    bool tied_head() const;
};

// One family's GGUF part.  Members past `globals` have defaults; set what differs (designated
// initializers, in this order).
struct GgufFamily {
    const char *const *archs;  // general.architecture values, null-terminated, at least one
    GgufRenames layer;         // blk.N tensors
    GgufGlobals globals;
    const GgufRenames *moe = nullptr;                 // expert stacks and routers, tried after `layer`
    const GgufGather *const *gathers = nullptr;       // null-terminated
    const char *const *transposed = nullptr;          // layer weights stored [out, in], HF [in, out] (Conv1D)
    const char *const *vector_rows = nullptr;         // layer weights stored [d] for HF's [1, d]
    bool permute_qk = false;                          // Q/K rows permuted per head (LlamaModel.permute)
    bool norm_plus_one = false;                       // "*norm.weight" stored as weight + 1
    bool fused_qkv = false;                           // attn_qkv stored [Q; K; V]: the config's layout back
    // config.json
    const char *kv_key = "num_key_value_heads";       // nullptr: written by `config` or not at all
    const char *ffn_key = "intermediate_size";        // the FFN width's key
    const char *context_key = "max_position_embeddings";  // context_length's key (nullptr: none)
    bool ffn_from_tensors = false;                    // feed_forward_length is not the model's: ffn_up's rows
    bool rotary_pct = false;                          // rope.dimension_count / head size as rotary_pct
    const char *experts_key = "num_experts";          // expert_count's key
    int8_t norm_topk_default = -1;                    // no expert_weights_norm key: 0 / 1 as llama.cpp runs it
    // Hooks (optional), in the order the driver calls them.
    void (*kv_heads)(const GgufMeta &m, uint64_t *kv) = nullptr;  // where head_count_kv is not the model's
    std::string (*whole_config)(const GgufMeta &m) = nullptr;     // its own spellings: the generic keys unused
    std::string (*model_type)(const GgufMeta &m) = nullptr;       // default: the family's first model_type
    void (*config)(const GgufMeta &m, GgufJson &j) = nullptr;     // the family's keys after the generic ones
    void (*rope_scaling)(const GgufMeta &m, std::string &rs) = nullptr;  // keys added to rope_scaling
    // The HF pattern for a layer tensor where the table's depends on the config (nullptr: the table's).
    const char *(*layer_rename)(const ModelConfig &c, const char *part) = nullptr;
};

// The whole rope_scaling object from rope.scaling.* (and longrope's factor tensors), with the
// family's additions; "" when none.  For families that write their own config (whole_config).
std::string gguf_rope_scaling_json(const GgufMeta &m, const GgufFamily &fam);

// The renames every Llama-named family shares (families/common.cc).
extern const GgufRenames kGgufLlamaLayer;
extern const GgufRenames kGgufMixtralMoe;
extern const GgufRenames kGgufQwen2MoeMoe;
extern const GgufRenames kGgufGemma3Layer;
extern const GgufGlobals kGgufLlamaGlobals;  // model.embed_tokens, model.norm, lm_head
// attention_bias / mlp_bias from the tensors (attn_q.bias, ffn_up.bias), as LlamaConfig spells them.
void gguf_llama_bias_keys(const GgufMeta &m, GgufJson &j);

}  // namespace stk
