// stk tokenize --in MODEL_DIR (--text FILE | --prompt TEXT) [--mode bpe|greedy] [--json]: encode
// text with a model directory's tokenizer (the real BPE / SentencePiece encoder, or the greedy
// encoder of spec 4.5 over tables built in memory) and print the ids.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli.h"

namespace stk::cli {

namespace {
// Writes ids as decimal text to stdout through a 1 MiB buffer, sep between them: no string of the
// whole list (a 24 MB text gives ~9 M ids, ~50 MB of JSON; building it, then copying it into the
// JSON object, cost more than encoding).
class IdPrinter {
public:
    explicit IdPrinter(const char *sep /* 1 or 2 bytes */) : sep_(sep), sep_len_(std::strlen(sep)) {}
    ~IdPrinter() { flush(); }
    void text(std::string_view s) {
        if (s.size() > kCap - len_) flush();
        if (s.size() > kCap) {
            std::fwrite(s.data(), 1, s.size(), stdout);
            return;
        }
        std::memcpy(buf_ + len_, s.data(), s.size());
        len_ += s.size();
    }
    // The separator and digits of every id below n_ids (at most 6 digits: ids below 10^6), made
    // once: printing an id is then one 8-byte load and store from a table that stays in cache
    // (formatting each of ~9 M ids was 16 % of a 24 MB greedy run).
    void precompute(size_t n_ids) {
        n_ids = std::min<size_t>(n_ids, 1000000);
        text_.resize(n_ids);
        len_of_.resize(n_ids);
        for (size_t id = 0; id < n_ids; id++) {
            char e[24] = {};
            std::memcpy(e, sep_, sep_len_);
            len_of_[id] = uint8_t(sep_len_ + format_u32(uint32_t(id), e + sep_len_));
            std::memcpy(&text_[id], e, 8);
        }
    }
    void ids(const uint32_t *ids, size_t n) {
        char sep[2] = {sep_[0], sep_len_ > 1 ? sep_[1] : ' '};  // both bytes stored, sep_len_ kept
        const size_t table = text_.size();
        for (size_t i = 0; i < n; i++) {
            if (kCap - len_ < 16) flush();
            if (i && ids[i] < table) {
                std::memcpy(buf_ + len_, &text_[ids[i]], 8);
                len_ += len_of_[ids[i]];
                continue;
            }
            if (i) {
                std::memcpy(buf_ + len_, sep, 2);
                len_ += sep_len_;
            }
            len_ += format_u32(ids[i], buf_ + len_);
        }
    }
    void flush() {
        if (len_) std::fwrite(buf_, 1, len_, stdout);
        len_ = 0;
    }

private:
    // Decimal digits of v at out (at most 10 bytes): the table is made with it, and it prints
    // what the table does not hold (the first id, ids past it, outputs too short for a table).
    static size_t format_u32(uint32_t v, char *out) { return size_t(std::to_chars(out, out + 10, v).ptr - out); }
    static constexpr size_t kCap = size_t(1) << 20;
    const char *sep_;
    size_t sep_len_;
    size_t len_ = 0;
    std::vector<uint64_t> text_;  // separator + digits of each id, little-endian bytes
    std::vector<uint8_t> len_of_;
    std::unique_ptr<char[]> buf_owner_{new char[kCap]};  // on the heap: the printer is a local
    char *const buf_ = buf_owner_.get();
};
// The --text file mapped read-only (the encoders read it in place: no copy of a large text).
class TextFile {
public:
    ~TextFile() {
        if (data_ && size_) ::munmap(data_, size_);
    }
    // "" on success, else the message and *status (worded as the library's file errors).
    std::string open(const std::string &path, stk_status *status) {
        auto fail = [&](const std::string &what) {
            const int e = errno;
            *status = e == ENOENT ? STK_E_NOT_FOUND : STK_E_IO;
            return what + ": " + std::strerror(e);
        };
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return fail("cannot open " + path);
        struct stat st;
        if (::fstat(fd, &st) != 0) {
            std::string m = fail("cannot stat " + path);
            ::close(fd);
            return m;
        }
        if (!S_ISREG(st.st_mode)) {
            ::close(fd);
            *status = STK_E_IO;
            return path + ": not a regular file";
        }
        size_ = size_t(st.st_size);
        if (size_) {
            void *p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p == MAP_FAILED) {
                std::string m = fail("cannot map " + path);
                ::close(fd);
                size_ = 0;
                return m;
            }
            data_ = p;
        }
        ::close(fd);
        return "";
    }
    std::string_view view() const { return std::string_view(static_cast<const char *>(data_), data_ ? size_ : 0); }

private:
    void *data_ = nullptr;
    size_t size_ = 0;
};

// Below this many ids, formatting each is cheaper than the table (~0.5 ms for GPT-2's 50257).
constexpr size_t kPrecomputeFrom = 1u << 16;
}  // namespace

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
    "  --mode greedy   the O(1) greedy longest match over the token tables (byte-level BPE only);\n"
    "                  built here even where Sardinas-Patterson rejects the vocabulary, so\n"
    "                  its ids are UNCERTIFIED and may differ from BPE\n"
    "  --ltok N        longest piece the greedy tables hold, in bytes (default 8, at most 64);\n"
    "                  also --Ltok\n"
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
    uint32_t ltok = args.get_count("ltok", 64);
    if (!ltok) ltok = 8;
    bool json = args.flag("json"), no_special = args.flag("no-special"), decode = args.flag("decode");
    if (!args.finish("tokenize", 1)) return kExitUsage;
    if (!args.positional().empty()) {
        if (!in.empty())
            return report_usage("tokenize", "the model is given twice (--in and '" + args.positional()[0] + "')", json);
        in = args.positional()[0];
    }
    if (in.empty() || has_prompt == has_text)
        return report_usage("tokenize", "needs --in PATH and exactly one of --text FILE / --prompt TEXT", json);
    if (mode != "bpe" && mode != "greedy") return report_usage("tokenize", "--mode is bpe or greedy, not '" + mode + "'", json);

    std::string stdin_text;
    TextFile mapped;
    std::string_view text = prompt;
    if (has_text) {
        if (text_file == "-") {
            char buf[65536];
            size_t n;
            while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) stdin_text.append(buf, n);
            text = stdin_text;
        } else {
            stk_status fs = STK_OK;
            std::string err = mapped.open(text_file, &fs);
            if (!err.empty()) {
                const int code = exit_code_for(fs);
                if (json) json_result("tokenize", code, fs, err).print();
                std::fprintf(stderr, "stk tokenize: %s: %s\n", stk_status_str(fs), err.c_str());
                return code;
            }
            text = mapped.view();
        }
    }
    std::string model;
    if (int code = resolve_model_arg("tokenize", in, json, &model)) return code;
    stk_tokenizer_params tp = {};
    tp.struct_size = sizeof tp;
    tp.path = model.c_str();
    tp.kind = mode == "bpe" ? STK_TOKENIZE_BPE : STK_TOKENIZE_GREEDY;
    tp.l_tok = ltok;
    stk_tokenizer *tok = nullptr;
    stk_status s = stk_tokenizer_open(&tp, &tok);
    if (s != STK_OK) return report_failure("tokenize", s, json);
    std::unique_ptr<stk_tokenizer, void (*)(stk_tokenizer *)> hold(tok, stk_tokenizer_close);
    stk_tokenizer_info info = {};
    info.struct_size = sizeof info;
    const uint32_t *ids = nullptr;
    size_t n_ids = 0;
    const char *dec = nullptr;
    size_t dec_len = 0;
    s = stk_tokenizer_get_info(tok, &info);
    if (s == STK_OK)
        s = stk_tokenizer_encode(tok, text.data(), text.size(), no_special ? 0 : STK_TOKENIZE_ADD_SPECIAL, &ids, &n_ids);
    // decode's buffer is the tokenizer's own, apart from encode's ids
    if (s == STK_OK && decode) s = stk_tokenizer_decode(tok, ids, n_ids, &dec, &dec_len);
    if (s != STK_OK) return report_failure("tokenize", s, json);
    const std::string source = info.source;
    const size_t n_vocab = info.vocab_size;
    const std::string decoded = decode ? std::string(dec, dec_len) : std::string();

    if (json) {
        // The object up to "ids", the ids streamed, then the rest: the same bytes Json would print.
        Json j = json_result("tokenize", kExitOk, STK_OK, std::to_string(n_ids) + " tokens (" + mode + ")");
        j.str("tokenizer", source).str("mode", mode);
        if (decode) j.str("text_hex", hex_bytes(decoded));  // exact bytes; "text" shows non-UTF-8 as U+FFFD
        j.unum("count", n_ids).raw("ids", "[");
        std::string head = j.text();
        head.pop_back();  // the closing brace
        Json tail;
        if (decode) tail.str("text", decoded);
        std::string rest = tail.text();  // "{...}": the brace opens nothing here
        rest = "]" + (rest.size() > 2 ? ", " + rest.substr(1) : std::string("}")) + "\n";
        IdPrinter out(", ");
        if (n_ids >= kPrecomputeFrom) out.precompute(n_vocab);
        out.text(head);
        out.ids(ids, n_ids);
        out.text(rest);
    } else {
        IdPrinter out(" ");
        if (n_ids >= kPrecomputeFrom) out.precompute(n_vocab);
        out.ids(ids, n_ids);
        out.text("\n");
    }
    std::fflush(stdout);
    if (decode && !json) std::fprintf(stderr, "%s\n", decoded.c_str());
    return kExitOk;
}

}  // namespace stk::cli
