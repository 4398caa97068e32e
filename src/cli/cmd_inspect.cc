// stk inspect --in DIR [--json]: what a model directory holds, as stk understands it (the
// ModelPlan parse_tensors would stream): architecture, layers, roles per tensor, dtypes,
// parameter count, checkpoint bytes.  Reads headers and config only, never the weights.
// On a published generation (a directory holding sera_manifest.bin): the manifest's fields,
// stages, arrays (sizes, digests) and records.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace stk::cli {

static const char kHelp[] =
    "usage: stk inspect --in PATH [--json]\n"
    "       stk inspect PATH [--json]      (PATH: a model, a generation, a FILE.lwt or one array\n"
    "                                        file such as ROOT/generations/NAME/arrays/prf_W.bin)\n"
    "\n"
    "Show what a HuggingFace model directory holds: config.json normalised (architecture, width,\n"
    "layers, heads, FFN, norm, positions, experts), and every tensor of the checkpoint with the\n"
    "role, layer and expert stk maps it to, its shape (after splitting fused QKV and transposing\n"
    "Conv1D weights to [out, in]) and its stored dtype (a GGUF's block type, Q4_K say, with the\n"
    "F32 it is read as).  Validates shapes and the parameter count against config.json (a\n"
    "GGUF: its metadata).  Reads headers only, never the weights.\n"
    "\n"
    "On a published generation (a directory holding sera_manifest.bin, or a generations root:\n"
    "its current generation), shows the manifest\n"
    "instead: its hash and the previous one, tokenizer mode, every stage's state and digest,\n"
    "every array (stage, dtype, shape, bytes, crc32c, sha256_low64) and every record.  It\n"
    "decodes and validates the manifest but does not hash the arrays: stk check does.\n"
    "\n"
    "  --in PATH  model directory (config.json + model.safetensors[.index.json] or\n"
    "             pytorch_model.bin[.index.json]), a checkpoint file in one, a HuggingFace\n"
    "             cache folder models--ORG--NAME, or a published generation; or give it as\n"
    "             the only argument\n"
    "  --json     print one JSON object: model_type, n_layers, d_model, n_params (parameters;\n"
    "             buffers and tied copies excluded), tensors [{name, role, layer, expert, shape,\n"
    "             dtype, read_as, ...}], ... with the keys every command shares (docs/cli.md)\n"
    "\n"
    "Given a .lwt file instead, shows its header, every tensor (dtype, shape, offset, bytes,\n"
    "scale) and whether the data section's CRC32 matches (exit 4 if not).\n"
    "\n"
    "exit codes: 0 ok, 1 refused (message on stderr), 2 usage, 4 .lwt CRC mismatch, 5 file missing\n";

static std::string shape_json(const uint64_t *d, uint32_t rank) {
    std::string s = "[";
    for (uint32_t i = 0; i < rank; i++) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
}

static std::string group_label(const stk_model_tensor &t) {
    if (t.expert >= 0) return std::to_string(t.expert);
    if (t.expert == STK_SHARED_EXPERT) return "shared";
    return "-";
}

