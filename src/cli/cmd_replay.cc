// stk replay: load a published generation, tokenize a prompt, run the per-token O(1) path over
// the generation's arrays, print per-token diagnostics and a final state digest (spec-notes 19).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "core/checksum.h"
#include "core/error.h"
#include "runtime/generation.h"
#include "tokenizer/bpe.h"
#include "tokenizer/greedy.h"
#include "tokenizer/vocab_io.h"

namespace stk::cli {

static const char kHelp[] =
    "usage: stk replay --out DIR --prompt TEXT [--in MODEL_DIR] [--json]\n"
    "       stk replay DIR --prompt TEXT [--in MODEL_DIR] [--json]\n"
    "\n"
    "Verify and map the generation published in --out, tokenize --prompt with its greedy token\n"
    "tables (or, for a generation built in EXT mode, with the model's own tokenizer from --in),\n"
    "look every token up through the O(1) tables (stk_lookup), and print one line per token and a\n"
    "final state digest: SHA-256 over (u32 id, u32 length, bytes) of every token, so that two\n"
    "replays can be compared.  Modules whose arrays the generation does not hold are reported as\n"
    "disabled (spec 17.3).\n"
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

struct TokenRow {
    uint32_t id;
    std::string bytes;
    bool round_trip;  // TOKEN_ID(bytes) == id through stk_lookup
};

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
        if (!out.empty()) return report_usage("replay", "the generation is given twice (--out and '" + args.positional()[0] + "')", json);
        out = args.positional()[0];
    }
    if (out.empty() || !args.has("prompt")) return report_usage("replay", "--out DIR and --prompt TEXT are required", json);

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

    std::vector<uint32_t> ids;
    std::string mode;
    Vocab vocab;  // EXT mode: the model's own tokenizer
    s = guard([&] {
        if (gen->has_tokenizer) {
            mode = "greedy";
            ids.resize(prompt.size());
            ids.resize(greedy_encode(gen->tok, reinterpret_cast<const uint8_t *>(prompt.data()), prompt.size(),
                                     ids.data()));
        } else {
            if (in.empty())
                throw_error(STK_E_INVALID_ARGUMENT,
                            "%s holds no greedy token tables (EXT mode): give --in MODEL_DIR to tokenize with the "
                            "model's own tokenizer",
                            out.c_str());
            mode = "ext";
            vocab = load_vocab_dir(resolve_model_dir(in));
            Tokenizer tok(vocab);
            tok.encode(prompt, ids, false);
        }
    });
    if (s != STK_OK) return report_failure("replay", s, json);

    // The per-token O(1) path: id -> bytes and bytes -> id through stk_lookup.
    std::vector<TokenRow> rows;
    Sha256 state;
    for (uint32_t id : ids) {
        TokenRow r{id, "", false};
        if (gen->has_tokenizer) {
            char buf[256];
            size_t len = 0;
            s = stk_lookup(gen, STK_LOOKUP_TOKEN_BYTES, &id, sizeof id, buf, sizeof buf, &len);
            if (s != STK_OK) return report_failure("replay", s, json);
            r.bytes.assign(buf, len);
            uint32_t back = ~0u;
            size_t back_len = 0;
            r.round_trip = stk_lookup(gen, STK_LOOKUP_TOKEN_ID, buf, len, &back, sizeof back, &back_len) == STK_OK &&
                           back == id;
        }
        uint32_t hdr[2] = {id, uint32_t(r.bytes.size())};
        state.update(hdr, sizeof hdr);
        state.update(r.bytes.data(), r.bytes.size());
        rows.push_back(std::move(r));
    }
    Sha256Digest d = state.finish();
    char digest[65];
    for (int i = 0; i < 32; i++) std::snprintf(digest + 2 * i, 3, "%02x", d.bytes[i]);

    // Modules of the O(1) path that need arrays this generation does not have.
    // Which modules the generation holds (their first array present).  Replay walks the token
    // path only so far; the other modules present are listed as not replayed, never as absent.
    static const char *const kModules[][2] = {{"prf", "prf_W.bin"},
                                              {"overlays", "overlays_H.bin"},
                                              {"linear", "linear_mphf.bin"},
                                              {"memory", "memory_coeff.bin"},
                                              {"bridge", "bridge_hubs.bin"}};
    std::vector<const char *> disabled, not_replayed;
    for (const auto &m : kModules)
        (file_exists_plain(gen->dir + "/arrays/" + m[1]) ? not_replayed : disabled).push_back(m[0]);
    size_t mismatches = 0;
    for (const TokenRow &r : rows)
        if (mode == "greedy" && !r.round_trip) mismatches++;
    int code = mismatches ? kExitVerifyFailed : kExitOk;
    if (json) {
        std::vector<std::string> toks, dis;
        for (const TokenRow &r : rows) {
            Json t;
            t.unum("id", r.id).str("bytes", r.bytes).str("hex", hex_bytes(r.bytes));
            if (mode == "greedy") t.boolean("lookup_round_trip", r.round_trip);
            else t.null("lookup_round_trip");
            toks.push_back(t.text());
        }
        std::vector<std::string> nrp;
        for (const char *m : disabled) dis.push_back(json_escape(m));
        for (const char *m : not_replayed) nrp.push_back(json_escape(m));
        std::string msg = std::to_string(rows.size()) + " tokens replayed in " + mode + " mode" +
                          (mismatches ? ", " + std::to_string(mismatches) + " lookup mismatches" : "");
        json_result("replay", code, mismatches ? STK_E_CORRUPT : STK_OK, msg)
            .str("out", out)
            .str("mode", mode)
            .unum("n_tokens", rows.size())
            .raw("tokens", json_array(toks))
            .raw("disabled_modules", json_array(dis))
            .raw("modules_not_replayed", json_array(nrp))
            .str("state_digest", digest)
            .print();
    } else {
        std::printf("generation %s, tokenizer mode %s, %zu tokens\n", out.c_str(), mode.c_str(), rows.size());
        for (size_t i = 0; i < rows.size(); i++)
            std::printf("  %4zu  id %6u  %-20s %s\n", i, rows[i].id,
                        ("\"" + printable(rows[i].bytes) + "\"").c_str(),
                        mode == "greedy" ? (rows[i].round_trip ? "lookup ok" : "LOOKUP MISMATCH") : "");
        auto list = [](const std::vector<const char *> &v) {
            std::string t;
            for (const char *m : v) t += std::string(" ") + m;
            return v.empty() ? std::string(" none") : t;
        };
        std::printf("modules present, not replayed yet (replay walks the token path):%s\n", list(not_replayed).c_str());
        std::printf("disabled modules (no arrays in this generation):%s\n", list(disabled).c_str());
        std::printf("state digest %s\n", digest);
    }
    return code;
}

}  // namespace stk::cli
