// stk --list-models [--json]: the model families stk has built-in tensor role presets for, the
// config.json model_type values that select them, and the roles each preset maps.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "core/error.h"
#include "ingest/config.h"
#include "ingest/roles.h"

namespace stk::cli {

struct FamilyInfo {
    Family family;
    const char *model_types;  // config.json "model_type" values that select the preset
    const char *note;
};

static const FamilyInfo kFamilies[] = {
    {Family::Gpt2, "gpt2", "Conv1D weights transposed to [out, in]; fused c_attn split into Q, K, V"},
    {Family::Llama, "llama", "gated FFN (gate W1, down W2, up W3), RMSNorm, RoPE, GQA"},
    {Family::Mistral, "mistral", "as llama"},
    {Family::Mixtral, "mixtral", "as llama, with MoE experts and a router"},
    {Family::Qwen2, "qwen2", "as llama, with Q/K/V biases"},
    {Family::Qwen2Moe, "qwen2_moe", "MoE experts, a shared expert and its gate"},
    {Family::GptNeox, "gpt_neox", "fused query_key_value (per head), parallel attention"},
    {Family::Bloom, "bloom", "fused query_key_value (per head), embedding LayerNorm, ALiBi"},
    {Family::Falcon, "falcon, RefinedWeb, RefinedWebModel", "fused query_key_value (multi-query or grouped)"},
};

int cmd_list_models(int argc, char **argv) {
    Args args(argc, argv, 2);
    bool json = args.flag("json");
    if (!args.finish("--list-models")) return kExitUsage;
    std::vector<std::string> items;
    if (!json) {
        std::printf("Model families with built-in role presets (config.json \"model_type\" selects one).\n"
                    "Any other decoder-only model converts with user role patterns (stk_roles.json beside\n"
                    "config.json; docs/decisions.md, \"Unknown model types and the role pattern syntax\").\n\n");
        std::printf("%-11s %s\n", "family", "model_type values, then what the preset does and the roles it maps");
    }
    for (const FamilyInfo &f : kFamilies) {
        ModelConfig cfg;
        cfg.family = f.family;
        cfg.n_experts = (f.family == Family::Mixtral || f.family == Family::Qwen2Moe) ? 8 : 0;
        std::set<std::string> roles;
        stk_status s = guard([&] {
            for (const RoleRule &r : preset_rules(cfg)) {
                if (r.role == Role::BUFFER || r.role == Role::NONE) continue;
                if (r.role == Role::QKV) {
                    roles.insert("Q"), roles.insert("K"), roles.insert("V");
                } else if (r.role == Role::QKV_B) {
                    roles.insert("Q_B"), roles.insert("K_B"), roles.insert("V_B");
                } else {
                    roles.insert(role_name(r.role));
                }
            }
        });
        if (s != STK_OK) return report_failure("--list-models", s, json);
        std::string list;
        std::vector<std::string> jr;
        for (const std::string &r : roles) {
            list += (list.empty() ? "" : " ") + r;
            jr.push_back(json_escape(r));
        }
        if (json) {
            Json j;
            j.str("family", family_name(f.family)).str("model_types", f.model_types).str("notes", f.note);
            j.raw("roles", json_array(jr));
            items.push_back(j.text());
        } else {
            std::printf("%-11s %s\n", family_name(f.family), f.model_types);
            std::printf("%-11s %s\n", "", wrap(f.note, 12).c_str());
            std::printf("%-11s %s\n", "", wrap("roles: " + list, 12).c_str());
        }
    }
    if (json)
        json_result("--list-models", kExitOk, STK_OK, std::to_string(items.size()) + " model families")
            .raw("families", json_array(items))
            .print();
    return kExitOk;
}

}  // namespace stk::cli
