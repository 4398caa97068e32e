// HF -> .lwt: see lwt_export.h.
#include "export/lwt_export.h"

#include <algorithm>
#include <cinttypes>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/parallel.h"
#include "ingest/family.h"
#include "ingest/model.h"
#include "format/lowbit_kernels.h"

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
    static const char *const kLayer[] = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                                         "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                                         "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    for (uint32_t i = 0; i < n_layers; i++)
        for (const char *s : kLayer) v.push_back("h." + std::to_string(i) + "." + s);
    v.push_back("ln_f.weight");
    v.push_back("ln_f.bias");
    return v;
}

// A tensor of at most this many source bytes stays mapped from the statistics pass into the
// packing pass (Llama-2-7B: every tensor but the two 262 MB embeddings); larger ones are
// released every kReleaseBytes in both.  Peak RSS: this plus a few chunks.
constexpr uint64_t kKeepMappedBytes = 128ull << 20;

// A tensor's values a chunk at a time, converted from the source dtype: in stored (.lwt) order
// (Conv1D weights transposed from the source's [rows, cols] to [cols, rows]) or in source order
// (for what does not depend on the order).  A contiguous, aligned f32 source is not copied: the
// chunk points into the mapping.  Source pages already read are released every kReleaseBytes,
// so the mapping's resident part stays small.
class TensorChunks {
public:
    TensorChunks(const Checkpoint &ck, const TensorRef &r, const uint8_t *bytes, bool transpose, uint64_t chunk)
        : ck_(ck), r_(r), bytes_(bytes), transpose_(transpose) {
        const uint64_t n8 = (r.n_elements + 7) / 8 * 8;
        if (!transpose) {
            chunk_ = std::min(chunk, n8);
        } else {
            rows_ = r.shape[0], cols_ = r.shape[1];
            // Whole output rows (of `rows_` values), a multiple of 8 of them: chunks end on a byte.
            uint64_t kb = std::max<uint64_t>(8, chunk / std::max<uint64_t>(rows_, 1) / 8 * 8);
            chunk_ = std::min<uint64_t>(kb, (cols_ + 7) / 8 * 8) * rows_;
        }
        if (!chunk_) chunk_ = 8;
        source_chunk_ = std::min(chunk, n8);
        if (!source_chunk_) source_chunk_ = 8;
        elem_bytes_ = r.n_elements ? r.n_bytes / r.n_elements : 0;
        contiguous_ = r.strides.empty() && elem_bytes_ > 0;
        zero_copy_ =
            contiguous_ && r.dtype == SrcDType::F32 && !r.ggml_type && reinterpret_cast<uintptr_t>(bytes) % alignof(float) == 0;
    }
    // Elements per chunk (a multiple of 8 but for the last), stored and source order.
    uint64_t chunk_elements() const { return chunk_; }
    uint64_t source_chunk_elements() const { return source_chunk_; }
    // The largest buffer read() and read_source() need (elements).
    uint64_t buffer_elements() const { return std::max(chunk_, source_chunk_); }

    // Values [first, first + k) in stored order, k = min(chunk, n - first): in buf, or in the
    // mapping.  Returns where they are.
    const float *read(uint64_t first, uint64_t *k_out, float *buf, std::vector<float> &tile) {
        if (!transpose_) return read_source(first, k_out, buf);
        const uint64_t k = std::min(chunk_, r_.n_elements - first);
        *k_out = k;
        // Output rows [b0, b0 + nb): tiles of kTransposeBlock source rows, each converted as nb
        // contiguous values, then written column-wise into buf.
        const uint64_t b0 = first / rows_, nb = k / rows_;
        if (zero_copy_) {  // f32 in the mapping: transpose straight from it
            kernels::lwt_transpose_f32(reinterpret_cast<const float *>(bytes_) + b0, cols_, rows_, nb, buf, rows_);
            return buf;
        }
        tile.resize(size_t(kTransposeBlock * nb));
        for (uint64_t a0 = 0; a0 < rows_; a0 += kTransposeBlock) {
            const uint64_t na = std::min<uint64_t>(kTransposeBlock, rows_ - a0);
            for (uint64_t a = 0; a < na; a++) convert_to_f32(r_, bytes_, (a0 + a) * cols_ + b0, nb, tile.data() + a * nb);
            kernels::lwt_transpose_f32(tile.data(), nb, na, nb, buf + a0, rows_);
        }
        return buf;
    }

