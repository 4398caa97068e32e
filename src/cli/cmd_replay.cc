// stk replay: load a published generation, tokenize a prompt, run the per-token O(1) path over
// the generation's arrays, print per-token diagnostics and a final state digest (spec-notes 19).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace stk::cli {

static const char kHelp[] =
    "usage: stk replay --out DIR --prompt TEXT [--in MODEL_DIR] [--json]\n"
    "       stk replay DIR --prompt TEXT [--in MODEL_DIR] [--json]\n"
    "\n"
    "Verify and map the generation published in --out, tokenize --prompt with its greedy token\n"
    "tables (or, for a generation built in EXT mode, with the model's own tokenizer from --in),\n"
    "and walk each token through the O(1) path of every module the generation holds: token tables\n"
    "(stk_lookup), linear dictionary (base + delta), PRF features (whitening, beta_floor), the\n"
    "overlay delta, one memory step, hub bitsets.  Prints one line per token with each module's\n"
    "values and a final state digest (SHA-256, docs/decisions.md \"stk replay\"), so that two\n"
    "replays can be compared.  A module whose arrays the generation does not hold is reported as\n"
    "disabled with the reason (readers treat it as off), never skipped silently.\n"
    "\n"
    "  --out DIR       a generations root (its current generation) or a generation directory\n"
    "                  (or give it as the only argument)\n"
    "  --prompt TEXT   the text to tokenize and replay\n"
    "  --in PATH       the model (directory, checkpoint file or HuggingFace cache folder);\n"
    "                  needed for a generation built in EXT mode (no token tables)\n"
    "  --json          one JSON object on stdout (docs/cli.md); each token has \"bytes\" (a\n"
    "                  string; bytes that are not UTF-8 show as U+FFFD) and \"hex\" (exact)\n"
    "\n"
    "exit codes: 0 ok, 1 failed, 2 usage, 4 the generation does not verify, 5 file system error\n";

