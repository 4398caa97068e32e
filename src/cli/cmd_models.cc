// stk --list-models [--json]: the table of model families (ingest/family.h): the config.json
// model_type values and architectures that select each, the GGUF general.architecture values it
// reads, what its preset does, the roles it maps and the test model it is checked on.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "core/error.h"
#include "ingest/config.h"
#include "ingest/family.h"
#include "ingest/roles.h"

namespace stk::cli {

static std::string joined(const char *const *list, const char *sep) {
    std::string s;
    for (; list && *list; list++) s += (s.empty() ? "" : sep) + std::string(*list);
    return s;
}

static std::vector<std::string> json_strings(const char *const *list) {
    std::vector<std::string> v;
    for (; list && *list; list++) v.push_back(json_escape(*list));
    return v;
}

int cmd_list_models(int argc, char **argv) {
    Args args(argc, argv, 2);
    bool json = args.flag("json");
    if (!args.finish("--list-models")) return kExitUsage;
    std::vector<std::string> items;
    if (!json) {
        std::printf(
            "Model families with built-in role presets (config.json \"model_type\" selects one).\n"
            "Any other decoder-only model converts with user role patterns (stk_roles.json beside\n"
            "config.json; docs/decisions.md, \"Unknown model types and the role pattern syntax\").\n\n");
        std::printf("%-11s %s\n", "family", "model_type values, then what the preset does, the roles it maps and its test model");
    }
    for (uint32_t i = 1; i < kFamilyCount; i++) {
        const FamilyDef &f = *kFamilyDefs[i];
        ModelConfig cfg;
        cfg.family = FamilyId(i);
        std::set<std::string> roles;
        stk_status s = guard([&] {
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
        });
        if (s != STK_OK) return report_failure("--list-models", s, json);
        std::string list;
        std::vector<std::string> jr;
        for (const std::string &r : roles) {
            list += (list.empty() ? "" : " ") + r;
            jr.push_back(json_escape(r));
        }
        const std::string fixture = f.fixture[0] ? f.fixture : "none yet";
        if (json) {
            Json j;
            j.str("family", f.name).str("model_types", joined(f.model_types, ", ")).str("notes", f.summary);
            j.raw("architectures", json_array(json_strings(f.architectures)));
            j.raw("gguf_architectures", json_array(json_strings(f.gguf_archs)));
            j.str("fixture", f.fixture);
            j.raw("roles", json_array(jr));
            items.push_back(j.text());
        } else {
            std::printf("%-11s %s\n", f.name, joined(f.model_types, ", ").c_str());
            std::printf("%-11s %s\n", "", wrap(f.summary, 12).c_str());
            std::printf("%-11s %s\n", "", wrap("roles: " + list, 12).c_str());
            if (f.gguf_archs[0]) std::printf("%-11s %s\n", "", wrap("gguf: " + joined(f.gguf_archs, ", "), 12).c_str());
            std::printf("%-11s %s\n", "", wrap("tested on: " + fixture, 12).c_str());
        }
    }
    if (json)
        json_result("--list-models", kExitOk, STK_OK, std::to_string(items.size()) + " model families")
            .raw("families", json_array(items))
            .print();
    return kExitOk;
}

}  // namespace stk::cli
