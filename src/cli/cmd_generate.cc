// stk generate: a continuation of a prompt by the library's LM runtime (stk_lm_* / stk_seq_*),
// greedy or sampled with a seed, tokenized and detokenized by the model's own tokenizer (--in) or
// a generation's token tables.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace stk::cli {

static const char kHelp[] =
    "usage: stk generate (--in MODEL | --gen ROOT [--in MODEL]) --prompt TEXT [--tokens N]\n"
    "                    [--temperature T [--seed S]] [--sinks S] [--window W]\n"
    "                    [--policy window|tova|h2o|tova-head [--recent R]] [--threads N] [--json]\n"
    "\n"
    "Feed the prompt to the library's own Transformer forward (stk_seq_feed: the prompt at once,\n"
    "then one token at a time) and print the N tokens that follow: the most likely each time\n"
    "(greedy, ties to the lower id), or with --temperature drawn from softmax(logits / T) by a\n"
    "seeded generator (the same seed gives the same tokens on every machine; docs/cli.md).\n"
    "\n"
    "  --in MODEL        a model (HF directory, GGUF, checkpoint file or HuggingFace cache folder):\n"
    "                    its weights run, its own tokenizer encodes the prompt and decodes the ids;\n"
    "                    with --gen, only its tokenizer is used (a generation built in EXT mode)\n"
    "  --gen ROOT        a faithful generation (stk convert --profile faithful): its weights run;\n"
    "                    without --in its greedy token tables encode and decode\n"
    "  --prompt TEXT     the text to continue (it must encode to at least one token)\n"
    "  --tokens N        how many tokens to generate (default 32; no stop at end-of-text)\n"
    "  --temperature T   sample at temperature T > 0 (default: greedy)\n"
    "  --seed S          the generator's seed with --temperature (default 0)\n"
    "  --sinks S         positions every query keeps from the start (default 4; --gen: the\n"
    "                    generation's runtime block's)\n"
    "  --window W        positions the state keeps besides the sinks (default 252; --gen: the\n"
    "                    generation's): a sequence of at most S + W tokens is the exact model\n"
    "  --policy P        which positions the state keeps once full: window (the most recent),\n"
    "                    tova, h2o, tova-head (docs/decisions.md \"Retention policies\"; default\n"
    "                    window, --gen: the generation's)\n"
    "  --recent R        h2o: the most recent positions never evicted (default window / 2, --gen\n"
    "                    with its h2o policy: the generation's)\n"
    "  --threads N       worker threads (default 1)\n"
    "  --json            one JSON object on stdout: prompt_ids, ids, text, text_hex (docs/cli.md)\n"
    "\n"
    "exit codes: 0 ok, 1 failed, 2 usage, 3 not implemented (a family the runtime refuses, by\n"
    "            name), 5 no such file\n";

namespace {

// A generation's greedy token tables (spec 4.5): the longest piece at each position.
struct TableTokenizer {
    stk_generation *gen = nullptr;
    ~TableTokenizer() {
        if (gen) stk_generation_close(gen);
    }
    stk_status encode(const std::string &text, std::vector<int32_t> *ids, std::string *err) const {
        constexpr size_t kLongest = 64;  // the most bytes a table piece holds (--ltok's bound)
        for (size_t i = 0; i < text.size();) {
            size_t take = 0;
            uint32_t id = 0;
            for (size_t n = std::min(kLongest, text.size() - i); n >= 1 && !take; n--) {
                uint8_t v[4];
                size_t len = 0;
                const stk_status s = stk_lookup(gen, STK_LOOKUP_TOKEN_ID, text.data() + i, n, v, sizeof v, &len);
                if (s == STK_OK && len == 4) {
                    id = uint32_t(v[0]) | uint32_t(v[1]) << 8 | uint32_t(v[2]) << 16 | uint32_t(v[3]) << 24;
                    take = n;
                } else if (s != STK_E_KEY_NOT_FOUND) {
                    *err = stk_last_error();
                    return s;
                }
            }
            if (!take) {
                *err = format("byte %zu of the prompt (0x%02x) starts no piece of the generation's token table", i,
                              unsigned(uint8_t(text[i])));
                return STK_E_INVALID_ARGUMENT;
            }
            ids->push_back(int32_t(id));
            i += take;
        }
        return STK_OK;
    }
    stk_status decode(const std::vector<int32_t> &ids, std::string *out, std::string *err) const {
        for (int32_t id : ids) {
            const uint8_t k[4] = {uint8_t(id), uint8_t(id >> 8), uint8_t(id >> 16), uint8_t(id >> 24)};
            char buf[256];
            size_t len = 0;
            const stk_status s = stk_lookup(gen, STK_LOOKUP_TOKEN_BYTES, k, 4, buf, sizeof buf, &len);
            if (s != STK_OK) {
                *err = format("token %d: %s", id, stk_last_error());
                return s;
            }
            out->append(buf, len);
        }
        return STK_OK;
    }
};

std::string id_list(const std::vector<int32_t> &ids) {
    std::vector<std::string> v;
    for (int32_t id : ids) v.push_back(std::to_string(id));
    return json_array(v);
}

}  // namespace