    // The same in the source's own element order (source_chunk_elements at a time).  read and
    // read_source change nothing in the object (workers call them at once on different chunks);
    // the caller releases what it has done with through done_through.
    const float *read_source(uint64_t first, uint64_t *k_out, float *buf) {
        const uint64_t k = std::min(source_chunk_, r_.n_elements - first);
        *k_out = k;
        const float *at = buf;
        if (zero_copy_) at = reinterpret_cast<const float *>(bytes_) + first;
        else convert_to_f32(r_, bytes_, first, k, buf);
        return at;
    }

    // Set while the statistics pass reads: a tensor of at most kKeepMappedBytes then stays
    // mapped (see release_through); the caller releases the whole tensor after the second pass.
    void set_first_pass(bool on) { first_pass_ = on; }

    // A contiguous bf16 source as it lies in the mapping (statistics and packing straight from
    // the bits), or nullptr.
    const uint8_t *bf16_source() const { return contiguous_ && r_.dtype == SrcDType::BF16 ? bytes_ : nullptr; }
    // Source-order elements [0, end_element) are done with (a no-op for a strided source).
    void done_through(uint64_t end_element) {
        if (contiguous_) release_through(end_element * elem_bytes_);
    }

private:
    static constexpr uint64_t kReleaseBytes = 16u << 20;
    // Tell the checkpoint the bytes [released_, end) of a contiguous tensor are done with (a hint:
    // they are read back from the page cache if touched again).
    void release_through(uint64_t end) {
        if (first_pass_ && r_.n_bytes <= kKeepMappedBytes) {
            released_ = 0;  // stays mapped for the second pass: its pages are not faulted in twice
            return;
        }
        if (end - released_ < kReleaseBytes && end < r_.n_bytes) return;
        TensorRef part = r_;
        part.file_offset = r_.file_offset + released_;
        part.n_bytes = part.span_bytes = end - released_;
        ck_.release(part);
        released_ = end >= r_.n_bytes ? 0 : end;  // a pass that ends starts the next from 0
    }
    const Checkpoint &ck_;
    const TensorRef &r_;
    const uint8_t *bytes_;
    bool transpose_;
    uint64_t rows_ = 0, cols_ = 0, chunk_ = 0, source_chunk_ = 0, elem_bytes_ = 0, released_ = 0;
    bool contiguous_ = false, zero_copy_ = false, first_pass_ = false;
};

// Values per lwt_stats_add_bf16 call in the statistics pass (8 MB of source).
constexpr uint64_t kBf16StatsPiece = 1u << 22;

// With more than one thread, a worker's piece of the packing pass is this many chunks (a
// worker's packed output, up to 16 MiB for float32 at the default chunk, waits for the caller).
constexpr uint64_t kPieceChunks = 16;

// Bytes a worker hands to the writer: in its packed buffer, or in the mapping.
struct Part {
    const uint8_t *data;
    uint64_t len;
};

// What one worker owns: its piece of the round, its buffers, its statistics and results.
struct WorkerScratch {
    uint64_t first = 0, count = 0;
    std::vector<float> values, tile;
    std::vector<uint8_t> packed;
    std::vector<Part> parts;
    LwtQuantStats stats;
    bool nonfinite = false;
    // A block-scaled chunk with a scale beyond f16: where it was packed and its first element (the
    // caller refuses it, naming the block).
    const uint8_t *bad_blocks = nullptr;
    uint64_t bad_count = 0, bad_first = 0;
};

}  // namespace