static std::string printable(const std::string &b) {
    std::string out;
    for (unsigned char c : b) {
        if (c >= 0x20 && c < 0x7f && c != '\\') out += char(c);
        else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    return out;
}

int cmd_replay(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kHelp, stdout);
        return kExitOk;
    }
    std::string out = args.get("out"), prompt = args.get("prompt"), in = args.get("in");
    bool json = args.flag("json");
    if (!args.finish("replay", 1)) return kExitUsage;
    if (!args.positional().empty()) {
        if (!out.empty())
            return report_usage("replay", "the generation is given twice (--out and '" + args.positional()[0] + "')", json);
        out = args.positional()[0];
    }
    if (out.empty() || !args.has("prompt")) return report_usage("replay", "--out DIR and --prompt TEXT are required", json);
    // stk_generation_open resolves a root to its current generation (and pins it).
    stk_generation *gen = nullptr;
    stk_status s = stk_generation_open(out.c_str(), &gen);
    if (s != STK_OK) {
        // A generation that does not verify is exit 4, as in stk check.
        int code = exit_code_for(s);
        if (code == kExitFailed) code = kExitVerifyFailed;
        std::string msg = stk_last_error();
        if (json) json_result("replay", code, s, msg).str("out", out).print();
        std::fprintf(stderr, "stk replay: %s: %s\n", stk_status_str(s), msg.c_str());
        return code;
    }
    std::unique_ptr<stk_generation, void (*)(stk_generation *)> hold(gen, stk_generation_close);

    std::string model_dir;
    if (!in.empty())
        if (int code = resolve_model_arg("replay", in, json, &model_dir)) return code;
    // The per-token O(1) path over every module the generation holds (stk_replay_run).
    stk_replay_params rp = {};
    rp.struct_size = sizeof rp;
    rp.prompt = prompt.data();
    rp.prompt_len = prompt.size();
    rp.model_dir = in.empty() ? nullptr : model_dir.c_str();
    stk_replay *replay = nullptr;
    s = stk_replay_run(gen, &rp, &replay);
    if (s != STK_OK) return report_failure("replay", s, json);
    std::unique_ptr<stk_replay, void (*)(stk_replay *)> hold_replay(replay, stk_replay_close);
    stk_replay_info info = {};
    info.struct_size = sizeof info;
    s = stk_replay_get_info(replay, &info);
    const std::vector<stk_replay_module> mods = read_entries(stk_replay_module_at, replay, info.n_modules, &s);
    const std::vector<stk_replay_token> rows = read_entries(stk_replay_token_at, replay, info.n_tokens, &s);
    if (s != STK_OK) return report_failure("replay", s, json);
    const std::string mode = info.mode;
    const std::string digest = info.state_digest;
    auto bytes_of = [](const stk_replay_token &r) { return std::string(r.bytes, r.bytes_len); };

    size_t mismatches = info.lookup_mismatches;
    int code = mismatches ? kExitVerifyFailed : kExitOk;
    if (json) {
        std::vector<std::string> toks, dis, mj;
        for (size_t i = 0; i < rows.size(); i++) {
            const stk_replay_token &r = rows[i];
            Json t;
            t.unum("id", r.id).str("bytes", bytes_of(r)).str("hex", hex_bytes(bytes_of(r)));
            if (mode == "greedy") t.boolean("lookup_round_trip", r.round_trip);
            else t.null("lookup_round_trip");
            auto module = [&](int m, const std::function<void(Json &)> &fill) {
                if (!mods[m].enabled) {
                    t.null(mods[m].name);
                    return;
                }
                Json j;
                fill(j);
                t.raw(mods[m].name, j.text());
            };
            module(STK_REPLAY_LINEAR, [&](Json &j) {
                j.unum("unit", r.lin_unit).unum("input", r.lin_input).unum("sign", r.lin_sign).unum("base", r.lin_base);
                j.unum("delta", r.lin_delta).unum("zero", r.lin_zero).unum("max_probes", r.lin_probes).real("norm", r.lin_norm);
            });
            module(STK_REPLAY_PRF, [&](Json &j) {
                j.real("den_layer0", r.prf_den0).unum("floored_layers", r.prf_floored).real("feature_sum", r.prf_feature_sum);
            });
            module(STK_REPLAY_OVERLAYS, [&](Json &j) { j.real("delta_norm", r.overlays_delta_norm); });
            module(STK_REPLAY_MEMORY, [&](Json &j) { j.real("u", r.mem_u).real("y", r.mem_y); });
            module(STK_REPLAY_BRIDGE, [&](Json &j) {
                j.unum("context", r.hub_context).unum("hub_bits", r.hub_bits).boolean("outside_table", r.hub_outside);
            });
            t.str("line", r.line);
            toks.push_back(t.text());
        }
        for (const stk_replay_module &m : mods) {
            Json j;
            j.str("name", m.name).str("state", m.enabled ? "enabled" : "disabled").str("detail", m.detail);
            mj.push_back(j.text());
            if (!m.enabled) dis.push_back(json_escape(m.name));
        }
        std::string msg = std::to_string(rows.size()) + " tokens replayed in " + mode + " mode" +
                          (mismatches ? ", " + std::to_string(mismatches) + " lookup mismatches" : "");
        json_result("replay", code, mismatches ? STK_E_CORRUPT : STK_OK, msg)
            .str("out", out)
            .str("mode", mode)
            .unum("n_tokens", rows.size())
            .raw("modules", json_array(mj))
            .raw("tokens", json_array(toks))
            .raw("disabled_modules", json_array(dis))
            .str("state_digest", digest)
            .print();
    } else {
        std::printf("generation %s, tokenizer mode %s, %zu tokens\n", out.c_str(), mode.c_str(), rows.size());
        for (const stk_replay_module &m : mods)
            std::printf("module %-9s %-8s %s\n", m.name, m.enabled ? "enabled" : "disabled", m.detail);
        for (size_t i = 0; i < rows.size(); i++) std::printf("%s  \"%s\"\n", rows[i].line, printable(bytes_of(rows[i])).c_str());
        std::printf("state digest %s\n", digest.c_str());
    }
    return code;
}

}  // namespace stk::cli
