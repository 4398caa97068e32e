// stk tokenize --in MODEL_DIR (--text FILE | --prompt TEXT) [--mode bpe|greedy] [--json]: encode
// text with a model directory's tokenizer (the real BPE / SentencePiece encoder, or the greedy
// encoder of spec 4.5 over tables built in memory) and print the ids.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/fst_tables.h"
#include "tokenizer/greedy.h"
#include "tokenizer/vocab_greedy.h"
#include "tokenizer/vocab_io.h"

namespace stk::cli {

static const char kTokenizeHelp[] =
    "usage: stk tokenize --in PATH (--text FILE | --prompt TEXT) [--mode bpe|greedy] [--json]\n"
    "                    [--no-special] [--ltok N] [--decode]\n"
    "       stk tokenize PATH (--text FILE | --prompt TEXT) [options]\n"
    "\n"
    "Encode text with the tokenizer of a HF model directory (tokenizer.json, else vocab.json +\n"
    "merges.txt or encoder.json + vocab.bpe, else tokenizer.model) and print the token ids.\n"
    "\n"
    "  --in PATH       the model directory (or a checkpoint file in it, or a HuggingFace cache\n"
    "                  folder models--ORG--NAME); or give it as the only argument\n"
    "  --text FILE     the text to encode ('-': standard input)\n"
    "  --prompt TEXT   the text to encode, given on the command line\n"
    "  --mode bpe      the real encoder (default): ids identical to HF tokenizers / tiktoken /\n"
    "                  sentencepiece, with the post-processor's special ids (e.g. Llama's <s>)\n"
    "  --mode greedy   the spec's (4.5) greedy longest match over the tokenizer tables (byte-level BPE\n"
    "                  only); built here even where Sardinas-Patterson rejects the vocabulary, so\n"
    "                  its ids are UNCERTIFIED and may differ from BPE\n"
    "  --ltok N        longest piece the greedy tables hold, in bytes (default 8); also --Ltok\n"
    "  --no-special    do not add the post-processor's special ids (bpe mode)\n"
    "  --decode        also print the decoded text (stderr in plain mode, \"text\" in --json)\n"
    "  --json          one JSON object {\"ids\": [...], \"count\": N, ...} on stdout (docs/cli.md)\n"
    "\n"
    "exit codes: 0 ok, 1 tokenizer or text refused, 2 usage, 3 not implemented (e.g. Unigram),\n"
    "            5 no such file\n";

int cmd_tokenize(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kTokenizeHelp, stdout);
        return kExitOk;
    }
    std::string in = args.get("in"), text_file = args.get("text"), prompt = args.get("prompt");
    bool has_prompt = args.has("prompt"), has_text = args.has("text");
    std::string mode = args.get("mode", "bpe");
    uint32_t ltok = args.get_u32("ltok", 8);
    bool json = args.flag("json"), no_special = args.flag("no-special"), decode = args.flag("decode");
    if (!args.finish("tokenize", 1)) return kExitUsage;
    if (!args.positional().empty()) {
        if (!in.empty()) return report_usage("tokenize", "the model is given twice (--in and '" + args.positional()[0] + "')", json);
        in = args.positional()[0];
    }
    if (in.empty() || has_prompt == has_text)
        return report_usage("tokenize", "needs --in PATH and exactly one of --text FILE / --prompt TEXT", json);
    if (mode != "bpe" && mode != "greedy") return report_usage("tokenize", "--mode is bpe or greedy, not '" + mode + "'", json);

    std::vector<uint32_t> ids;
    std::string source, decoded;
    stk_status s = guard([&] {
        std::string stdin_text;
        MappedFile mapped;
        std::string_view text = prompt;
        if (has_text) {
            if (text_file == "-") {
                char buf[65536];
                size_t n;
                while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) stdin_text.append(buf, n);
                text = stdin_text;
            } else {
                mapped = MappedFile(text_file);
                text = std::string_view(reinterpret_cast<const char *>(mapped.data()), size_t(mapped.size()));
            }
        }
        Vocab v = load_vocab_dir(resolve_model_dir(in));
        source = v.source;
        if (mode == "bpe") {
            Tokenizer t(v);
            t.encode(text, ids, !no_special);
            if (decode) decoded = t.decode(ids.data(), ids.size());
        } else {
            GreedyTables g(v, ltok);
            ids.resize(text.size());
            ids.resize(greedy_encode(*g.tables, reinterpret_cast<const uint8_t *>(text.data()), text.size(), ids.data()));
            if (decode) {
                size_t longest = 0;
                for (const std::string &p : v.pieces) longest = p.size() > longest ? p.size() : longest;
                decoded.resize(ids.size() * longest);
                decoded.resize(fst_decode(*g.tables, ids.data(), ids.size(), reinterpret_cast<uint8_t *>(decoded.data()), decoded.size()));
            }
        }
    });
    if (s != STK_OK) return report_failure("tokenize", s, json);

    std::string list;
    list.reserve(ids.size() * 7 + 64);
    for (size_t i = 0; i < ids.size(); i++) {
        if (i) list += json ? ", " : " ";
        list += std::to_string(ids[i]);
    }
    if (json) {
        Json j = json_result("tokenize", kExitOk, STK_OK, std::to_string(ids.size()) + " tokens (" + mode + ")");
        j.str("tokenizer", source).str("mode", mode);
        if (decode) j.str("text_hex", hex_bytes(decoded));  // exact bytes; "text" shows non-UTF-8 as U+FFFD
        j.unum("count", ids.size()).raw("ids", "[" + list + "]");
        if (decode) j.str("text", decoded);
        j.print();
    } else {
        list += "\n";
        std::fwrite(list.data(), 1, list.size(), stdout);
    }
    if (decode && !json) std::fprintf(stderr, "%s\n", decoded.c_str());
    return kExitOk;
}

}  // namespace stk::cli