static void print_json(const stk_model_info &c, const std::vector<stk_model_tensor> &tensors) {
    std::string head = json_result("inspect", kExitOk, STK_OK, "model " + std::string(c.model_type)).text();
    head.pop_back();  // the object goes on below
    std::printf("%s, \"kind\": \"model\", \"model_type\": %s, \"family\": %s, \"format\": %s, \"checkpoint_bytes\": %" PRIu64
                ", ",
                head.c_str(), json_escape(c.model_type).c_str(), json_escape(c.family).c_str(), json_escape(c.format).c_str(),
                c.checkpoint_bytes);
    std::printf(
        "\"n_layers\": %u, \"d_model\": %u, \"n_heads\": %u, \"n_kv_heads\": %u, \"head_dim\": %u, "
        "\"vocab_size\": %" PRIu64 ", ",
        c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size);
    std::printf("\"ffn_dim\": %" PRIu64 ", \"ffn_kind\": \"%s\", \"activation\": %s, \"norm\": \"%s\", \"norm_eps\": %.17g, ",
                c.ffn_dim, c.ffn_kind, json_escape(c.activation).c_str(), c.norm, c.norm_eps);
    std::printf(
        "\"positions\": \"%s\", \"rope_theta\": %.17g, \"rotary_dim\": %u, \"rope_scaling\": %s, "
        "\"rope_scaling_factor\": %.17g, \"max_positions\": %" PRIu64 ", ",
        c.positions, c.rope_theta, c.rotary_dim, c.rope_scaling[0] ? json_escape(c.rope_scaling).c_str() : "null",
        c.rope_scaling_factor, c.max_positions);
    std::printf("\"n_experts\": %u, \"top_k\": %u, \"moe_ffn_dim\": %" PRIu64 ", \"shared_expert_ffn_dim\": %" PRIu64
                ", \"router\": %s, ",
                c.n_experts, c.top_k, c.moe_ffn_dim, c.shared_expert_ffn_dim,
                c.router[0] ? json_escape(c.router).c_str() : "null");
    std::printf("\"tied_embeddings\": %s, \"parallel_attn\": %s, \"qkv_layout\": \"%s\", ", c.tied_embeddings ? "true" : "false",
                c.parallel_attn ? "true" : "false", c.qkv_layout);
    std::printf("\"n_params\": %" PRIu64 ", \"n_params_expected\": %" PRIu64
                ", \"n_source_tensors\": %u, "
                "\"n_buffers\": %u, \"n_unmapped\": %u, \"max_layer_f32_bytes\": %" PRIu64 ", ",
                c.n_params, c.n_params_expected, c.n_source_tensors, c.n_buffers, c.n_unmapped, c.max_layer_f32_bytes);
    std::printf("\"tensors\": [");
    for (size_t i = 0; i < tensors.size(); i++) {
        const stk_model_tensor &t = tensors[i];
        std::string role = t.role ? json_escape(t.role) : "null";
        std::printf("{\"name\": %s, \"role\": %s, \"layer\": %s, \"expert\": %s, \"shape\": %s, \"dtype\": \"%s\"",
                    json_escape(t.name).c_str(), role.c_str(), t.layer >= 0 ? std::to_string(t.layer).c_str() : "null",
                    t.expert >= 0                   ? std::to_string(t.expert).c_str()
                    : t.expert == STK_SHARED_EXPERT ? "\"shared\""
                                                    : "null",
                    shape_json(t.shape, t.rank).c_str(), t.dtype);
        std::printf(", \"read_as\": \"%s\"", t.read_as ? t.read_as : t.dtype);
        std::printf(", \"source_shape\": %s, \"parameter\": %s", shape_json(t.source_shape, t.source_rank).c_str(),
                    t.parameter ? "true" : "false");
        if (t.norm_slot) std::printf(", \"norm\": \"%s\"", t.norm_slot);
        if (t.transposed) std::printf(", \"transposed\": true");
        if (t.fused) std::printf(", \"fused\": \"%s\"", t.fused);
        if (t.tied) std::printf(", \"tied_to\": %s", json_escape(t.name).c_str());
        if (t.composed) std::printf(", \"composed_from\": %s", json_escape(t.name).c_str());
        std::printf("}%s", i + 1 < tensors.size() ? ", " : "");
    }
    std::printf("]}\n");
}