int cmd_generate(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kHelp, stdout);
        return kExitOk;
    }
    const std::string in = args.get("in"), gen_root = args.get("gen"), prompt = args.get("prompt");
    const std::string temp_s = args.get("temperature"), seed_s = args.get("seed");
    const uint32_t n_tokens = args.has("tokens") ? args.get_u32("tokens", 32) : 32;
    uint32_t sinks = args.has("sinks") ? args.get_u32("sinks", 4) : 4;
    uint32_t window = args.has("window") ? args.get_u32("window", 252) : 252;
    const std::string policy_s = args.get("policy");
    const uint32_t recent_arg = args.has("recent") ? args.get_u32("recent", 0) : 0;
    const uint32_t threads = args.get_count("threads", 1024);
    const bool json = args.flag("json");
    if (!args.finish("generate")) return kExitUsage;
    if (in.empty() && gen_root.empty())
        return report_usage("generate", "needs --in MODEL or --gen ROOT (with --in for the model's tokenizer)", json);
    if (!args.has("prompt")) return report_usage("generate", "--prompt TEXT is required", json);
    if (window == 0) return report_usage("generate", "--window is at least 1 (the query's own position)", json);
    uint32_t policy = STK_SEQ_POLICY_DEFAULT;
    if (!policy_s.empty() && !policy_number(policy_s, &policy))
        return report_usage("generate", "--policy " + policy_s + ": expected window, tova, h2o or tova-head", json);
    double temperature = 0;
    if (!temp_s.empty()) {
        char *end = nullptr;
        temperature = std::strtod(temp_s.c_str(), &end);
        if (!end || *end || !(temperature > 0) || !std::isfinite(temperature))
            return report_usage("generate", "--temperature takes a number > 0, not '" + temp_s + "'", json);
    }
    uint64_t seed = 0;
    if (!seed_s.empty()) {
        if (temp_s.empty()) return report_usage("generate", "--seed needs --temperature (greedy draws nothing)", json);
        char *end = nullptr;
        seed = std::strtoull(seed_s.c_str(), &end, 10);
        if (!end || *end || seed_s[0] == '-') return report_usage("generate", "--seed takes an unsigned integer, not '" + seed_s + "'", json);
    }

    // The weights: the generation, or the model itself.
    std::string model_dir;
    if (!in.empty())
        if (int code = resolve_model_arg("generate", in, json, &model_dir)) return code;
    const std::string weights = gen_root.empty() ? model_dir : gen_root;
    stk_lm *lm = nullptr;
    stk_status s = stk_lm_open(weights.c_str(), STK_LM_WEIGHTS_F32, &lm);
    if (s != STK_OK) return report_failure("generate", s, json);
    std::unique_ptr<stk_lm, void (*)(stk_lm *)> hold_lm(lm, stk_lm_close);
    // A generation's runtime block gives the defaults of what the flags leave unsaid.
    stk_lm_info info = {};
    info.struct_size = sizeof info;
    if ((s = stk_lm_get_info(lm, &info)) != STK_OK) return report_failure("generate", s, json);
    if (info.generation) {
        if (!args.has("sinks")) sinks = info.sinks;
        if (!args.has("window")) window = info.window;
    }
    const uint32_t policy_run = policy != STK_SEQ_POLICY_DEFAULT ? policy : info.generation ? info.policy : STK_SEQ_POLICY_WINDOW;
    if (recent_arg && policy_run != STK_SEQ_POLICY_H2O)
        return report_usage("generate", std::string("--recent needs the h2o policy (the policy is ") + policy_label(policy_run) + ")",
                            json);

    // The tokenizer: the model's own (EXT), or the generation's tables.
    std::vector<int32_t> ids;
    std::string err;
    stk_tokenizer *tok = nullptr;
    TableTokenizer tables;
    if (!model_dir.empty()) {
        stk_tokenizer_params tp = {};
        tp.struct_size = sizeof tp;
        tp.path = model_dir.c_str();
        tp.kind = STK_TOKENIZE_BPE;
        s = stk_tokenizer_open(&tp, &tok);
        if (s != STK_OK) return report_failure("generate", s, json);
    } else {
        s = stk_generation_open(gen_root.c_str(), &tables.gen);
        if (s != STK_OK) return report_failure("generate", s, json);
    }
    std::unique_ptr<stk_tokenizer, void (*)(stk_tokenizer *)> hold_tok(tok, [](stk_tokenizer *t) {
        if (t) stk_tokenizer_close(t);
    });
    if (tok) {
        const uint32_t *p = nullptr;
        size_t n = 0;
        s = stk_tokenizer_encode(tok, prompt.data(), prompt.size(), STK_TOKENIZE_ADD_SPECIAL, &p, &n);
        if (s != STK_OK) return report_failure("generate", s, json);
        ids.assign(p, p + n);
    } else if ((s = tables.encode(prompt, &ids, &err)) != STK_OK) {
        return report_error("generate", s, err, json);
    }
    if (ids.empty()) return report_usage("generate", "the prompt encodes to no tokens", json);
    const size_t n_prompt = ids.size();

    // One sequence in an arena sized by the library.
    stk_seq_params sp = {};
    sp.struct_size = sizeof sp;
    sp.sinks = sinks;
    sp.window = window;
    sp.threads = threads ? threads : 1;
    sp.policy = policy;  // STK_SEQ_POLICY_DEFAULT: the generation's (and its recent when recent_arg is 0)
    sp.recent = recent_arg;
    size_t arena_bytes = 0;
    s = stk_seq_arena_size(lm, &sp, &arena_bytes);
    if (s != STK_OK) return report_failure("generate", s, json);
    std::vector<uint64_t> arena((arena_bytes + 7) / 8 + 1);
    stk_seq *seq = nullptr;
    s = stk_seq_open(lm, &sp, arena.data(), arena.size() * 8, &seq);
    if (s != STK_OK) return report_failure("generate", s, json);
    std::unique_ptr<stk_seq, void (*)(stk_seq *)> hold_seq(seq, stk_seq_close);

    // Greedy: the argmax (the lower id on ties).  Sampling: mt19937_64 (fully specified by the C++
    // standard) gives u = top 53 bits / 2^53; the first id whose running sum of exp((l - max) / T)
    // (in doubles, in id order) exceeds u times the total.
    std::mt19937_64 rng(seed);
    std::vector<double> w;
    s = stk_seq_feed(seq, ids.data(), ids.size(), nullptr);
    for (uint32_t t = 0; s == STK_OK && t < n_tokens; t++) {
        const float *lg = nullptr;
        size_t vocab = 0;
        uint64_t pos = 0;
        if ((s = stk_seq_logits(seq, &lg, &vocab, &pos)) != STK_OK) break;
        size_t best = 0;
        for (size_t i = 1; i < vocab; i++)
            if (lg[i] > lg[best]) best = i;
        size_t next = best;
        if (temperature > 0) {
            w.resize(vocab);
            double total = 0;
            for (size_t i = 0; i < vocab; i++) total += (w[i] = std::exp((double(lg[i]) - double(lg[best])) / temperature));
            const double u = double(rng() >> 11) * 0x1.0p-53 * total;
            double acc = 0;
            next = vocab - 1;
            for (size_t i = 0; i < vocab; i++)
                if ((acc += w[i]) > u) {
                    next = i;
                    break;
                }
        }
        ids.push_back(int32_t(next));
        if (t + 1 < n_tokens) s = stk_seq_feed(seq, &ids.back(), 1, nullptr);
    }
    if (s != STK_OK) return report_failure("generate", s, json);

    // The continuation's bytes.
    std::string text;
    const std::vector<int32_t> cont(ids.begin() + long(n_prompt), ids.end());
    if (tok) {
        const std::vector<uint32_t> u(cont.begin(), cont.end());
        const char *p = nullptr;
        size_t n = 0;
        s = stk_tokenizer_decode(tok, u.data(), u.size(), &p, &n);
        if (s != STK_OK) return report_failure("generate", s, json);
        text.assign(p, n);
    } else if ((s = tables.decode(cont, &text, &err)) != STK_OK) {
        return report_error("generate", s, err, json);
    }
    if (json) {
        json_result("generate", kExitOk, STK_OK, format("%zu tokens after a prompt of %zu", cont.size(), n_prompt))
            .str("weights", weights)
            .str("tokenizer", tok ? "model" : "generation tables")
            .str("mode", temperature > 0 ? "sample" : "greedy")
            .real("temperature", temperature)
            .unum("seed", seed)
            .unum("sinks", sinks)
            .unum("window", window)
            .str("policy", policy_label(policy_run))
            .unum("recent", recent_arg ? recent_arg : policy_run == STK_SEQ_POLICY_H2O && policy == STK_SEQ_POLICY_DEFAULT ? info.recent : 0)
            .raw("prompt_ids", id_list(std::vector<int32_t>(ids.begin(), ids.begin() + long(n_prompt))))
            .raw("ids", id_list(cont))
            .str("text", text)
            .str("text_hex", hex_bytes(text))
            .print();
    } else {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fputc('\n', stdout);
    }
    return kExitOk;
}

}  // namespace stk::cli
