// The C entry points that describe things without converting them: what a path is, dtype names,
// model descriptions (ingest/model.h), the family table (ingest/family.h), a generation's
// manifest (format/manifest.h) and one array file (format/array.h).  What `stk inspect` and
// `stk --list-models` print.
#include <strings.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/abi.h"
#include "core/bytes.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "format/array.h"
#include "format/lowbit.h"
#include "format/lwt.h"
#include "format/manifest.h"
#include "ingest/config.h"
#include "ingest/family.h"
#include "ingest/gguf.h"
#include "ingest/gguf_model.h"
#include "ingest/model.h"
#include "ingest/roles.h"
#include "publish/generations.h"
#include "stk/stk.h"

using namespace stk;

struct stk_model {
    std::unique_ptr<ModelDescription> d;
    std::vector<std::vector<uint64_t>> shapes;  // per plan tensor: the logical shape shown
};

namespace {

// The first n bytes of a regular file equal magic (false for anything unreadable).
bool starts_with(const std::string &path, const void *magic, size_t n) {
    if (!file_exists(path)) return false;
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    unsigned char b[8] = {};
    const bool ok = std::fread(b, 1, n, f) == n && std::memcmp(b, magic, n) == 0;
    std::fclose(f);
    return ok;
}

bool ends_with(const std::string &s, const char *tail) {
    const size_t n = std::strlen(tail);
    return s.size() > n && s.compare(s.size() - n, n, tail) == 0;
}

// The roles a family's preset maps, fused roles shown as their parts; sorted, NULL-terminated.
// Built once per family (the table is static).
struct FamilyRoles {
    std::vector<std::string> names;
    std::vector<const char *> list;
};

const char *const *family_roles(uint32_t family) {
    static std::mutex mu;
    static std::vector<std::unique_ptr<FamilyRoles>> cache(kFamilyCount);
    std::lock_guard<std::mutex> lock(mu);
    if (!cache[family]) {
        ModelConfig cfg;
        cfg.family = FamilyId(family);
        std::set<std::string> roles;
        for (const RoleRule &r : preset_rules(cfg)) {
            if (r.role == Role::BUFFER || r.role == Role::NONE) continue;
            if (r.role == Role::QKV) {
                roles.insert("Q"), roles.insert("K"), roles.insert("V");
            } else if (r.role == Role::FFN_W13) {
                roles.insert("FFN_W1"), roles.insert("FFN_W3");
            } else if (r.role == Role::QKV_B) {
                roles.insert("Q_B"), roles.insert("K_B"), roles.insert("V_B");
            } else {
                roles.insert(role_name(r.role));
            }
        }
        auto fr = std::make_unique<FamilyRoles>();
        fr->names.assign(roles.begin(), roles.end());
        for (const std::string &n : fr->names) fr->list.push_back(n.c_str());
        fr->list.push_back(nullptr);
        cache[family] = std::move(fr);
    }
    return cache[family]->list.data();
}

}  // namespace