static void print_text(const stk_model_info &c, const std::vector<stk_model_tensor> &tensors) {
    std::printf("model_type      %s (preset: %s)\n", c.model_type, c.family);
    std::printf("checkpoint      %s, %s (%" PRIu64 " bytes)\n", c.format, human_bytes(c.checkpoint_bytes).c_str(),
                c.checkpoint_bytes);
    std::printf("layers          %u\n", c.n_layers);
    std::printf("d_model         %u\n", c.d_model);
    std::printf("heads           %u (kv %u, head_dim %u)\n", c.n_heads, c.n_kv_heads, c.head_dim);
    std::printf("vocab           %" PRIu64 "\n", c.vocab_size);
    std::printf("ffn             %s %" PRIu64 ", %s\n", c.ffn_kind, c.ffn_dim, c.activation);
    std::printf("norm            %s, eps %g%s\n", c.norm, c.norm_eps, c.parallel_attn ? ", parallel attention" : "");
    if (c.rope)
        std::printf("positions       rope, theta %g, %u rotated dims%s%s\n", c.rope_theta, c.rotary_dim,
                    c.rope_scaling[0] ? ", scaling " : "", c.rope_scaling);
    else std::printf("positions       %s\n", c.positions);
    if (c.max_positions) std::printf("max positions   %" PRIu64 "\n", c.max_positions);
    if (c.n_experts)
        std::printf("experts         %u, top-%u, ffn %" PRIu64 "%s\n", c.n_experts, c.top_k, c.moe_ffn_dim,
                    c.shared_expert_ffn_dim ? (", shared expert ffn " + std::to_string(c.shared_expert_ffn_dim)).c_str() : "");
    std::printf("tied embeddings %s\n", c.tied_embeddings ? "yes" : "no");
    std::printf("parameters      %" PRIu64 "%s\n", c.n_params,
                !c.n_params_expected                   ? " (custom model: not derived from config)"
                : std::strncmp(c.format, "gguf", 4) == 0 ? " (= what the GGUF metadata implies)"
                                                         : " (= what config.json implies)");
    std::printf("buffers         %u tensors (not parameters)\n", c.n_buffers);
    if (c.n_unmapped) std::printf("unmapped        %u tensors (no role)\n", c.n_unmapped);
    std::printf("largest layer   %s in f32 (%" PRIu64 " bytes)\n\n", human_bytes(c.max_layer_f32_bytes).c_str(),
                c.max_layer_f32_bytes);
    // Columns as wide as their widest cell (names at most 52), so that rows fit 100 columns.
    struct Row {
        std::string name, role, layer, expert, shape, dtype, note;
    };
    std::vector<Row> rows;
    Row head{"tensor", "role", "layer", "expert", "shape", "dtype", ""};
    size_t w[5] = {head.name.size(), head.role.size(), head.layer.size(), head.expert.size(), head.shape.size()};
    for (const stk_model_tensor &t : tensors) {
        Row row;
        row.name = t.name;
        row.role = t.role ? t.role : "-";
        if (t.norm_slot) row.role += std::string("/") + t.norm_slot;
        row.layer = t.layer >= 0 ? std::to_string(t.layer) : "-";
        row.expert = group_label(t);
        row.shape = shape_json(t.shape, t.rank);
        row.dtype = t.dtype;
        if (t.read_as && std::strcmp(t.read_as, t.dtype) != 0) row.dtype += std::string(" (read as ") + t.read_as + ")";
        // Short notes (--json has the full story: source_shape, fused, transposed).
        if (t.fused || t.source_rank == 3) row.note += " slice of " + shape_json(t.source_shape, t.source_rank);
        if (t.transposed) row.note += t.fused ? ", transposed" : " transposed";
        if (t.tied) row.note += " tied to the embedding";
        else if (t.composed) row.note += " (composed per head for the attention stages)";
        else if (t.buffer) row.note += " (buffer)";
        const std::string *cells[5] = {&row.name, &row.role, &row.layer, &row.expert, &row.shape};
        for (int k = 0; k < 5; k++) w[k] = cells[k]->size() > w[k] ? cells[k]->size() : w[k];
        rows.push_back(std::move(row));
    }
    w[0] = w[0] > 52 ? 52 : w[0];
    auto print_row = [&](const Row &r) {
        std::printf("%-*s %-*s %*s %*s %-*s %s%s\n", int(w[0]), r.name.c_str(), int(w[1]), r.role.c_str(), int(w[2]),
                    r.layer.c_str(), int(w[3]), r.expert.c_str(), int(w[4]), r.shape.c_str(), r.dtype.c_str(), r.note.c_str());
    };
    print_row(head);
    for (const Row &r : rows) print_row(r);
}

// A model: its description (stk_model_open), as text or JSON.
static int inspect_model(const std::string &in, bool json) {
    std::string dir;
    if (int code = resolve_model_arg("inspect", in, json, &dir)) return code;
    stk_model *model = nullptr;
    stk_status s = stk_model_open(dir.c_str(), &model);
    if (s != STK_OK) return report_failure("inspect", s, json);
    std::unique_ptr<stk_model, void (*)(stk_model *)> hold(model, stk_model_close);
    stk_model_info info = {};
    info.struct_size = sizeof info;
    s = stk_model_get_info(model, &info);
    const std::vector<stk_model_tensor> tensors = read_entries(stk_model_tensor_at, model, info.n_tensors, &s);
    if (s != STK_OK) return report_failure("inspect", s, json);
    if (json) print_json(info, tensors);
    else print_text(info, tensors);
    return kExitOk;
}

static std::string dims_text(const stk_manifest_array &a) {
    std::string s;
    for (uint32_t i = 0; i < a.rank && i < 5; i++) s += (i ? "x" : "") + std::to_string(a.dims[i]);
    return s.empty() ? "-" : s;
}

