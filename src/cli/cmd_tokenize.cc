// stk tokenize --in MODEL_DIR (--text FILE | --prompt TEXT) [--mode bpe|greedy] [--json]: encode
// text with a model directory's tokenizer (the real BPE / SentencePiece encoder, or the greedy
// encoder of seed 4.5 over tables built in memory) and print the ids.
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
    "usage: stk tokenize --in MODEL_DIR (--text FILE | --prompt TEXT) [--mode bpe|greedy] [--json]\n"
    "                    [--no-special] [--ltok N] [--decode]\n"
    "\n"
    "Encode text with the tokenizer of a HF model directory (tokenizer.json, else vocab.json +\n"
    "merges.txt or encoder.json + vocab.bpe, else tokenizer.model) and print the token ids.\n"
    "\n"
    "  --in DIR        the model directory\n"
    "  --text FILE     the text to encode ('-': standard input)\n"
    "  --prompt TEXT   the text to encode, given on the command line\n"
    "  --mode bpe      the real encoder (default): ids identical to HF tokenizers / tiktoken /\n"
    "                  sentencepiece, with the post-processor's special ids (e.g. Llama's <s>)\n"
    "  --mode greedy   seed 4.5's greedy longest match over the tokenizer tables (byte-level BPE\n"
    "                  only); built here even where Sardinas-Patterson rejects the vocabulary, so\n"
    "                  its ids are UNCERTIFIED and may differ from BPE\n"
    "  --ltok N        longest piece the greedy tables hold, in bytes (default 8)\n"
    "  --no-special    do not add the post-processor's special ids (bpe mode)\n"
    "  --decode        also print the decoded text (stderr in plain mode, \"text\" in --json)\n"
    "  --json          one JSON object {\"ids\": [...], \"count\": N, ...} on stdout\n"
    "\n"
    "exit codes: 0 ok, 1 tokenizer or text refused, 2 usage, 3 not implemented (e.g. Unigram),\n"
    "            5 no such file\n";

int cmd_tokenize(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help") || args.flag("h")) {
        std::fputs(kTokenizeHelp, stdout);
        return kExitOk;
    }
    std::string in = args.get("in"), text_file = args.get("text"), prompt = args.get("prompt");
    bool has_prompt = args.has("prompt"), has_text = args.has("text");
    std::string mode = args.get("mode", "bpe");
    uint32_t ltok = args.get_u32("ltok", 8);
    bool json = args.flag("json"), no_special = args.flag("no-special"), decode = args.flag("decode");
    if (!args.finish("tokenize")) return kExitUsage;
    if (in.empty() || has_prompt == has_text || !args.positional().empty()) {
        std::fprintf(stderr, "stk tokenize: needs --in DIR and exactly one of --text FILE / --prompt TEXT (see stk tokenize --help)\n");
        return kExitUsage;
    }
    if (mode != "bpe" && mode != "greedy") {
        std::fprintf(stderr, "stk tokenize: --mode is bpe or greedy, not '%s'\n", mode.c_str());
        return kExitUsage;
    }

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
        Vocab v = load_vocab_dir(in);
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

    std::string out;
    out.reserve(ids.size() * 7 + 64);
    if (json) out += "{\"ok\": true, \"tokenizer\": " + json_escape(source) + ", \"mode\": \"" + mode + "\", \"count\": " +
                     std::to_string(ids.size()) + ", \"ids\": [";
    for (size_t i = 0; i < ids.size(); i++) {
        if (i) out += json ? ", " : " ";
        out += std::to_string(ids[i]);
    }
    if (json) {
        out += "]";
        if (decode) out += ", \"text\": " + json_escape(decoded);
        out += "}";
    }
    out += "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (decode && !json) std::fprintf(stderr, "%s\n", decoded.c_str());
    return kExitOk;
}

}  // namespace stk::cli