extern "C" {

STK_API stk_status stk_path_kind_of(const char *path, uint32_t *out_kind) {
    return guard([&] {
        if (!path || !out_kind) throw_error(STK_E_INVALID_ARGUMENT, "stk_path_kind_of: NULL argument");
        const std::string p = path;
        uint32_t kind = STK_PATH_OTHER;
        // A root and a GGUF are what stk_root_probe and stk_model_gguf_path say they are (one test
        // each); only a regular file asks gguf_model_file, so a directory of models is no error.
        if (file_exists(p + "/" + kManifestFileName)) kind = STK_PATH_GENERATION;
        else if (is_generations_root(p)) kind = STK_PATH_ROOT;
        // A regular file named *.lwt is one even with a wrong magic (its reader refuses it then).
        else if ((ends_with(p, ".lwt") && file_exists(p)) || starts_with(p, kLwtMagic, sizeof kLwtMagic)) kind = STK_PATH_LWT;
        else if (unsigned char m[4]; store_le<uint32_t>(m, kArrayMagic), starts_with(p, m, 4)) kind = STK_PATH_ARRAY;
        else if (file_exists(p) && !gguf_model_file(p).empty()) kind = STK_PATH_GGUF;
        *out_kind = kind;
    });
}

STK_API const char *stk_lwt_dtype_name(uint32_t lwt_dtype) {
    return lwt_dtype_valid(lwt_dtype) ? lwt_dtype_name(LwtDType(lwt_dtype)) : nullptr;
}

STK_API int stk_lwt_dtype_is_float(uint32_t lwt_dtype) {
    return lwt_dtype_valid(lwt_dtype) && lwt_dtype_is_float(LwtDType(lwt_dtype)) ? 1 : 0;
}

STK_API uint32_t stk_crc32c(uint32_t crc, const void *data, size_t len) {
    return len ? crc32c(data, len, crc) : crc;  // NULL data with len 0: the CRC so far
}

STK_API stk_status stk_lwt_dtype_parse(const char *name, uint32_t *out_lwt_dtype) {
    return guard([&] {
        if (!name || !out_lwt_dtype) throw_error(STK_E_INVALID_ARGUMENT, "stk_lwt_dtype_parse: NULL argument");
        std::string lower = name;
        for (char &c : lower) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        LwtDType dt;
        if (!parse_lwt_dtype(lower, &dt)) throw_error(STK_E_INVALID_ARGUMENT, "'%s' is not an .lwt dtype name", name);
        *out_lwt_dtype = uint32_t(dt);
    });
}

// ---- models

STK_API stk_status stk_model_open(const char *path, stk_model **out_model) {
    return guard([&] {
        if (!path || !out_model) throw_error(STK_E_INVALID_ARGUMENT, "stk_model_open: NULL argument");
        *out_model = nullptr;
        auto m = std::make_unique<stk_model>();
        m->d = describe_model(path);
        const ModelPlan &p = m->d->plan;
        const auto &refs = m->d->checkpoint->tensors();
        for (uint32_t i = 0; i < p.n_tensors; i++) {
            const PlanTensor &t = p.tensors[i];
            m->shapes.push_back(t.streamed || t.composed ? std::vector<uint64_t>(t.dims, t.dims + t.rank)
                                                         : refs[t.source].shape);
        }
        *out_model = m.release();
    });
}

STK_API void stk_model_close(stk_model *model) { delete model; }

STK_API stk_status stk_model_get_info(const stk_model *model, stk_model_info *out) {
    return guard([&] {
        if (!model || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_model_get_info: NULL argument");
        abi_check_out(out);
        const ModelPlan &p = model->d->plan;
        const ModelConfig &c = p.config;
        stk_model_info v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.model_type = c.model_type;
        v.family = family_name(c.family);
        v.format = p.format;
        v.checkpoint_bytes = p.checkpoint_bytes;
        v.n_layers = c.n_layers;
        v.d_model = c.d_model;
        v.n_heads = c.n_heads;
        v.n_kv_heads = c.n_kv_heads;
        v.head_dim = c.head_dim;
        v.rotary_dim = c.rotary_dim;
        v.vocab_size = c.vocab_size;
        v.ffn_dim = c.ffn_dim;
        v.ffn_kind = ffn_kind_name(c.ffn_kind);
        v.activation = c.activation;
        v.norm = norm_kind_name(c.norm);
        v.norm_eps = c.norm_eps;
        v.positions = pos_kind_name(c.positions);
        v.rope = c.positions == PosKind::Rope ? 1 : 0;
        v.tied_embeddings = c.tied_embeddings ? 1 : 0;
        v.rope_theta = c.positions == PosKind::Rope ? c.rope_theta : 0.0;
        v.rope_scaling = c.rope_scaling_type;
        v.rope_scaling_factor = c.rope_scaling_factor;
        v.max_positions = c.max_positions;
        v.n_experts = c.n_experts;
        v.top_k = c.top_k;
        v.moe_ffn_dim = c.moe_ffn_dim;
        v.shared_expert_ffn_dim = c.shared_expert_ffn_dim;
        v.router = c.router;
        v.parallel_attn = c.parallel_attn ? 1 : 0;
        v.n_tensors = p.n_tensors;
        v.qkv_layout = qkv_layout_name(c.qkv_layout);
        v.n_params = p.n_params;
        v.n_params_expected = p.n_params_expected;
        v.n_source_tensors = p.n_source_tensors;
        v.n_buffers = p.n_buffers;
        v.n_unmapped = p.n_unmapped;
        v.max_layer_f32_bytes = p.max_unit_f32_bytes;
        abi_write(out, v);
    });
}

STK_API stk_status stk_model_tensor_at(const stk_model *model, uint32_t index, stk_model_tensor *out) {
    return guard([&] {
        if (!model || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_model_tensor_at: NULL argument");
        abi_check_out(out);
        const ModelPlan &p = model->d->plan;
        if (index >= p.n_tensors)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_model_tensor_at: tensor index %u, the model has %u", index, p.n_tensors);
        const PlanTensor &t = p.tensors[index];
        const TensorRef &r = model->d->checkpoint->tensors()[t.source];
        stk_model_tensor v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.name = t.name;
        v.role = t.role == Role::NONE ? nullptr : role_name(t.role);
        v.norm_slot = t.slot == NormSlot::None ? nullptr : norm_slot_name(t.slot);
        v.fused = t.layout == QkvLayout::Separate ? nullptr : qkv_layout_name(t.layout);
        v.read_as = src_dtype_name(r.dtype);
        // A block-quantised tensor (GGUF Q4_K, ...): dtype is the stored ggml type, read_as F32.
        v.dtype = r.ggml_type ? ggml_type_info(r.ggml_type) ? ggml_type_info(r.ggml_type)->name : "?" : v.read_as;
        v.layer = t.layer >= 0 ? t.layer : STK_NO_LAYER;
        v.expert = t.expert >= 0 || t.expert == kSharedExpert ? t.expert : STK_NO_EXPERT;
        v.rank = uint32_t(model->shapes[index].size());
        v.shape = model->shapes[index].data();
        v.source_rank = uint32_t(r.shape.size());
        v.source_shape = r.shape.data();
        v.parameter = t.buffer || t.tied ? 0 : 1;
        v.buffer = t.buffer ? 1 : 0;
        v.transposed = t.transpose ? 1 : 0;
        v.tied = t.tied ? 1 : 0;
        v.composed = t.composed ? 1 : 0;
        abi_write(out, v);
    });
}

// ---- the family table (index 0 here is kFamilyDefs[1]: "custom" has no preset)

STK_API uint32_t stk_family_count(void) { return kFamilyCount - 1; }

STK_API stk_status stk_family_at(uint32_t index, stk_family_info *out) {
    return guard([&] {
        if (!out) throw_error(STK_E_INVALID_ARGUMENT, "stk_family_at: NULL argument");
        abi_check_out(out);
        if (index >= kFamilyCount - 1)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_family_at: family index %u, there are %u", index, kFamilyCount - 1);
        const FamilyDef &f = *kFamilyDefs[index + 1];
        stk_family_info v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.name = f.name;
        v.model_types = f.model_types;
        v.architectures = f.architectures;
        v.gguf_architectures = family_gguf_archs(f);
        v.summary = f.summary;
        v.fixture = f.fixture;
        v.roles = family_roles(index + 1);
        abi_write(out, v);
    });
}

// ---- one array file

STK_API stk_status stk_array_file_verify(const char *path, stk_array_file_info *out) {
    return guard([&] {
        if (!path || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_array_file_verify: NULL argument");
        abi_check_out(out);
        ArrayReader r(path, true);
        const ArrayHeader &h = r.header();
        stk_array_file_info v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.dtype = h.dtype;
        v.rank = h.rank;
        for (uint32_t i = 0; i < kMaxRank; i++) v.dims[i] = h.dims[i];
        v.byte_len = h.byte_len;
        v.header_bytes = kArrayHeaderSize;
        v.crc32c = h.crc32c;
        v.flags = h.flags;
        v.sha256_low64 = h.sha256_low64;
        abi_write(out, v);
    });
}

}  // extern "C"