// A single array file (ROOT/generations/NAME/arrays/X.bin): its header, verified payload.
static int inspect_array_file(const std::string &path, bool json) {
    stk_array_file_info h = {};
    h.struct_size = sizeof h;
    stk_status s = stk_array_file_verify(path.c_str(), &h);
    if (s != STK_OK) {
        int code = s >= STK_E_TRUNCATED && s <= 39 ? kExitVerifyFailed : exit_code_for(s);
        if (json) json_result("inspect", code, s, stk_last_error()).str("kind", "array").str("path", path).print();
        std::fprintf(stderr, "stk inspect: %s: %s\n", stk_status_str(s), stk_last_error());
        return code;
    }
    const char *dtype = stk_dtype_name(h.dtype);  // the reader validated it
    std::vector<std::string> dims;
    std::string shape;
    for (uint32_t i = 0; i < h.rank; i++) {
        dims.push_back(std::to_string(h.dims[i]));
        shape += (i ? "x" : "") + dims.back();
    }
    if (json) {
        json_result("inspect", kExitOk, STK_OK, path + ": " + dtype + " [" + shape + "], payload verified")
            .str("kind", "array")
            .str("path", path)
            .str("dtype", dtype)
            .raw("shape", json_array(dims))
            .unum("bytes", h.byte_len)
            .str("crc32c", hex8(h.crc32c))
            .str("sha256_low64", hex16(h.sha256_low64))
            .unum("flags", h.flags)
            .boolean("payload_verified", true)
            .print();
        return kExitOk;
    }
    std::printf("array           %s\n", path.c_str());
    std::printf("dtype           %s\n", dtype);
    std::printf("shape           %s (rank %u)\n", shape.c_str(), h.rank);
    std::printf("payload         %s (%llu bytes at offset %llu)\n", human_bytes(h.byte_len).c_str(),
                (unsigned long long)h.byte_len, (unsigned long long)h.header_bytes);
    std::printf("crc32c          %08x\nsha256_low64    %016llx\n", h.crc32c, (unsigned long long)h.sha256_low64);
    std::printf("flags           0x%x\n", h.flags);
    std::printf("\nThe header was decoded and validated and the payload hashed: both checksums match.\n");
    return kExitOk;
}

// The names `stk inspect` prints for the manifest's codes (stk_manifest_stage_state,
// stk_record_kind, the tokenizer mode).
static const char *stage_state_name(uint32_t s) {
    switch (s) {
        case STK_MANIFEST_STAGE_PENDING: return "pending";
        case STK_MANIFEST_STAGE_RAN: return "ran";
        case STK_MANIFEST_STAGE_NOT_IMPLEMENTED: return "not_implemented";
        case STK_MANIFEST_STAGE_DISABLED: return "disabled";
        case STK_MANIFEST_STAGE_FAILED: return "failed";
    }
    return "?";
}

static const char *record_kind_name(uint32_t k) {
    switch (k) {
        case STK_RECORD_FEATURE_DISABLED: return "feature_disabled";
        case STK_RECORD_INVARIANT_PASS: return "invariant_pass";
        case STK_RECORD_INVARIANT_FAIL: return "invariant_fail";
        case STK_RECORD_NOTE: return "note";
    }
    return "?";
}

static const char *tokenizer_mode_name(uint32_t m) {
    static const char *const kNames[] = {"disabled", "fst", "fst_uncertified", "ext"};
    return m < 4 ? kNames[m] : "?";
}

