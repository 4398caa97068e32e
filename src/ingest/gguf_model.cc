#include "ingest/gguf_model.h"
#include "ingest/model_files.h"

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
#include "ingest/gguf_family.h"
#include "ingest/mxfp4.h"
#include "ingest/source.h"

namespace stk {

// ---------------------------------------------------------------------------------------------
// Which file.

std::string gguf_model_file(const std::string &path) { return resolve_model_files(path).gguf; }

namespace {

bool ends_with(const std::string &s, const char *suffix) {
    size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace


// ---------------------------------------------------------------------------------------------
// Families: each family's GGUF part (FamilyDef::gguf, ingest/gguf_family.h) says what llama.cpp's
// converter did to its tensors and metadata; this file reads any of them.

namespace {

struct Found {
    const GgufFamily *gguf;
    const FamilyDef *family;
};

Found find_family(const std::string &arch, const std::string &path) {
    const FamilyDef &f = family_def(family_by_gguf_arch(arch));
    if (f.gguf) return {f.gguf, &f};
    std::vector<std::string> names;
    for (uint32_t i = 0; i < kFamilyCount; i++)
        for (const char *const *g = family_gguf_archs(*kFamilyDefs[i]); g && *g; g++)
            if (std::find(names.begin(), names.end(), *g) == names.end()) names.push_back(*g);
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

}  // namespace

void GgufJson::key(const char *k) { s += (s.size() > 1 ? ", \"" : "\"") + std::string(k) + "\": "; }
void GgufJson::u(const char *k, uint64_t v) {
    key(k);
    s += std::to_string(v);
}
void GgufJson::f(const char *k, double v) {
    key(k);
    s += format("%.17g", v);
}
void GgufJson::f(const char *k, const GgufValue &v) {
    key(k);
    s += gguf_f32_text(v);
}
void GgufJson::b(const char *k, bool v) {
    key(k);
    s += v ? "true" : "false";
}
void GgufJson::str(const char *k, const std::string &v) {
    key(k);
    s += '"';
    for (char c : v) {
        if (c == '"' || c == '\\') s += '\\';
        if (uint8_t(c) < 0x20) s += format("\\u%04x", c);
        else s += c;
    }
    s += '"';
}
void GgufJson::raw(const char *k, const std::string &v) {
    key(k);
    s += v;
}

std::string gguf_f32_text(const GgufValue &v) {
    char buf[64];
    auto r = v.type() == GgufType::F32 ? std::to_chars(buf, buf + sizeof buf, v.f32())
                                       : std::to_chars(buf, buf + sizeof buf, v.as_float());
    return std::string(buf, r.ptr);
}

const GgufValue *GgufMeta::get(const char *k) const {
    const GgufValue *v = f.find(key(k));
    if (v && v->type() == GgufType::ARRAY)
        throw_error(STK_E_UNSUPPORTED, "%s: %s is an array (a value per layer), which stk does not read", path.c_str(),
                    key(k).c_str());
    return v;
}

uint64_t GgufMeta::need_u(const char *k) const {
    const GgufValue *v = get(k);
    if (!v) throw_error(STK_E_CORRUPT, "%s: metadata key %s is missing", path.c_str(), key(k).c_str());
    return v->as_uint();
}

uint64_t GgufMeta::ffn_width_from_tensors() const {
    const GgufTensorInfo *up = tensor("blk.0.ffn_up.weight");
    if (!up || up->shape.size() != 2)
        throw_error(STK_E_CORRUPT, "%s: no 2-D blk.0.ffn_up.weight: the FFN width is unknown", path.c_str());
    return up->shape[0];
}

bool GgufMeta::tied_head() const {
    const GgufTensorInfo *out = tensor("output.weight"), *emb = tensor("token_embd.weight");
    if (!out) return true;
    if (!emb || out->type != emb->type || out->shape != emb->shape || out->n_bytes != emb->n_bytes) return false;
    return std::memcmp(f.tensor_data(*out), f.tensor_data(*emb), size_t(out->n_bytes)) == 0;
}

namespace {

// The f32 values of a 1-D metadata-like tensor (longrope's rope_factors_long / _short), as a JSON array.
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

}  // namespace

// rope_scaling from rope.scaling.* (the keys TextModel.set_gguf_parameters writes), "" when none.
// Longrope (the converter's generate_extra_tensors) has no type key: its long and short factors are
// the tensors rope_factors_long / rope_factors_short, read back into the config here (the tensor
// loop then skips them, as rope_freqs).
std::string gguf_rope_scaling_json(const GgufMeta &m, const GgufFamily &fam) {
    const GgufFile &f = m.f;
    const std::string &path = m.path;
    const GgufTensorInfo *lf = f.find_tensor("rope_factors_long.weight"), *sf = f.find_tensor("rope_factors_short.weight");
    if (lf || sf) {
        if (!lf || !sf)
            throw_error(STK_E_CORRUPT, "%s: GGUF tensor '%s' without '%s': longrope needs both", path.c_str(),
                        lf ? "rope_factors_long.weight" : "rope_factors_short.weight",
                        lf ? "rope_factors_short.weight" : "rope_factors_long.weight");
        std::string rs = "{\"rope_type\": \"longrope\", \"long_factor\": " + f32_tensor_json(f, *lf, path) +
                         ", \"short_factor\": " + f32_tensor_json(f, *sf, path);
        if (const GgufValue *v = m.get("rope.scaling.original_context_length"))
            rs += format(", \"original_max_position_embeddings\": %llu", (unsigned long long)v->as_uint());
        return rs + "}";
    }
    const GgufValue *type = m.get("rope.scaling.type");
    if (!type || type->str() == "none") return {};
    std::string rs = "{\"rope_type\": \"" + printable(type->str()) + "\"";
    if (const GgufValue *v = m.get("rope.scaling.factor")) rs += ", \"factor\": " + gguf_f32_text(*v);
    if (const GgufValue *v = m.get("rope.scaling.original_context_length"))
        rs += format(", \"original_max_position_embeddings\": %llu", (unsigned long long)v->as_uint());
    if (const GgufValue *v = m.get("rope.scaling.yarn_beta_fast")) rs += ", \"beta_fast\": " + gguf_f32_text(*v);
    if (const GgufValue *v = m.get("rope.scaling.yarn_beta_slow")) rs += ", \"beta_slow\": " + gguf_f32_text(*v);
    if (const GgufValue *v = m.get("rope.scaling.yarn_attn_factor")) rs += ", \"attention_factor\": " + gguf_f32_text(*v);
    if (fam.rope_scaling) fam.rope_scaling(m, rs);
    return rs + "}";
}

std::string gguf_config_json(const GgufFile &f, const std::string &path) {
    const std::string arch = arch_of(f, path);
    const Found found = find_family(arch, path);
    const GgufFamily &F = *found.gguf;
    GgufMeta m{f, path, arch};

    const GgufTensorInfo *emb = m.tensor("token_embd.weight");
    if (!emb || emb->shape.size() != 2)
        throw_error(STK_E_CORRUPT, "%s: no 2-D token_embd.weight: the vocabulary size is unknown", path.c_str());
    m.vocab = emb->shape[0];
    m.d = m.need_u("embedding_length"), m.layers = m.need_u("block_count"), m.heads = m.need_u("attention.head_count");
    m.kv = m.heads;
    if (const GgufValue *v = m.get("attention.head_count_kv")) m.kv = v->as_uint();
    if (F.kv_heads) F.kv_heads(m, &m.kv);
    m.experts = m.get("expert_count") ? m.get("expert_count")->as_uint() : 0;
    if (F.whole_config) return F.whole_config(m);

    GgufJson j;
    j.str("model_type", F.model_type ? F.model_type(m) : std::string(found.family->model_types[0]));
    j.u("vocab_size", m.vocab);
    j.u("hidden_size", m.d);
    j.u("num_hidden_layers", m.layers);
    j.u("num_attention_heads", m.heads);
    if (F.kv_key) j.u(F.kv_key, m.kv);
    if (const GgufValue *v = m.get("attention.key_length"); v && m.heads && v->as_uint() != m.d / m.heads)
        j.u("head_dim", v->as_uint());
    if (F.ffn_from_tensors) j.u(F.ffn_key, m.ffn_width_from_tensors());
    else if (const GgufValue *v = m.get("feed_forward_length")) j.u(F.ffn_key, v->as_uint());
    if (F.context_key)
        if (const GgufValue *v = m.get("context_length")) j.u(F.context_key, v->as_uint());
    if (const GgufValue *v = m.get("attention.layer_norm_rms_epsilon")) j.f("rms_norm_eps", *v);
    if (const GgufValue *v = m.get("attention.layer_norm_epsilon")) j.f("layer_norm_epsilon", *v);
    if (const GgufValue *v = m.get("rope.freq_base")) j.f("rope_theta", *v);
    if (const GgufValue *v = m.get("rope.dimension_count"); v && m.heads && F.rotary_pct) {
        const GgufValue *kl = m.get("attention.key_length");
        uint64_t hd = kl ? kl->as_uint() : m.d / m.heads;
        if (hd) j.f("rotary_pct", double(v->as_uint()) / double(hd));
    }
    if (std::string rs = gguf_rope_scaling_json(m, F); !rs.empty()) j.raw("rope_scaling", rs);
    if (m.experts > 0) {
        j.u(F.experts_key, m.experts);
        if (const GgufValue *v = m.get("expert_used_count")) j.u("num_experts_per_tok", v->as_uint());
        if (const GgufValue *v = m.get("expert_feed_forward_length")) j.u("moe_intermediate_size", v->as_uint());
        if (const GgufValue *v = m.get("expert_shared_feed_forward_length"))
            j.u("shared_expert_intermediate_size", v->as_uint());
        else if (const GgufTensorInfo *t = m.tensor("blk.0.ffn_up_shexp.weight"); t && t->shape.size() == 2)
            j.u("shared_expert_intermediate_size", t->shape[0]);
        // No key records it: what llama.cpp applies per architecture (the hub configs agree).
        if (const GgufValue *v = m.get("expert_weights_norm")) j.b("norm_topk_prob", v->boolean());
        else if (F.norm_topk_default >= 0) j.b("norm_topk_prob", F.norm_topk_default > 0);
    }
    if (F.config) F.config(m, j);
    // What only the tensors say.
    j.b("tie_word_embeddings", m.tied_head());
    return j.done();
}

// ---------------------------------------------------------------------------------------------
// Tensor names and layouts.

namespace {

// How an HF tensor's bytes come from its GGUF tensor.
enum class Fix : uint8_t {
    None,       // as stored
    Unpermute,  // Q/K rows: GGUF row h*hd + 2i + j holds HF row h*hd + j*hd/2 + i
    Qkv,        // fused [Q; K; V] rows back to the config's fused layout
    Transpose,  // Conv1D: stored [out, in], HF [in, out]
    MinusOne,   // norm weight: stored weight + 1 (as f32)
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

// One HF tensor a family's GgufGather puts together, as planned for this file.
struct Gather {
    const GgufGather *kind = nullptr;
    GgufGatherDims dims;
    bool mxfp4 = false;     // ggml MXFP4 rows re-laid as transformers' _blocks + _scales
    bool elements = false;  // gathered element by element (a transpose), else by stored rows
    bool f32 = false;       // parts dequantised to f32 first (a transpose of blocks, or parts of
                            // different types: quantised files mix them)
    uint32_t raw[3] = {};   // the GGUF tensors (raw checkpoint indices), in the kind's parts order
    uint64_t out_rows = 0;  // row gathers: rows of the result

    std::pair<uint32_t, uint64_t> row(uint64_t r) const { return kind->row ? kind->row(dims, r) : std::pair<uint32_t, uint64_t>{0, r}; }
    std::pair<uint32_t, uint64_t> element(uint64_t i) const { return kind->element(dims, i); }
};

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

bool in_list(const char *const *list, const char *s) {
    for (const char *const *p = list; p && *p; p++)
        if (std::strcmp(*p, s) == 0) return true;
    return false;
}

// The HF tensor a gather gives, its parts checked against each other and the config: every part
// present, one dtype / ggml type, the shapes the converter writes (the kind's plan).  Refusals
// name the file, the GGUF tensor and what is wrong.
TensorRef build_gather(const std::string &path, const std::string &hf, const GgufGather &G, const int64_t raw[3],
                       const std::vector<TensorRef> &rt, const ModelConfig &cfg, std::vector<Gather> *gathers) {
    const uint32_t n = G.n_parts;
    GgufGatherPlan P;
    P.n = n;
    P.cfg = &cfg;
    P.path = &path;
    P.hf = &hf;
    for (uint32_t k = 0; k < n; k++) {
        if (raw[k] < 0) {
            const TensorRef &have = rt[size_t(raw[0] >= 0 ? raw[0] : raw[1] >= 0 ? raw[1] : raw[2])];
            throw_error(STK_E_CORRUPT,
                        "%s: GGUF tensor '%s' (offset %llu): '%s' needs its %s from the same block too, and the file has none",
                        path.c_str(), printable(have.name).c_str(), (unsigned long long)have.file_offset, hf.c_str(),
                        G.parts[k]);
        }
        P.src[k] = &rt[size_t(raw[k])];
    }
    bool same = true;
    for (uint32_t k = 1; k < n; k++)
        same = same && P.src[k]->dtype == P.src[0]->dtype && P.src[k]->ggml_type == P.src[0]->ggml_type;
    Gather g;
    g.kind = &G;
    for (uint32_t k = 0; k < n; k++) g.raw[k] = uint32_t(raw[k]);
    const TensorRef &s0 = *P.src[0];
    P.mxfp4 = same && s0.ggml_type == kGgmlMxfp4 && G.mxfp4;
    for (uint32_t k = 0; k < n; k++)
        if (P.src[k]->ggml_type == kGgmlMxfp4 && !P.mxfp4)
            P.refuse(*P.src[k], "MXFP4 blocks, which stk reads only in the expert stacks the converter writes so "
                                "(both of a pair MXFP4)");
    G.plan(P);
    g.dims = P.dims;
    g.mxfp4 = P.mxfp4_rows;
    g.elements = P.elements;
    const std::vector<uint64_t> &shape = P.shape;
    g.f32 = !g.mxfp4 && (!same || (g.elements && s0.ggml_type));
    TensorRef out = s0;
    out.name = g.mxfp4 ? hf + "_blocks" : hf;
    out.shape = shape;
    out.strides.clear();
    out.n_elements = 1;
    for (uint64_t x : shape) out.n_elements = checked_mul(out.n_elements, x, "tensor elements");
    if (g.mxfp4) {
        // As wrap_mxfp4 presents a hub checkpoint: dtype MXFP4, n_bytes = the blocks, scales after them.
        if (shape.back() % 32) P.refuse(s0, "MXFP4 rows that are not whole blocks of 32");
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
        for (uint32_t k = 0; k < g.kind->n_parts; k++) raw_->release(raw_->tensors()[g.raw[k]]);
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
            // Conv1D's [in, out] weights: element by element, so a quantised source goes to f32
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
        const uint32_t n = g.kind->n_parts;
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

void GgufGatherPlan::refuse(const TensorRef &t, const std::string &why) const {
    throw_error(STK_E_UNSUPPORTED, "%s: GGUF tensor '%s' (offset %llu): %s (for '%s')", path->c_str(), printable(t.name).c_str(),
                (unsigned long long)t.file_offset, why.c_str(), hf->c_str());
}

std::string GgufGatherPlan::dims_of(const TensorRef &t) {
    std::string s = "[";
    for (size_t i = 0; i < t.shape.size(); i++) s += (i ? ", " : "") + std::to_string(t.shape[i]);
    return s + "]";
}

GgufModel open_gguf_model(const std::string &path) {
    GgufModel out;
    GgufFile meta(path);
    const std::string arch = arch_of(meta, path);
    const GgufFamily &F = *find_family(arch, path).gguf;
    out.parsed = parse_model_config(gguf_config_json(meta, path), path + " (GGUF metadata)");
    const ModelConfig &cfg = out.parsed.config;
    GgufMeta gm{meta, path, arch};

    std::unique_ptr<Checkpoint> raw = open_gguf_checkpoint(path);
    const std::vector<TensorRef> &rt = raw->tensors();
    std::vector<std::pair<TensorRef, Mapped>> mapped;
    struct Pending {
        const GgufGather *kind;
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
            const GgufGather *gk = nullptr;
            uint32_t gpart = 0;
            for (const GgufGather *const *g = F.gathers; g && *g && !gk; g++)
                for (uint32_t k = 0; k < (*g)->n_parts; k++)
                    if (full == (*g)->parts[k]) gk = *g, gpart = k;
            if (gk) {
                Pending &p = pending.try_emplace(subst(gk->hf, layer, 0), Pending{gk, layer}).first->second;
                if (p.raw[gpart] >= 0) refuse(t, "a second GGUF tensor of that name");
                p.raw[gpart] = i;
                continue;
            }
            for (size_t k = 0; k < F.layer.n && hf.empty(); k++)
                if (std::strcmp(part, F.layer.p[k].gguf) == 0) hf = subst(F.layer.p[k].hf, layer, 0);
            for (size_t k = 0; F.moe && k < F.moe->n && hf.empty(); k++)
                if (std::strcmp(part, F.moe->p[k].gguf) == 0) {
                    hf = F.moe->p[k].hf;
                    stack = hf.find("{E}") != std::string::npos;
                    if (!stack) hf = subst(F.moe->p[k].hf, layer, 0);
                }
            if (F.layer_rename)
                if (const char *h = F.layer_rename(cfg, part)) hf = subst(h, layer, 0);
        } else if (stem == "token_embd" && F.globals.emb) hf = F.globals.emb;
        else if (stem == "position_embd" && F.globals.pos) hf = F.globals.pos;
        else if (stem == "token_embd_norm" && F.globals.emb_norm) hf = F.globals.emb_norm;
        else if (stem == "output_norm" && F.globals.final_norm) hf = F.globals.final_norm;
        else if (stem == "output" && suffix == ".weight" && gm.tied_head())
            continue;  // the tied head, stored again as a copy (GgufMeta::tied_head): the embedding is the head
        else if (stem == "output" && F.globals.head) hf = F.globals.head;
        else if (stem == "rope_freqs" || stem == "rope_factors_long" || stem == "rope_factors_short")
            continue;  // llama.cpp's precomputed RoPE factors: in the config
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
        if (F.permute_qk && part && weight && (std::strcmp(part, "attn_q") == 0 || std::strcmp(part, "attn_k") == 0)) {
            m.fix = Fix::Unpermute;
            m.heads = std::strcmp(part, "attn_q") == 0 ? cfg.n_heads : cfg.n_kv_heads;
            if (t.shape.empty() || m.heads == 0 || t.shape[0] % (2 * uint64_t(m.heads)))
                refuse(t, "Q/K rows are not a whole number of heads of even size");
        } else if (F.fused_qkv && part && std::strcmp(part, "attn_qkv") == 0) {
            m.fix = Fix::Qkv;
            uint64_t want = (uint64_t(cfg.n_heads) + 2 * uint64_t(cfg.n_kv_heads)) * cfg.head_dim;
            if (t.shape.empty() || t.shape[0] != want) refuse(t, "fused QKV rows do not match the heads the metadata gives");
        } else if (part && weight && t.shape.size() == 2 && in_list(F.transposed, part)) {
            m.fix = Fix::Transpose;
            h.ggml_type = 0;  // transposed in f32 (tensor_bytes)
            h.shape = {t.shape[1], t.shape[0]};
        } else if (part && t.shape.size() == 1 && in_list(F.vector_rows, part)) {
            h.shape = {1, t.shape[0]};  // stored [d] for HF's [1, d]
        } else if (F.norm_plus_one && weight && ends_with(stem, "norm")) {
            m.fix = Fix::MinusOne;
            h.ggml_type = 0;
            h.dtype = SrcDType::F32;
            h.n_bytes = h.span_bytes = checked_mul(h.n_elements, 4, "tensor bytes");
        }
        mapped.emplace_back(h, m);
    }
    std::vector<Gather> gathers;
    for (const auto &[hf, p] : pending) {
        // Converters that kept the whole tensor beside its parts: the whole tensor is read, the
        // split copies (derived data) are not.
        if (p.kind->whole_wins &&
            std::any_of(mapped.begin(), mapped.end(), [&name = hf](const auto &x) { return x.first.name == name; }))
            continue;
        Mapped m;
        m.fix = Fix::Gather;
        m.gather = uint32_t(gathers.size());
        m.raw = uint32_t(p.raw[0] >= 0 ? p.raw[0] : p.raw[1] >= 0 ? p.raw[1] : p.raw[2]);
        mapped.emplace_back(build_gather(path, hf, *p.kind, p.raw, rt, cfg, &gathers), m);
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
