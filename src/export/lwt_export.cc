// HF -> .lwt: see lwt_export.h.
#include "export/lwt_export.h"

#include <cinttypes>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "ingest/model.h"

namespace stk {

namespace {

struct Item {
    uint32_t source;
    std::string name;  // as written to the .lwt
    bool transpose;
};

// Seed 001's table order for GPT-2, with the stored names the hub uses (with or without the
// "transformer." prefix).
std::vector<std::string> gpt2_seed_order(uint32_t n_layers) {
    std::vector<std::string> v = {"wte.weight", "wpe.weight"};
    static const char *const kLayer[] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                         "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                         "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    for (uint32_t i = 0; i < n_layers; i++)
        for (const char *s : kLayer) v.push_back("h." + std::to_string(i) + "." + s);
    v.push_back("ln_f.weight");
    v.push_back("ln_f.bias");
    return v;
}

}  // namespace

std::vector<LwtTensorSpec> gpt2_lwt_layout(uint64_t L, uint64_t D, uint64_t V, uint64_t P, uint64_t F) {
    if (!F) F = 4 * D;
    std::vector<LwtTensorSpec> v;
    auto add = [&](std::string name, std::vector<uint64_t> shape) { v.push_back({std::move(name), LwtDType::F32, std::move(shape)}); };
    add("transformer.wte.weight", {V, D});
    add("transformer.wpe.weight", {P, D});
    for (uint64_t i = 0; i < L; i++) {
        std::string h = "transformer.h." + std::to_string(i) + ".";
        add(h + "ln_1.weight", {D});
        add(h + "ln_1.bias", {D});
        add(h + "attn.c_attn.weight", {3 * D, D});  // [out, in]: transposed from the hub's [D, 3D]
        add(h + "attn.c_attn.bias", {3 * D});
        add(h + "attn.c_proj.weight", {D, D});
        add(h + "attn.c_proj.bias", {D});
        add(h + "ln_2.weight", {D});
        add(h + "ln_2.bias", {D});
        add(h + "mlp.c_fc.weight", {F, D});
        add(h + "mlp.c_fc.bias", {F});
        add(h + "mlp.c_proj.weight", {D, F});
        add(h + "mlp.c_proj.bias", {D});
    }
    add("transformer.ln_f.weight", {D});
    add("transformer.ln_f.bias", {D});
    return v;
}

LwtExportResult export_lwt(const LwtExportOptions &opt) {
    if (opt.out.empty()) throw_error(STK_E_INVALID_ARGUMENT, "export: no output path");
    if (file_exists(opt.out))
        throw_error(STK_E_OUTPUT_EXISTS, "%s: already exists (export never replaces a file)", opt.out.c_str());
    std::unique_ptr<ModelDescription> d = describe_model(opt.in);
    const ModelPlan &p = d->plan;
    const ModelConfig &c = p.config;
    const std::vector<TensorRef> &refs = d->checkpoint->tensors();
    const bool gpt2 = c.family == Family::Gpt2;

    // Which source tensors are parameters (buffers and tied copies are not), and which are
    // stored [in, out].
    std::vector<uint8_t> is_param(refs.size(), 0), transpose(refs.size(), 0);
    std::vector<uint32_t> plan_order;
    for (uint32_t i = 0; i < p.n_tensors; i++) {
        const PlanTensor &t = p.tensors[i];
        if (t.buffer || t.tied) continue;
        if (!is_param[t.source]) plan_order.push_back(t.source);
        is_param[t.source] = 1;
        if (t.transpose) transpose[t.source] = 1;
    }

    std::vector<Item> items;
    std::vector<uint8_t> taken(refs.size(), 0);
    if (gpt2) {
        for (const std::string &n : gpt2_seed_order(c.n_layers)) {
            const TensorRef *r = d->checkpoint->find(n);
            if (!r) r = d->checkpoint->find("transformer." + n);
            if (!r)
                throw_error(STK_E_PARAM_COUNT, "%s: GPT-2 tensor '%s' (seed 001's 'transformer.%s') is missing", opt.in.c_str(),
                            n.c_str(), n.c_str());
            uint32_t s = uint32_t(r - refs.data());
            if (!is_param[s])
                throw_error(STK_E_PARAM_COUNT, "%s: GPT-2 tensor '%s' is not a parameter of the model", opt.in.c_str(), r->name.c_str());
            items.push_back({s, "transformer." + n, transpose[s] != 0});
            taken[s] = 1;
        }
    }
    for (uint32_t s : plan_order)  // other families: everything; GPT-2: an untied lm_head
        if (!taken[s]) items.push_back({s, refs[s].name, transpose[s] != 0});

    LwtHeader h;
    h.model_type = c.model_type;
    if (gpt2)
        h.config = {{"n_layer", c.n_layers}, {"n_head", c.n_heads}, {"n_embd", c.d_model}, {"vocab_size", c.vocab_size},
                    {"block_size", c.max_positions}};
    else
        h.config = {{"d_model", c.d_model},       {"n_layers", c.n_layers},   {"n_heads", c.n_heads},
                    {"n_kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},   {"vocab_size", c.vocab_size},
                    {"ffn_dim", c.ffn_dim},       {"max_positions", c.max_positions}, {"n_experts", c.n_experts},
                    {"top_k", c.top_k}};
    h.dtype = lwt_dtype_name(opt.dtype);
    bool head_stored = false;
    for (const Item &it : items)
        for (uint32_t i = 0; i < p.n_tensors; i++)
            if (p.tensors[i].source == it.source && p.tensors[i].role == Role::LM_HEAD && !p.tensors[i].tied &&
                !p.tensors[i].buffer)
                head_stored = true;
    h.tied_lm_head = c.tied_embeddings && !head_stored;

    std::vector<LwtTensorSpec> layout;
    if (gpt2) layout = gpt2_lwt_layout(c.n_layers, c.d_model, c.vocab_size, c.max_positions, c.ffn_dim);
    std::vector<LwtTensorSpec> specs;
    uint64_t max_elems = 0;
    for (const Item &it : items) {
        const TensorRef &r = refs[it.source];
        LwtTensorSpec s;
        s.name = it.name;
        s.shape = r.shape;
        if (it.transpose) {
            if (r.shape.size() != 2)
                throw_error(STK_E_PARAM_COUNT, "%s: tensor '%s' marked for transposition has rank %zu", r.file.c_str(), r.name.c_str(),
                            r.shape.size());
            s.shape = {r.shape[1], r.shape[0]};
        }
        if (specs.size() < layout.size() && (layout[specs.size()].name != s.name || layout[specs.size()].shape != s.shape))
            throw_error(STK_E_PARAM_COUNT, "%s: tensor '%s' would be stored with %zu dims, seed 001 expects '%s' from config.json",
                        r.file.c_str(), r.name.c_str(), s.shape.size(), layout[specs.size()].name.c_str());
        s.dtype = r.shape.size() >= 2 ? opt.dtype : LwtDType::F32;
        max_elems = r.n_elements > max_elems ? r.n_elements : max_elems;
        specs.push_back(std::move(s));
    }

    uint64_t params = 0;
    for (const Item &it : items) params += refs[it.source].n_elements;
    if (params != p.n_params)
        throw_error(STK_E_INTERNAL, "%s: would write %" PRIu64 " parameters, the checkpoint holds %" PRIu64, opt.in.c_str(), params,
                    p.n_params);

    LwtWriter w(opt.out, h, std::move(specs));
    std::vector<float> values, block;
    std::vector<uint8_t> packed, scratch;
    for (size_t i = 0; i < items.size(); i++) {
        const Item &it = items[i];
        const TensorRef &r = refs[it.source];
        const LwtTensor &lt = w.tensors()[i];
        const uint8_t *bytes = d->checkpoint->tensor_bytes(r, scratch);
        values.resize(size_t(r.n_elements));
        if (!it.transpose) {
            convert_to_f32(r, bytes, 0, r.n_elements, values.data());
        } else {
            // Stored [rows, cols] -> [cols, rows], kTransposeBlock stored rows at a time.
            const uint64_t rows = r.shape[0], cols = r.shape[1];
            block.resize(size_t(kTransposeBlock * cols));
            for (uint64_t r0 = 0; r0 < rows; r0 += kTransposeBlock) {
                uint64_t nr = rows - r0 < kTransposeBlock ? rows - r0 : kTransposeBlock;
                convert_to_f32(r, bytes, r0 * cols, nr * cols, block.data());
                for (uint64_t a = 0; a < nr; a++)
                    for (uint64_t b = 0; b < cols; b++) values[size_t(b * rows + r0 + a)] = block[size_t(a * cols + b)];
            }
        }
        uint64_t bad = first_nonfinite(values.data(), r.n_elements);
        if (bad != r.n_elements)
            throw_error(STK_E_NONFINITE, "%s: tensor '%s' element %" PRIu64 " is %g; .lwt export refuses NaN/Inf weights",
                        r.file.c_str(), r.name.c_str(), bad, double(values[size_t(bad)]));
        if (lt.dtype == LwtDType::F32) {  // already the stored bytes: no second buffer
            w.write_tensor(uint32_t(i), reinterpret_cast<const uint8_t *>(values.data()), lt.size_bytes, LwtQuant{});
        } else {
            packed.resize(size_t(lt.size_bytes));
            LwtQuant q = lwt_quantize_tensor(lt.name, lt.dtype, values.data(), lt.n_elements, nullptr, packed.data());
            w.write_tensor(uint32_t(i), packed.data(), packed.size(), q);
        }
        d->checkpoint->release(r);
    }
    w.commit();

    LwtExportResult res;
    res.model_type = c.model_type;
    res.source_format = p.format;
    res.checkpoint_bytes = p.checkpoint_bytes;
    res.tensors = items.size();
    res.parameters = params;
    res.file_bytes = w.file_size();
    res.data_crc32 = w.data_crc32();
    res.tied_lm_head = h.tied_lm_head;
    res.peak_tensor_bytes = max_elems * 4;
    return res;
}

}  // namespace stk
