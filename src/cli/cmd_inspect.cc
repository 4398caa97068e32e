// stk inspect --in DIR [--json]: what a model directory holds, as stk understands it (the
// ModelPlan parse_tensors would stream): architecture, layers, roles per tensor, dtypes,
// parameter count, checkpoint bytes.  Reads headers and config only, never the weights.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "cli/cli.h"
#include "core/error.h"
#include "ingest/model.h"

namespace stk::cli {

static const char kHelp[] =
    "usage: stk inspect --in DIR|FILE.lwt [--json]\n"
    "\n"
    "Show what a HuggingFace model directory holds: config.json normalised (architecture, width,\n"
    "layers, heads, FFN, norm, positions, experts), and every tensor of the checkpoint with the\n"
    "role, layer and expert stk maps it to, its shape (after splitting fused QKV and transposing\n"
    "Conv1D weights to [out, in]) and its stored dtype.  Validates shapes and the parameter count\n"
    "against config.json.  Reads headers only, never the weights.\n"
    "\n"
    "  --in DIR   model directory (config.json + model.safetensors[.index.json] or\n"
    "             pytorch_model.bin[.index.json])\n"
    "  --json     print one JSON object: model_type, n_layers, d_model, n_params (parameters;\n"
    "             buffers and tied copies excluded), tensors [{name, role, layer, expert, shape,\n"
    "             dtype, ...}], ...\n"
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
static std::string vec_json(const std::vector<uint64_t> &v) { return shape_json(v.data(), uint32_t(v.size())); }

static std::string group_label(const PlanTensor &t) {
    if (t.expert >= 0) return std::to_string(t.expert);
    if (t.expert == kSharedExpert) return "shared";
    return "-";
}

static void print_json(const ModelDescription &d) {
    const ModelPlan &p = d.plan;
    const ModelConfig &c = p.config;
    const auto &refs = d.checkpoint->tensors();
    std::printf("{\"model_type\": %s, \"family\": %s, \"format\": %s, \"checkpoint_bytes\": %" PRIu64 ",\n",
                json_escape(c.model_type).c_str(), json_escape(family_name(c.family)).c_str(),
                json_escape(p.format).c_str(), p.checkpoint_bytes);
    std::printf(" \"n_layers\": %u, \"d_model\": %u, \"n_heads\": %u, \"n_kv_heads\": %u, \"head_dim\": %u, "
                "\"vocab_size\": %" PRIu64 ",\n",
                c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size);
    std::printf(" \"ffn_dim\": %" PRIu64 ", \"ffn_kind\": \"%s\", \"activation\": %s, \"norm\": \"%s\", \"norm_eps\": %.17g,\n",
                c.ffn_dim, ffn_kind_name(c.ffn_kind), json_escape(c.activation).c_str(), norm_kind_name(c.norm),
                c.norm_eps);
    std::printf(" \"positions\": \"%s\", \"rope_theta\": %.17g, \"rotary_dim\": %u, \"rope_scaling\": %s, "
                "\"rope_scaling_factor\": %.17g, \"max_positions\": %" PRIu64 ",\n",
                pos_kind_name(c.positions), c.positions == PosKind::Rope ? c.rope_theta : 0.0, c.rotary_dim,
                c.rope_scaling_type[0] ? json_escape(c.rope_scaling_type).c_str() : "null", c.rope_scaling_factor,
                c.max_positions);
    std::printf(" \"n_experts\": %u, \"top_k\": %u, \"moe_ffn_dim\": %" PRIu64 ", \"shared_expert_ffn_dim\": %" PRIu64
                ", \"router\": %s,\n",
                c.n_experts, c.top_k, c.moe_ffn_dim, c.shared_expert_ffn_dim,
                c.router[0] ? json_escape(c.router).c_str() : "null");
    std::printf(" \"tied_embeddings\": %s, \"parallel_attn\": %s, \"qkv_layout\": \"%s\",\n",
                c.tied_embeddings ? "true" : "false", c.parallel_attn ? "true" : "false", qkv_layout_name(c.qkv_layout));
    std::printf(" \"n_params\": %" PRIu64 ", \"n_params_expected\": %" PRIu64 ", \"n_source_tensors\": %u, "
                "\"n_buffers\": %u, \"n_unmapped\": %u, \"max_layer_f32_bytes\": %" PRIu64 ",\n",
                p.n_params, p.n_params_expected, p.n_source_tensors, p.n_buffers, p.n_unmapped, p.max_unit_f32_bytes);
    std::printf(" \"tensors\": [\n");
    for (uint32_t i = 0; i < p.n_tensors; i++) {
        const PlanTensor &t = p.tensors[i];
        const TensorRef &r = refs[t.source];
        std::string role = t.role == Role::NONE ? "null" : json_escape(role_name(t.role));
        std::printf("  {\"name\": %s, \"role\": %s, \"layer\": %s, \"expert\": %s, \"shape\": %s, \"dtype\": \"%s\"",
                    json_escape(t.name).c_str(), role.c_str(), t.layer >= 0 ? std::to_string(t.layer).c_str() : "null",
                    t.expert >= 0 ? std::to_string(t.expert).c_str() : t.expert == kSharedExpert ? "\"shared\"" : "null",
                    t.streamed ? shape_json(t.dims, t.rank).c_str() : vec_json(r.shape).c_str(), src_dtype_name(r.dtype));
        std::printf(", \"source_shape\": %s, \"parameter\": %s", vec_json(r.shape).c_str(),
                    (t.buffer || t.tied) ? "false" : "true");
        if (t.slot != NormSlot::None) std::printf(", \"norm\": \"%s\"", norm_slot_name(t.slot));
        if (t.transpose) std::printf(", \"transposed\": true");
        if (t.layout != QkvLayout::Separate) std::printf(", \"fused\": \"%s\"", qkv_layout_name(t.layout));
        if (t.tied) std::printf(", \"tied_to\": %s", json_escape(t.name).c_str());
        std::printf("}%s\n", i + 1 < p.n_tensors ? "," : "");
    }
    std::printf(" ]}\n");
}

static void print_text(const ModelDescription &d) {
    const ModelPlan &p = d.plan;
    const ModelConfig &c = p.config;
    const auto &refs = d.checkpoint->tensors();
    std::printf("model_type      %s (preset: %s)\n", c.model_type, family_name(c.family));
    std::printf("checkpoint      %s, %" PRIu64 " bytes\n", p.format, p.checkpoint_bytes);
    std::printf("layers          %u\n", c.n_layers);
    std::printf("d_model         %u\n", c.d_model);
    std::printf("heads           %u (kv %u, head_dim %u)\n", c.n_heads, c.n_kv_heads, c.head_dim);
    std::printf("vocab           %" PRIu64 "\n", c.vocab_size);
    std::printf("ffn             %s %" PRIu64 ", %s\n", ffn_kind_name(c.ffn_kind), c.ffn_dim, c.activation);
    std::printf("norm            %s, eps %g%s\n", norm_kind_name(c.norm), c.norm_eps,
                c.parallel_attn ? ", parallel attention" : "");
    if (c.positions == PosKind::Rope)
        std::printf("positions       rope, theta %g, %u rotated dims%s%s\n", c.rope_theta, c.rotary_dim,
                    c.rope_scaling_type[0] ? ", scaling " : "", c.rope_scaling_type);
    else
        std::printf("positions       %s\n", pos_kind_name(c.positions));
    if (c.max_positions) std::printf("max positions   %" PRIu64 "\n", c.max_positions);
    if (c.n_experts)
        std::printf("experts         %u, top-%u, ffn %" PRIu64 "%s\n", c.n_experts, c.top_k, c.moe_ffn_dim,
                    c.shared_expert_ffn_dim ? (", shared expert ffn " + std::to_string(c.shared_expert_ffn_dim)).c_str() : "");
    std::printf("tied embeddings %s\n", c.tied_embeddings ? "yes" : "no");
    std::printf("parameters      %" PRIu64 "%s\n", p.n_params,
                p.n_params_expected ? " (= what config.json implies)" : " (custom model: not derived from config)");
    std::printf("buffers         %u tensors (not parameters)\n", p.n_buffers);
    if (p.n_unmapped) std::printf("unmapped        %u tensors (no role)\n", p.n_unmapped);
    std::printf("largest layer   %" PRIu64 " bytes in f32\n\n", p.max_unit_f32_bytes);
    std::printf("%-52s %-12s %5s %6s %-16s %s\n", "tensor", "role", "layer", "expert", "shape", "dtype");
    for (uint32_t i = 0; i < p.n_tensors; i++) {
        const PlanTensor &t = p.tensors[i];
        const TensorRef &r = refs[t.source];
        std::string role = role_name(t.role);
        if (t.role == Role::NONE) role = "-";
        if (t.slot != NormSlot::None) role += std::string("/") + norm_slot_name(t.slot);
        std::string note;
        if (t.transpose) note += " transposed from " + vec_json(r.shape);
        if (t.layout != QkvLayout::Separate) note += std::string(" part of ") + qkv_layout_name(t.layout) + " " + vec_json(r.shape);
        if (t.tied) note += " tied to the embedding";
        else if (t.buffer) note += " (buffer)";
        std::printf("%-52s %-12s %5s %6s %-16s %s%s\n", t.name, role.c_str(),
                    t.layer >= 0 ? std::to_string(t.layer).c_str() : "-", group_label(t).c_str(),
                    (t.streamed ? shape_json(t.dims, t.rank) : vec_json(r.shape)).c_str(), src_dtype_name(r.dtype),
                    note.c_str());
    }
}

int cmd_inspect(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kHelp, stdout);
        return kExitOk;
    }
    std::string in = args.get("in");
    bool json = args.flag("json");
    if (!args.finish("inspect")) return kExitUsage;
    if (in.empty()) {
        std::fprintf(stderr, "stk inspect: --in DIR is required (see stk inspect --help)\n");
        return kExitUsage;
    }
    if (is_lwt_file(in)) return inspect_lwt(in, json);
    std::unique_ptr<ModelDescription> d;
    stk_status s = guard([&] { d = describe_model(in); });
    if (s != STK_OK) return report_failure("inspect", s, json);
    if (json) print_json(*d);
    else print_text(*d);
    return kExitOk;
}

}  // namespace stk::cli
