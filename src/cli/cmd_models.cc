// stk --list-models [--json]: the table of model families (stk_family_at): the config.json
// model_type values and architectures that select each, the GGUF general.architecture values it
// reads, what its preset does, the roles it maps and the test model it is checked on.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"

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
    for (uint32_t i = 0; i < stk_family_count(); i++) {
        stk_family_info f = {};
        f.struct_size = sizeof f;
        stk_status s = stk_family_at(i, &f);
        if (s != STK_OK) return report_failure("--list-models", s, json);
        const std::string list = joined(f.roles, " ");
        const std::string fixture = f.fixture[0] ? f.fixture : "none yet";
        if (json) {
            Json j;
            j.str("family", f.name).str("model_types", joined(f.model_types, ", ")).str("notes", f.summary);
            j.raw("architectures", json_array(json_strings(f.architectures)));
            j.raw("gguf_architectures", json_array(json_strings(f.gguf_architectures)));
            j.str("fixture", f.fixture);
            j.raw("roles", json_array(json_strings(f.roles)));
            items.push_back(j.text());
        } else {
            std::printf("%-11s %s\n", f.name, joined(f.model_types, ", ").c_str());
            std::printf("%-11s %s\n", "", wrap(f.summary, 12).c_str());
            std::printf("%-11s %s\n", "", wrap("roles: " + list, 12).c_str());
            if (f.gguf_architectures[0])
                std::printf("%-11s %s\n", "", wrap("gguf: " + joined(f.gguf_architectures, ", "), 12).c_str());
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