std::vector<LwtTensorSpec> gpt2_lwt_layout(uint64_t L, uint64_t D, uint64_t V, uint64_t P, uint64_t F) {
    if (!F) F = 4 * D;
    std::vector<LwtTensorSpec> v;
    auto add = [&](std::string name, std::vector<uint64_t> shape) {
        v.push_back({std::move(name), LwtDType::F32, std::move(shape)});
    };
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

namespace {

// Phase 1 of export_lwt: the tensors to write, in file order (GPT-2: seed 001's order under
// its names), each with whether it is stored [in, out].
std::vector<Item> export_items(const ModelDescription &desc, const LwtExportOptions &opt, bool gpt2) {
    const ModelDescription *d = &desc;
    const ModelPlan &p = d->plan;
    const ModelConfig &c = p.config;
    const std::vector<TensorRef> &refs = d->checkpoint->tensors();
    // Which source tensors are parameters (buffers and tied copies are not), and which are
    // stored [in, out].
    std::vector<uint8_t> is_param(refs.size(), 0), transpose(refs.size(), 0);
    std::vector<uint32_t> plan_order;
    for (uint32_t i = 0; i < p.n_tensors; i++) {
        const PlanTensor &t = p.tensors[i];
        if (t.buffer || t.tied) continue;
        if (!is_param[t.source]) plan_order.push_back(t.source);
        is_param[t.source] = 1;
        // Only GPT-2's seed layout stores [out, in]; every other family keeps the checkpoint's
        // layout (docs/format.md, "What stk export stores"): gpt-oss's 3-D [E, in, out] experts
        // are written as transformers stores them, not transposed.
        if (t.transpose && gpt2) transpose[t.source] = 1;
    }

    std::vector<Item> items;
    std::vector<uint8_t> taken(refs.size(), 0);
    if (gpt2) {
        for (const std::string &n : gpt2_seed_order(c.n_layers)) {
            const TensorRef *r = d->checkpoint->find(n);
            if (!r) r = d->checkpoint->find("transformer." + n);
            if (!r)
                throw_error(STK_E_PARAM_COUNT, "%s: GPT-2 tensor '%s' (stored as 'transformer.%s' in the .lwt) is missing",
                            opt.in.c_str(), n.c_str(), n.c_str());
            uint32_t s = uint32_t(r - refs.data());
            if (!is_param[s])
                throw_error(STK_E_PARAM_COUNT, "%s: GPT-2 tensor '%s' is not a parameter of the model", opt.in.c_str(),
                            r->name.c_str());
            items.push_back({s, "transformer." + n, transpose[s] != 0});
            taken[s] = 1;
        }
    }
    for (uint32_t s : plan_order)  // other families: everything; GPT-2: an untied lm_head
        if (!taken[s]) items.push_back({s, refs[s].name, transpose[s] != 0});
    return items;
}

// Phase 2: the header (the config the format names, the element type, whether the head is tied).
LwtHeader export_header(const ModelPlan &p, const std::vector<Item> &items, const LwtExportOptions &opt, bool gpt2) {
    const ModelConfig &c = p.config;
    LwtHeader h;
    h.model_type = c.model_type;
    if (gpt2)
        h.config = {{"n_layer", c.n_layers},
                    {"n_head", c.n_heads},
                    {"n_embd", c.d_model},
                    {"vocab_size", c.vocab_size},
                    {"block_size", c.max_positions}};
    else
        h.config = {{"d_model", c.d_model},     {"n_layers", c.n_layers},
                    {"n_heads", c.n_heads},     {"n_kv_heads", c.n_kv_heads},
                    {"head_dim", c.head_dim},   {"vocab_size", c.vocab_size},
                    {"ffn_dim", c.ffn_dim},     {"max_positions", c.max_positions},
                    {"n_experts", c.n_experts}, {"top_k", c.top_k}};
    h.dtype = lwt_dtype_name(opt.dtype);
    bool head_stored = false;
    for (const Item &it : items)
        for (uint32_t i = 0; i < p.n_tensors; i++)
            if (p.tensors[i].source == it.source && p.tensors[i].role == Role::LM_HEAD && !p.tensors[i].tied &&
                !p.tensors[i].buffer)
                head_stored = true;
    h.tied_lm_head = c.tied_embeddings && !head_stored;
    return h;
}

// Phase 3: each tensor's stored name, shape and type, checked against seed 001's layout (GPT-2)
// and against the parameter count.
std::vector<LwtTensorSpec> export_specs(const ModelDescription &desc, const std::vector<Item> &items, const LwtExportOptions &opt,
                                        bool gpt2, uint64_t *params_out) {
    const ModelDescription *d = &desc;
    const ModelPlan &p = d->plan;
    const ModelConfig &c = p.config;
    const std::vector<TensorRef> &refs = d->checkpoint->tensors();
    std::vector<LwtTensorSpec> layout;
    if (gpt2) layout = gpt2_lwt_layout(c.n_layers, c.d_model, c.vocab_size, c.max_positions, c.ffn_dim);
    std::vector<LwtTensorSpec> specs;
    for (const Item &it : items) {
        const TensorRef &r = refs[it.source];
        LwtTensorSpec s;
        s.name = it.name;
        s.shape = r.shape;
        if (it.transpose) {
            if (r.shape.size() != 2)
                throw_error(STK_E_PARAM_COUNT, "%s: tensor '%s' marked for transposition has rank %zu", r.file.c_str(),
                            r.name.c_str(), r.shape.size());
            s.shape = {r.shape[1], r.shape[0]};
        }
        if (specs.size() < layout.size() && (layout[specs.size()].name != s.name || layout[specs.size()].shape != s.shape))
            throw_error(STK_E_PARAM_COUNT,
                        "%s: tensor '%s' would be stored with %zu dims, the GPT-2 layout expects '%s' from config.json",
                        r.file.c_str(), r.name.c_str(), s.shape.size(), layout[specs.size()].name.c_str());
        s.dtype = r.shape.size() >= 2 ? opt.dtype : LwtDType::F32;
        if (lwt_dtype_is_blocked(s.dtype) && s.shape.back() % kBlockQElems)
            throw_error(STK_E_UNSUPPORTED,
                        "%s: tensor '%s' is stored in rows of %" PRIu64 " values; %s keeps whole blocks of 32 (export this "
                        "model as int8, int4 or a float type)",
                        r.file.c_str(), r.name.c_str(), s.shape.back(), lwt_dtype_name(s.dtype));
        specs.push_back(std::move(s));
    }

    uint64_t params = 0;
    for (const Item &it : items) params += refs[it.source].n_elements;
    if (params != p.n_params)
        throw_error(STK_E_INTERNAL, "%s: would write %" PRIu64 " parameters, the checkpoint holds %" PRIu64, opt.in.c_str(),
                    params, p.n_params);
    *params_out = params;
    return specs;
}

// Phase 4: tensor i converted, quantised and packed by the workers and appended in order (the
// quantisation rule's statistics first, in a pass of their own where the dtype needs them).
void export_tensor(const ModelDescription &desc, const Item &it, size_t i, LwtWriter &w, WorkerPool &workers,
                   std::vector<WorkerScratch> &ws, std::vector<uint8_t> &scratch, uint64_t chunk, uint64_t &peak_buffer) {
    const ModelDescription *d = &desc;
    const std::vector<TensorRef> &refs = d->checkpoint->tensors();
    const unsigned T = workers.size();
    const TensorRef &r = refs[it.source];
    const LwtTensor &lt = w.tensors()[i];
    const uint8_t *bytes = d->checkpoint->tensor_bytes(r, scratch);
    TensorChunks src(*d->checkpoint, r, bytes, it.transpose, chunk);
    for (WorkerScratch &x : ws) x.values.resize(size_t(src.buffer_elements()));
    peak_buffer = std::max<uint64_t>(peak_buffer, ws[0].values.size() * 4);
    // NaN/Inf: named by its element index in stored order, found by a stored-order scan.
    auto refuse_nonfinite = [&]() {
        for (uint64_t first = 0, k = 0; first < r.n_elements; first += k) {
            const float *v = src.read(first, &k, ws[0].values.data(), ws[0].tile);
            uint64_t bad = first_nonfinite(v, k);
            if (bad < k)
                throw_error(STK_E_NONFINITE, "%s: tensor '%s' element %" PRIu64 " is %g; .lwt export refuses NaN/Inf weights",
                            r.file.c_str(), r.name.c_str(), first + bad, double(v[size_t(bad)]));
        }
        throw_error(STK_E_INTERNAL, "%s: tensor '%s': a non-finite value went missing", r.file.c_str(), r.name.c_str());
    };
    // Rounds of T pieces: worker w does piece w of the round, then the caller (alone) takes
    // the round's results in piece order.  One thread: one piece per round, on the caller.
    auto in_rounds = [&](uint64_t piece, unsigned nw, auto &&work, auto &&after) {
        for (uint64_t r0 = 0; r0 < r.n_elements; r0 += piece * nw) {
            workers.run([&](unsigned wk) {
                const uint64_t first = r0 + piece * wk;
                ws[wk].first = first;
                ws[wk].count = wk < nw && first < r.n_elements ? std::min(piece, r.n_elements - first) : 0;
                if (ws[wk].count) work(ws[wk]);
            });
            after(std::min(r.n_elements, r0 + piece * nw));
        }
    };
    // The first nw workers' statistics merged (exact: the same numbers as one pass), and the
    // quantisation they choose.
    auto merged_quant = [&](unsigned nw) {
        for (unsigned wk = 1; wk < nw; wk++)
            if (!lwt_stats_merge(&ws[0].stats, ws[wk].stats))
                throw_error(STK_E_INTERNAL, "%s: tensor '%s': statistics could not be merged", r.file.c_str(), r.name.c_str());
        const LwtQuant m = lwt_quant_from_stats(lt.dtype, ws[0].stats);
        lwt_check_quant(lt.name, lt.dtype, m);
        return m;
    };
    LwtQuant q;
    const bool quantised = lwt_dtype_has_scale(lt.dtype);  // a per-tensor scale: the statistics pass
    // Binary's codes are the signs (v > 0), whatever the scale: its statistics are taken in
    // the packing pass and the scale set before end_tensor; the source is read once.
    const bool one_pass = lt.dtype == LwtDType::BINARY && r.n_elements < LwtQuantStats::kCarryEvery;
    for (WorkerScratch &x : ws) x.stats = LwtQuantStats{}, x.nonfinite = false, x.bad_blocks = nullptr;
    if (quantised && !one_pass) {  // pass 1: the quantisation rule's statistics, from the mapped source
        src.set_first_pass(true);
        auto check = [&](uint64_t end) {
            for (const WorkerScratch &x : ws)
                if (x.nonfinite) refuse_nonfinite();
            src.done_through(end);
        };
        // Every statistic is exact and order-independent: read the source as it lies, the
        // workers' statistics merged at the end (lwt_stats_merge: the same integers, for
        // tensors below the 2^38 values where LwtQuantStats starts carrying).
        const unsigned nw = r.n_elements < LwtQuantStats::kCarryEvery ? T : 1;
        if (const uint8_t *bf16 = src.bf16_source()) {  // no conversion: pieces of 4 Mi values
            in_rounds(
                kBf16StatsPiece, nw,
                [&](WorkerScratch &x) { x.nonfinite = !lwt_stats_add_bf16(lt.dtype, &x.stats, bf16 + 2 * x.first, x.count); },
                check);
        } else {
            const uint64_t piece = src.source_chunk_elements() * (nw > 1 ? kPieceChunks : 1);
            in_rounds(
                piece, nw,
                [&](WorkerScratch &x) {
                    for (uint64_t first = x.first, k = 0; first < x.first + x.count && !x.nonfinite; first += k) {
                        const float *v = src.read_source(first, &k, x.values.data());
                        x.nonfinite = !lwt_stats_add(lt.dtype, &x.stats, v, k);
                    }
                },
                check);
        }
        src.set_first_pass(false);
        q = merged_quant(nw);
    }
    w.begin_tensor(uint32_t(i), q);
    // Pass 2: each worker converts, quantises and packs its piece into its own buffer (or
    // points at the mapping: float32 without conversion); the caller appends them in order.
    const uint64_t piece = src.chunk_elements() * (T > 1 ? kPieceChunks : 1);
    // One pass over a bf16 source: the statistics from the bits, of the source-order range
    // with the piece's indices (the pieces cover the tensor either way; the statistics do
    // not depend on the order).
    const uint8_t *one_pass_bf16 = one_pass ? src.bf16_source() : nullptr;
    // Quantised codes of a bf16 source in stored order: packed straight from the mapping.
    const uint8_t *pack_bf16 = quantised && !it.transpose ? src.bf16_source() : nullptr;
    in_rounds(
        piece, T,
        [&](WorkerScratch &x) {
            x.parts.clear();
            if (one_pass_bf16 && !lwt_stats_add_bf16(lt.dtype, &x.stats, one_pass_bf16 + 2 * x.first, x.count)) {
                x.nonfinite = true;
                return;
            }
            uint64_t total = 0;
            lwt_packed_bytes(lt.dtype, x.count, &total);
            x.packed.resize(size_t(total));
            if (pack_bf16) {  // the values were checked finite by the statistics
                lwt_pack_bf16(lt.dtype, pack_bf16 + 2 * x.first, x.count, q, x.packed.data());
                x.parts.push_back({x.packed.data(), total});
                return;
            }
            uint64_t at = 0;
            for (uint64_t first = x.first, k = 0; first < x.first + x.count; first += k) {
                const float *v = src.read(first, &k, x.values.data(), x.tile);
                LwtQuantStats finite;
                if ((!quantised || (one_pass && !one_pass_bf16)) &&
                    !lwt_stats_add(lt.dtype, one_pass ? &x.stats : &finite, v, k)) {
                    x.nonfinite = true;
                    return;
                }
                uint64_t nb = 0;
                lwt_packed_bytes(lt.dtype, k, &nb);
                if (lt.dtype == LwtDType::F32) {  // already the stored bytes: where they lie when they stay
                    const bool last = first + k == x.first + x.count;
                    if (v != x.values.data() || last) {
                        x.parts.push_back({reinterpret_cast<const uint8_t *>(v), nb});
                        continue;
                    }
                    std::memcpy(x.packed.data() + at, v, size_t(nb));
                } else {
                    lwt_pack(lt.dtype, v, k, q, x.packed.data() + at);
                    if (lwt_dtype_is_blocked(lt.dtype) && !x.bad_blocks &&
                        blockq_first_bad_scale(lwt_blockq(lt.dtype), x.packed.data() + at, k) < k / kBlockQElems)
                        x.bad_blocks = x.packed.data() + at, x.bad_count = k, x.bad_first = first;
                }
                if (!x.parts.empty() && x.parts.back().data + x.parts.back().len == x.packed.data() + at)
                    x.parts.back().len += nb;
                else x.parts.push_back({x.packed.data() + at, nb});
                at += nb;
            }
        },
        [&](uint64_t end) {
            for (const WorkerScratch &x : ws) {
                if (!x.count) continue;
                if (x.nonfinite) refuse_nonfinite();
                if (x.bad_blocks) lwt_check_blocks(lt.name, lt.dtype, x.bad_blocks, x.bad_count, x.bad_first);
                for (const Part &pt : x.parts) w.append(pt.data, pt.len);
            }
            if (!it.transpose) src.done_through(end);
        });
    if (one_pass) w.set_quant(merged_quant(T));
    w.end_tensor();
    d->checkpoint->release(r);
}

}  // namespace

LwtExportResult export_lwt(const LwtExportOptions &opt) {
    if (opt.out.empty()) throw_error(STK_E_INVALID_ARGUMENT, "export: no output path");
    if (file_exists(opt.out))
        throw_error(STK_E_OUTPUT_EXISTS, "%s: already exists (export never replaces a file)", opt.out.c_str());
    std::unique_ptr<ModelDescription> d = describe_model(opt.in);
    const ModelPlan &p = d->plan;
    const ModelConfig &c = p.config;
    const bool gpt2 = family_by_name("gpt2") == c.family;

    std::vector<Item> items = export_items(*d, opt, gpt2);
    LwtHeader h = export_header(p, items, opt, gpt2);
    uint64_t params = 0;
    std::vector<LwtTensorSpec> specs = export_specs(*d, items, opt, gpt2, &params);

    LwtWriter w(opt.out, h, std::move(specs));
    // Whole bytes of every bit width; whole blocks of the block-scaled dtypes.
    const uint64_t align = lwt_dtype_is_blocked(opt.dtype) ? kBlockQElems : 8;
    const uint64_t chunk = opt.chunk_elements ? (opt.chunk_elements + align - 1) / align * align : kLwtExportChunk;
    WorkerPool workers(std::min<uint32_t>(opt.threads ? opt.threads : 1, kLwtExportMaxThreads));
    const unsigned T = workers.size();
    std::vector<WorkerScratch> ws(T);
    std::vector<uint8_t> scratch;
    uint64_t peak_buffer = 0;
    for (size_t i = 0; i < items.size(); i++) export_tensor(*d, items[i], i, w, workers, ws, scratch, chunk, peak_buffer);
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
    res.peak_buffer_bytes = peak_buffer;
    return res;
}

}  // namespace stk