// A published generation: what its manifest says.
// root: the generations root the generation was resolved from ("" for a generation directory).
// The manifest is written before the check stage runs (its own digest is curr_hash, which it
// cannot hold), so it records check "pending" and manifest_emit's digest as zeros.  A generation
// in a root's generations/ was published, and stk publishes only what the check stage verified.
static int inspect_generation(const std::string &in, bool json, const std::string &root = "") {
    stk_manifest *mf = nullptr;
    stk_status s = stk_manifest_open(in.c_str(), &mf);
    if (s != STK_OK) return report_failure("inspect", s, json);
    std::unique_ptr<stk_manifest, void (*)(stk_manifest *)> hold(mf, stk_manifest_close);
    stk_manifest_info m = {};
    m.struct_size = sizeof m;
    s = stk_manifest_get_info(mf, &m);
    const std::vector<stk_manifest_stage> stages = read_entries<stk_manifest_stage>(
        STK_STAGE_COUNT, &s, [&](uint64_t i, stk_manifest_stage *v) { return stk_manifest_stage_at(mf, stk_stage(i + 1), v); });
    const std::vector<stk_manifest_array> arrays = read_entries(stk_manifest_array_at, mf, m.array_count, &s);
    const std::vector<stk_manifest_record> records = read_entries(stk_manifest_record_at, mf, m.record_count, &s);
    if (s != STK_OK) return report_failure("inspect", s, json);
    const std::string dir = m.dir, path = m.manifest_path;
    const std::string curr = hex_hash(m.curr_hash), prev = hex_hash(m.prev_hash);
    const uint64_t bytes = m.payload_bytes;
    const bool first = m.first, published = m.published;
        // What the manifest's stage table cannot say about itself (see above).
    auto stage_note = [&](int i) -> std::string {
        if (i + 1 == STK_STAGE_MANIFEST_EMIT) return "its digest is curr_hash: a file cannot hold its own hash";
        if (i + 1 == STK_STAGE_CHECK && stages[i].state == STK_MANIFEST_STAGE_PENDING)
            return published ? "passed: the manifest is written before check runs; a published generation passed it"
                             : "recorded before check ran (stk check verifies it now)";
        return "";
    };
    if (json) {
        std::vector<std::string> sj, aj, rj;
        for (int i = 0; i < STK_STAGE_COUNT; i++) {
            Json j;
            j.str("stage", stk_stage_name(stk_stage(i + 1))).str("state", stage_state_name(stages[i].state));
            j.str("crc32c", hex8(stages[i].crc32c)).str("sha256_low64", hex16(stages[i].sha256_low64));
            j.str("note", stage_note(i));
            sj.push_back(j.text());
        }
        for (const stk_manifest_array &a : arrays) {
            std::vector<std::string> dims;
            for (uint32_t i = 0; i < a.rank && i < 5; i++) dims.push_back(std::to_string(a.dims[i]));
            Json j;
            j.str("name", a.name).str("stage", stk_stage_name(stk_stage(a.stage))).str("dtype", stk_dtype_name(a.dtype));
            j.raw("shape", json_array(dims)).unum("bytes", a.byte_len).str("crc32c", hex8(a.crc32c));
            j.str("sha256_low64", hex16(a.sha256_low64)).unum("flags", a.flags);
            aj.push_back(j.text());
        }
        for (const stk_manifest_record &r : records) {
            Json j;
            j.str("stage", stk_stage_name(stk_stage(r.stage))).str("kind", record_kind_name(r.kind));
            j.unum("feature", r.feature).unum("status_code", r.status).real("value", r.value).real("bound", r.bound);
            j.str("text", r.text);
            rj.push_back(j.text());
        }
        Json tok;
        tok.str("mode", tokenizer_mode_name(m.tokenizer_mode)).unum("mode_code", m.tokenizer_mode).unum("ltok", m.tokenizer_l_tok);
        tok.unum("vocab_size", m.tokenizer_vocab_size).unum("s_norm", m.tokenizer_s_norm).unum("l_norm", m.tokenizer_l_norm);
        json_result("inspect", kExitOk, STK_OK,
                    "generation " + curr.substr(0, 16) + ": " + std::to_string(arrays.size()) + " arrays, " + human_bytes(bytes))
            .str("kind", "generation")
            .str("out", dir)
            .str_or_null("root", root.c_str())
            .str("generation", curr)
            .str_or_null("previous", first ? nullptr : prev.c_str())
            .unum("arrays_count", arrays.size())
            .unum("bytes", bytes)
            .unum("n_pgen", m.pgen_count)
            .raw("tokenizer", tok.text())
            .str("profile", m.profile == 1 ? "faithful" : "default")
            .raw("runtime", m.profile == 1 ? Json()
                                                  .unum("sinks", m.runtime_sinks)
                                                  .unum("window", m.runtime_window)
                                                  .str("ffn_dtype", ffn_dtype_label(m.runtime_ffn_dtype))
                                                  .str("policy", policy_label(m.runtime_policy))
                                                  .unum("recent", m.runtime_recent)
                                                  .text()
                                            : "null")
            .raw("stages", json_array(sj))
            .raw("arrays", json_array(aj))
            .raw("records", json_array(rj))
            .print();
        return kExitOk;
    }
    std::printf("generation      %s\n", curr.c_str());
    std::printf("previous        %s\n", first ? "none (the first generation of its root)" : prev.c_str());
    if (!root.empty()) {
        std::printf("root            %s (current generation)\n", root.c_str());
        std::printf("manifest        %s\n", path.substr(root.size() + 1).c_str());
    } else {
        std::printf("manifest        %s\n", path.c_str());
    }
    std::printf("arrays          %zu, %s (%llu bytes)\n", arrays.size(), human_bytes(bytes).c_str(), (unsigned long long)bytes);
    std::printf("tokenizer       %s, L_tok %u, vocab %u, %u proposal ids\n", tokenizer_mode_name(m.tokenizer_mode), m.tokenizer_l_tok,
                m.tokenizer_vocab_size, m.pgen_count);
    if (m.profile == 1)
        std::printf("profile         faithful: %u sinks + %u window, FFN %s, policy %s%s (the runtime block)\n", m.runtime_sinks,
                    m.runtime_window, ffn_dtype_label(m.runtime_ffn_dtype),
                    policy_label(m.runtime_policy), m.runtime_recent ? format(" (recent %u)", m.runtime_recent).c_str() : "");
    else
        std::printf("profile         default\n");
    std::printf("\n%-24s %-16s %-8s %s\n", "stage", "state", "crc32c", "sha256_low64");
    for (int i = 0; i < STK_STAGE_COUNT; i++) {
        const char *name = stk_stage_name(stk_stage(i + 1));
        if (i + 1 == STK_STAGE_MANIFEST_EMIT) {
            std::printf("%-24s %-16s = curr_hash (%s...)\n", name, stage_state_name(stages[i].state), curr.substr(0, 16).c_str());
        } else if (i + 1 == STK_STAGE_CHECK && stages[i].state == STK_MANIFEST_STAGE_PENDING) {
            std::printf("%-24s %-16s %s\n", name, published ? "passed" : "pending",
                        published ? "(published, so verified; the manifest predates it)"
                                  : "(recorded before check ran: stk check verifies it)");
        } else {
            std::printf("%-24s %-16s %08x %016llx\n", name, stage_state_name(stages[i].state), stages[i].crc32c,
                        (unsigned long long)stages[i].sha256_low64);
        }
    }
    if (!arrays.empty()) {
        // Arrays come in stage order: each stage's name (whole) heads its arrays, so that rows
        // fit 100 columns without cutting a name.
        std::printf("\n  %-26s %-5s %-16s %10s %-8s %s\n", "array (under its stage)", "dtype", "shape", "size", "crc32c",
                    "sha256_low64");
        uint32_t shown = 0;
        for (const stk_manifest_array &a : arrays) {
            if (a.stage != shown) std::printf("%s\n", stk_stage_name(stk_stage(shown = a.stage)));
            std::printf("  %-26s %-5s %-16s %10s %08x %016llx\n", a.name, stk_dtype_name(a.dtype), dims_text(a).c_str(),
                        human_bytes(a.byte_len).c_str(), a.crc32c, (unsigned long long)a.sha256_low64);
        }
    }
    std::printf("\nThe manifest was decoded and validated; stk check also hashes every array.\n");
    if (!records.empty()) {
        std::printf("\nrecords\n");
        // kind and stage in columns, the text wrapped under its own column so that rows fit 100
        // characters; value and bound when the record holds them.
        for (const stk_manifest_record &r : records) {
            char head[64];
            std::snprintf(head, sizeof head, "  %-16s %-24s ", record_kind_name(r.kind), stk_stage_name(stk_stage(r.stage)));
            std::string text = r.text;
            if (r.value != 0 || r.bound != 0) {
                char vb[64];
                std::snprintf(vb, sizeof vb, " [value %.6g, bound %.6g]", r.value, r.bound);
                text += vb;
            }
            std::printf("%s%s\n", head, wrap(text, std::strlen(head)).c_str());
        }
    }
    return kExitOk;
}

int cmd_inspect(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kHelp, stdout);
        return kExitOk;
    }
    std::string in = args.get("in");
    bool json = args.flag("json");
    if (!args.finish("inspect", 1)) return kExitUsage;
    if (!args.positional().empty()) {
        if (!in.empty())
            return report_usage("inspect", "the path is given twice (--in and '" + args.positional()[0] + "')", json);
        in = args.positional()[0];
    }
    if (in.empty()) return report_usage("inspect", "--in PATH (or a plain PATH) is required", json);
    uint32_t kind = STK_PATH_OTHER;
    if (stk_status s = stk_path_kind_of(in.c_str(), &kind); s != STK_OK) return report_failure("inspect", s, json);
    switch (kind) {
        case STK_PATH_GENERATION: return inspect_generation(in, json);
        case STK_PATH_ROOT: return inspect_generation(in, json, in);  // its current generation (CURRENT read once)
        case STK_PATH_LWT: return inspect_lwt(in, json);
        case STK_PATH_ARRAY: return inspect_array_file(in, json);
    }
    return inspect_model(in, json);
}

}  // namespace stk::cli
