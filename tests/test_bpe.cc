// Real encoders against the reference ids in tests/data/third_party: GPT-2 byte-level BPE (vocab.json +
// merges.txt, the official encoder.json + vocab.bpe, tokenizer.json), Llama-2 tokenizer.json
// (Prepend/Replace normalizer, byte_fallback, <s> from the post-processor); the hand-written
// GPT-2 pre-tokenizer on the regex's corner cases; decoding.
#include <simdjson.h>  // before cmocka, whose macros (fail, skip) clash with it

#include "test_util.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab_io.h"

using namespace stk;

static std::string g_tmp;

struct Reference {
    std::string text;
    std::vector<uint32_t> ids;
};

static Reference load_reference(const std::string &path) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc = parser.load(path);
    Reference r;
    r.text = std::string(std::string_view(doc["text"]));
    for (auto x : doc["token_ids"].get_array()) r.ids.push_back(uint32_t(uint64_t(x)));
    return r;
}

static void assert_ids_equal(const std::vector<uint32_t> &got, const std::vector<uint32_t> &want) {
    size_t n = std::min(got.size(), want.size());
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            print_error("first difference at token %zu: got %u, want %u\n", i, got[i], want[i]);
            fail();
        }
    assert_int_equal(got.size(), want.size());
}

static std::vector<uint32_t> encode(const Vocab &v, const std::string &text, bool special = true) {
    Tokenizer t(v);
    std::vector<uint32_t> ids;
    t.encode(text, ids, special);
    return ids;
}

static void gpt2_vocab_json_matches_reference(void **) {
    Reference ref = load_reference(test::third_party_data("gpt2/reference_encoded_tokens.json"));
    assert_int_equal(ref.ids.size(), 221);
    Vocab v = load_gpt2_vocab(test::third_party_data("gpt2/hf-dir/vocab.json"), test::third_party_data("gpt2/hf-dir/merges.txt"));
    std::vector<uint32_t> ids = encode(v, ref.text);
    assert_ids_equal(ids, ref.ids);
    Tokenizer t(v);
    assert_string_equal(t.decode(ids.data(), ids.size()).c_str(), ref.text.c_str());
}

static void gpt2_official_files_match_reference(void **) {
    Reference ref = load_reference(test::third_party_data("gpt2/reference_encoded_tokens.json"));
    Vocab v = load_gpt2_vocab(test::third_party_data("gpt2/encoder.json"), test::third_party_data("gpt2/vocab.bpe"));
    assert_ids_equal(encode(v, ref.text), ref.ids);
}

static void gpt2_tokenizer_json_matches_reference(void **) {
    Reference ref = load_reference(test::third_party_data("gpt2/reference_encoded_tokens.json"));
    Vocab v = load_vocab_dir(test::third_party_data("gpt2/hf-dir"));  // picks tokenizer.json
    assert_contains(v.source, "tokenizer.json");
    assert_ids_equal(encode(v, ref.text), ref.ids);
}

static void gpt2_known_ids(void **) {
    Vocab v = load_gpt2_vocab(test::third_party_data("gpt2/encoder.json"), test::third_party_data("gpt2/vocab.bpe"));
    // Values from tiktoken's r50k_base / HF GPT2TokenizerFast.
    assert_ids_equal(encode(v, "Hello world"), {15496, 995});
    assert_ids_equal(encode(v, "Hello.\n\nI'm here"), {15496, 13, 198, 198, 40, 1101, 994});
    assert_ids_equal(encode(v, "a  b"), {64, 220, 275});
    assert_ids_equal(encode(v, "<|endoftext|>"), {50256});
    assert_ids_equal(encode(v, ""), {});
}

static void llama_tokenizer_json_matches_reference(void **) {
    Reference ref = load_reference(test::third_party_data("tokenizer-json/reference_llama_encoded.json"));
    Vocab v = load_tokenizer_json(test::third_party_data("tokenizer-json/llama2.tokenizer.json"));
    std::vector<uint32_t> ids = encode(v, ref.text);
    assert_int_equal(ids[0], 1);  // <s> from the TemplateProcessing post-processor
    assert_ids_equal(ids, ref.ids);
    Tokenizer t(v);
    assert_string_equal(t.decode(ids.data(), ids.size(), true).c_str(), ref.text.c_str());
    // byte fallback: a character outside the vocabulary becomes its UTF-8 bytes <0xNN>
    std::vector<uint32_t> emoji = encode(v, "\xF0\x9F\xA6\x99", false);  // U+1F999
    assert_ids_equal(emoji, {29871, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99});
    assert_string_equal(t.decode(emoji.data(), emoji.size()).c_str(), "\xF0\x9F\xA6\x99");
}

// The pre-tokenizer on the regex's corner cases: contractions, the optional space, the
// whitespace lookahead, numbers, non-ASCII letters and spaces.
static std::vector<std::string> split(const std::string &s) {
    std::vector<std::string> out;
    const uint8_t *p = reinterpret_cast<const uint8_t *>(s.data());
    for (size_t i = 0; i < s.size();) {
        size_t e = tok::gpt2_pretoken_end(p, s.size(), i);
        out.push_back(s.substr(i, e - i));
        i = e;
    }
    return out;
}

static void assert_split(const std::string &s, const std::vector<std::string> &want) {
    std::vector<std::string> got = split(s);
    if (got != want) {
        std::string g;
        for (auto &x : got) g += "[" + x + "]";
        print_error("split of '%s' gave %s\n", s.c_str(), g.c_str());
        fail();
    }
}

static void gpt2_pretokenizer_corner_cases(void **) {
    assert_split("I'm you'll they're", {"I", "'m", " you", "'ll", " they", "'re"});
    assert_split("'S", {"'", "S"});  // case-sensitive contractions
    assert_split("a  b", {"a", " ", " b"});
    assert_split("a   \n b", {"a", "   \n", " b"});
    assert_split("x \n\n", {"x", " \n\n"});
    assert_split("\n\nHi", {"\n", "\n", "Hi"});
    assert_split("abc123 456", {"abc", "123", " 456"});
    assert_split("?!' ok...", {"?!'", " ok", "..."});
    assert_split("caf\xC3\xA9 \xE2\x85\xA7", {"caf\xC3\xA9", " \xE2\x85\xA7"});  // é letter, Ⅷ number (Nl)
    // U+3000 is \s, but the optional space of " ?\p{L}+" is U+0020 only
    assert_split("a\xE3\x80\x80\xE3\x80\x80z", {"a", "\xE3\x80\x80", "\xE3\x80\x80", "z"});
    assert_split("\xFF\xFE", {"\xFF\xFE"});  // invalid UTF-8: "other" bytes
}

static void byte_to_unicode_map(void **) {
    assert_int_equal(tok::byte_to_unicode(' '), 0x120);   // Ġ
    assert_int_equal(tok::byte_to_unicode('\n'), 0x10A);  // Ċ
    assert_int_equal(tok::byte_to_unicode('A'), 'A');
    assert_int_equal(tok::byte_to_unicode(0xAD), 0x143);
    for (int b = 0; b < 256; b++) assert_int_equal(tok::unicode_to_byte(tok::byte_to_unicode(uint8_t(b))), b);
    assert_int_equal(tok::unicode_to_byte(0x20), -1);
}

// Byte-level BPE covers every byte: decode(encode(x)) == x for any bytes, valid UTF-8 or not, and
// encoding is the same with a cold and a warm word cache.
static void gpt2_round_trips_random_bytes(void **) {
    Vocab v = load_gpt2_vocab(test::third_party_data("gpt2/encoder.json"), test::third_party_data("gpt2/vocab.bpe"));
    Tokenizer t(v);
    uint64_t state = 42;
    const char alphabet[] = "aeiou tnsrl'\n\t.,0123456789\xC3\xA9\xE2\x80\x94\xF0\x9F";
    for (int round = 0; round < 200; round++) {
        std::string text;
        size_t len = size_t((state = state * 6364136223846793005ull + 1442695040888963407ull) >> 58);
        for (size_t i = 0; i < len * 8; i++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            text.push_back(round % 4 == 0 ? char(state >> 56) : alphabet[(state >> 33) % (sizeof alphabet - 1)]);
        }
        std::vector<uint32_t> a, b;
        t.encode(text, a);
        t.encode(text, b);
        assert_true(a == b);
        std::string back = t.decode(a.data(), a.size());
        assert_int_equal(back.size(), text.size());
        assert_memory_equal(back.data(), text.data(), text.size());
    }
    assert_true(t.cache_hits() > 0);
}

static void decode_refuses_bad_id(void **) {
    Vocab v = load_gpt2_vocab(test::third_party_data("gpt2/encoder.json"), test::third_party_data("gpt2/vocab.bpe"));
    Tokenizer t(v);
    uint32_t ids[2] = {15496, 50257};
    std::string msg = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { t.decode(ids, 2); });
    assert_contains(msg, "id 50257 at position 1");
}

// hf_text.txt: spaces, tabs, newlines, digits, CJK, emoji, NFD input (pythia's NFC normalizer),
// runs of 36 spaces (pythia's added whitespace tokens), <|endoftext|> and <s> in the text.
// References written by HF tokenizers itself (tests/data/tokenizer/generate.sh).
static void tokenizer_json_matches_hf_tokenizers(void **) {
    std::vector<uint8_t> raw = test::read_bytes(test::test_data("tokenizer/hf_text.txt"));
    std::string text(raw.begin(), raw.end());
    const char *cases[3][2] = {{"tokenizer-json/pythia-410m.tokenizer.json", "tokenizer/hf_pythia_reference.json"},
                               {"tokenizer-json/llama2.tokenizer.json", "tokenizer/hf_llama2_reference.json"},
                               {"gpt2/hf-dir/tokenizer.json", "tokenizer/hf_gpt2_reference.json"}};
    for (auto &c : cases) {
        Vocab v = load_tokenizer_json(test::third_party_data(c[0]));
        simdjson::dom::parser parser;
        simdjson::dom::element doc = parser.load(test::test_data(c[1]));
        std::vector<uint32_t> want;
        for (auto x : doc["token_ids"].get_array()) want.push_back(uint32_t(uint64_t(x)));
        assert_true(want.size() > 100);
        assert_ids_equal(encode(v, text), want);
    }
}

// The other byte-level splits (Llama 3, Qwen2, Qwen3.5, GPT-4o, Tekken, and GPT-2's as a Split)
// against HF tokenizers' Split(Regex) on English, code, Unicode corner cases and random text:
// the pre-token boundaries, then the ids GPT-2's vocabulary gives behind each split read from a
// tokenizer.json Sequence [Split, ByteLevel] (tests/data/tokenizer/split_reference.py).
static void splits_match_hf_tokenizers(void **) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc = parser.load(test::test_data("tokenizer/split_reference.json"));
    std::vector<uint8_t> raw = test::read_bytes(test::third_party_data("gpt2/hf-dir/tokenizer.json"));
    const std::string gpt2_json(raw.begin(), raw.end());
    const std::string old_pre =
        "\"pre_tokenizer\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n"
        "    \"trim_offsets\": true,\n    \"use_regex\": true\n  }";
    const size_t at = gpt2_json.find(old_pre);
    assert_true(at != std::string::npos);
    size_t checked_ends = 0, checked_ids = 0;
    for (auto [name_key, info] : doc["splits"].get_object()) {
        const std::string name{name_key};
        tok::Split split;
        assert_true(tok::split_for_regex(std::string_view(info["regex"]), &split));
        assert_string_equal(tok::split_name(split), name.c_str());
        std::string json = gpt2_json;
        json.replace(at, old_pre.size(), "\"pre_tokenizer\": " + std::string(std::string_view(info["pre_tokenizer"])));
        Vocab v = parse_tokenizer_json(reinterpret_cast<const uint8_t *>(json.data()), json.size(), name + ".tokenizer.json");
        assert_true(v.pipeline.unsupported.empty());
        assert_true(v.model == Vocab::Model::BPE_BYTE_LEVEL);
        assert_true(v.pipeline.byte_level_split == split);
        Tokenizer t(v);
        for (auto entry : doc["texts"].get_array()) {
            const std::string text{std::string_view(entry["text"])};
            const std::string title{std::string_view(entry["name"])};
            std::vector<uint64_t> want, got;
            for (auto x : entry["pretoken_ends"][name].get_array()) want.push_back(uint64_t(x));
            const uint8_t *s = reinterpret_cast<const uint8_t *>(text.data());
            for (size_t i = 0; i < text.size();) got.push_back(i = tok::pretoken_end(split, s, text.size(), i));
            for (size_t k = 0; k < std::min(got.size(), want.size()); k++)
                if (got[k] != want[k]) {
                    size_t from = k ? size_t(want[k - 1]) : 0;
                    print_error("%s, %s: pre-token %zu from byte %zu ends at %llu, HF tokenizers at %llu: '%s'\n", name.c_str(),
                                title.c_str(), k, from, (unsigned long long)got[k], (unsigned long long)want[k],
                                text.substr(from, 24).c_str());
                    fail();
                }
            assert_int_equal(got.size(), want.size());
            checked_ends += want.size();
            std::vector<uint32_t> want_ids, ids;
            for (auto x : entry["token_ids"][name].get_array()) want_ids.push_back(uint32_t(uint64_t(x)));
            t.encode(text, ids, false);
            if (ids != want_ids) print_error("%s, %s: ids differ from HF tokenizers'\n", name.c_str(), title.c_str());
            assert_ids_equal(ids, want_ids);
            assert_string_equal(t.decode(ids.data(), ids.size()).c_str(), text.c_str());
            checked_ids += want_ids.size();
        }
    }
    assert_true(checked_ends > 10000 && checked_ids > 10000);
}

// A Llama-3-style tokenizer in both forms (scripts/make_llama3_tokenizer_fixture.py): its
// tokenizer.json (Llama 3's Split + ByteLevel, BPE ignore_merges true, <|begin_of_text|> from the
// post-processor) against HF tokenizers, its GGUF (tokenizer.ggml.pre llama-bpe) against
// transformers' GGUF loader, on English, code and Unicode text.  Eight pre-tokens of the texts
// are tokens no merge builds: ignore_merges gives their own ids, the GGUF loader the merged pieces.
static std::string run(const std::string &args, int *rc);

static void llama3_bpe_fixture_matches_references(void **) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc = parser.load(test::test_data("tokenizer/llama3-bpe/reference.json"));
    Vocab json = load_tokenizer_json(test::test_data("tokenizer/llama3-bpe/tokenizer.json"));
    Vocab gguf = load_gguf_vocab(test::test_data("tokenizer/llama3-bpe/gguf/llama-bpe.gguf"));
    assert_true(json.ignore_merges && !gguf.ignore_merges);
    assert_true(json.pipeline.byte_level_split == tok::Split::LLAMA3 && gguf.pipeline.byte_level_split == tok::Split::LLAMA3);
    assert_int_equal(json.bos_id, int64_t(doc["bos_id"]));
    Tokenizer tj(json), tg(gguf);
    size_t texts = 0, differ = 0;
    for (auto entry : doc["texts"].get_array()) {
        const std::string file{std::string_view(entry["text_file"])};
        std::vector<uint8_t> raw = test::read_bytes(test::test_data("tokenizer/" + file));
        const std::string text(raw.begin(), raw.end());
        const std::pair<Tokenizer *, const char *> cases[] = {{&tj, "tokenizer_json"}, {&tg, "gguf"}};
        for (auto [t, key] : cases)
            for (bool special : {true, false}) {
                std::vector<uint32_t> want, got;
                std::string k = std::string(key) + (special ? "" : "_no_special");
                for (auto x : entry[k].get_array()) want.push_back(uint32_t(uint64_t(x)));
                t->encode(text, got, special);
                if (got != want) print_error("llama3-bpe %s, %s: ids differ from the reference\n", file.c_str(), k.c_str());
                assert_ids_equal(got, want);
                assert_true(want.size() > 100);
                if (!special) assert_string_equal(t->decode(got.data(), got.size()).c_str(), text.c_str());
            }
        std::vector<uint32_t> a, b;
        for (auto x : entry["tokenizer_json"].get_array()) a.push_back(uint32_t(uint64_t(x)));
        for (auto x : entry["gguf"].get_array()) b.push_back(uint32_t(uint64_t(x)));
        differ += a != b;
        texts++;
    }
    assert_int_equal(texts, 4);
    assert_int_equal(differ, 4);  // every text holds one of the eight whole-word tokens
    // The same through the CLI, for both files: a Llama 3 GGUF and tokenizer.json are encoded, not refused.
    for (const char *key : {"gguf", "tokenizer_json"}) {
        int rc = 0;
        const std::string file = std::string(key) == "gguf" ? "gguf/llama-bpe.gguf" : "tokenizer.json";
        std::string out = run("tokenize --in " + test::test_data("tokenizer/llama3-bpe/" + file) + " --text " +
                                  test::test_data("tokenizer/sp_text.txt"),
                              &rc);
        assert_int_equal(rc, 0);
        std::string want;
        for (auto entry : doc["texts"].get_array())
            if (std::string_view(entry["text_file"]) == "sp_text.txt")
                for (auto x : entry[key].get_array()) want += (want.empty() ? "" : " ") + std::to_string(uint64_t(x));
        assert_string_equal(out.c_str(), (want + "\n").c_str());
    }
}

// ignore_merges is a lookup of the pre-token's bytes: byte-level vocabularies only.  Llama 2's
// tokenizer.json (Metaspace, byte_fallback) with the flag set is read and refused for encoding.
static void ignore_merges_needs_byte_level(void **) {
    std::vector<uint8_t> raw = test::read_bytes(test::third_party_data("tokenizer-json/llama2.tokenizer.json"));
    std::string json(raw.begin(), raw.end());
    size_t at = json.find("\"byte_fallback\": true");
    assert_true(at != std::string::npos);
    json.insert(at, "\"ignore_merges\": true, ");
    Vocab v = parse_tokenizer_json(reinterpret_cast<const uint8_t *>(json.data()), json.size(), "l2.tokenizer.json");
    assert_true(v.model == Vocab::Model::BPE_SENTENCEPIECE);
    std::string msg = test::expect_error(STK_E_UNSUPPORTED, [&] { Tokenizer t(v); });
    assert_contains(msg, "BPE ignore_merges without a ByteLevel pre-tokenizer is not supported");
}

static void split_names(void **) {
    tok::Split s = tok::Split::GPT2;
    const std::pair<const char *, tok::Split> want[] = {
        {"llama-bpe", tok::Split::LLAMA3},       {"llama3", tok::Split::LLAMA3}, {"llama-v3", tok::Split::LLAMA3},
        {"smaug-bpe", tok::Split::LLAMA3},       {"dbrx", tok::Split::LLAMA3},   {"qwen2", tok::Split::QWEN2},
        {"deepseek-r1-qwen", tok::Split::QWEN2}, {"qwen35", tok::Split::QWEN35}, {"gpt-4o", tok::Split::GPT4O},
        {"llama4", tok::Split::GPT4O},           {"tekken", tok::Split::TEKKEN},
        // llama.cpp's names for the same regexes, which transformers' table lacks
        {"glm4", tok::Split::LLAMA3},            {"chatglm-bpe", tok::Split::LLAMA3}, {"stablelm2", tok::Split::QWEN2},
        {"hunyuan", tok::Split::QWEN2},          {"grok-2", tok::Split::QWEN2}};
    for (const auto &[pre, split] : want) {
        assert_true(tok::split_for_gguf_pre(pre, &s));
        assert_true(s == split);
    }
    // Names transformers' GGUF loader does not map keep GPT-2's split (its GPT2Tokenizer default).
    assert_false(tok::split_for_gguf_pre("default", &s));
    assert_false(tok::split_for_gguf_pre("gpt2", &s));
    // Names llama.cpp splits with another regex than these six also keep GPT-2's, as transformers'
    // loader does (docs/decisions.md lists them): SmolLM's, DeepSeek-V3's, Command-R's, ...
    for (const char *pre : {"smollm", "deepseek-v3", "deepseek-llm", "command-r", "seed-coder", "bailingmoe"})
        assert_false(tok::split_for_gguf_pre(pre, &s));
    assert_false(tok::split_for_regex("\\s+", &s));
}

// A tokenizer.json Split that stk does not implement is read (the vocabulary serves the stage)
// but encoding is refused, naming the regex.
static void unknown_split_is_refused(void **) {
    std::vector<uint8_t> raw = test::read_bytes(test::third_party_data("gpt2/hf-dir/tokenizer.json"));
    std::string json(raw.begin(), raw.end());
    const std::string old_pre =
        "\"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n    \"trim_offsets\": true,\n    \"use_regex\": true";
    size_t at = json.find(old_pre);
    assert_true(at != std::string::npos);
    json.replace(
        at, old_pre.size(),
        "\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\p{N}{1,5}|x\"}, "
        "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"use_regex\": false}]");
    Vocab v = parse_tokenizer_json(reinterpret_cast<const uint8_t *>(json.data()), json.size(), "odd.tokenizer.json");
    assert_true(v.model == Vocab::Model::BPE_BYTE_LEVEL);
    std::string msg = test::expect_error(STK_E_UNSUPPORTED, [&] { Tokenizer t(v); });
    assert_contains(msg, "odd.tokenizer.json: pre-tokenizer Split with the regex '\\p{N}{1,5}|x' is not supported");
}

// stk tokenize end to end: ids, JSON shape, exit codes.
static std::string run(const std::string &args, int *rc) {
    const char *bin = std::getenv("STK_BIN");
    std::string cmd = std::string(bin ? bin : "stk") + " " + args + " 2>/dev/null";
    FILE *p = popen(cmd.c_str(), "r");
    assert_non_null(p);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

static void cli_tokenize(void **) {
    int rc;
    std::string gpt2 = test::third_party_data("gpt2/hf-dir");
    std::string out = run("tokenize --in " + gpt2 + " --prompt \"Hello world, I'm here.\"", &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out.c_str(), "15496 995 11 314 1101 994 13\n");
    out = run("tokenize --in " + gpt2 + " --prompt \"Hello world\" --json --decode", &rc);
    assert_int_equal(rc, 0);
    assert_contains(out, "\"count\": 2, \"ids\": [15496, 995], \"text\": \"Hello world\"}");
    // Llama's tokenizer.json: <s> first unless --no-special
    std::string llama = g_tmp + "/llama";
    mkdir(llama.c_str(), 0755);
    test::write_bytes(llama + "/tokenizer.json",
                      test::read_bytes(test::third_party_data("tokenizer-json/llama2.tokenizer.json")));
    out = run("tokenize --in " + llama + " --prompt \"Hello world\"", &rc);
    assert_string_equal(out.c_str(), "1 15043 3186\n");
    out = run("tokenize --in " + llama + " --prompt \"Hello world\" --no-special", &rc);
    assert_string_equal(out.c_str(), "15043 3186\n");
    // greedy over a SentencePiece vocabulary: refused (EXT mode), exit 1 with the reason
    out = run("tokenize --in " + llama + " --prompt x --mode greedy --json", &rc);
    assert_int_equal(rc, 1);
    assert_contains(out, "byte-level BPE");
    // greedy over GPT-2: whole words that are pieces of <= 8 bytes come out as one id
    out = run("tokenize --in " + gpt2 + " --prompt \"Hello world\" --mode greedy", &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out.c_str(), "15496 995\n");
    // text from a file and from standard input
    std::string f = g_tmp + "/text.txt";
    test::write_bytes(f, {'H', 'e', 'l', 'l', 'o', '\n'});
    out = run("tokenize --in " + gpt2 + " --text " + f, &rc);
    assert_string_equal(out.c_str(), "15496 198\n");
    out = run("tokenize --in " + gpt2 + " --text - < " + f, &rc);
    assert_string_equal(out.c_str(), "15496 198\n");
    out = run("tokenize --help", &rc);
    assert_int_equal(rc, 0);
    assert_contains(out, "--mode greedy");
    // usage and missing files
    run("tokenize --in " + gpt2, &rc);
    assert_int_equal(rc, 2);
    run("tokenize --in " + gpt2 + " --prompt x --mode fast", &rc);
    assert_int_equal(rc, 2);
    run("tokenize --in /nonexistent --prompt x", &rc);
    assert_int_equal(rc, 5);
    run("tokenize --in " + gpt2 + " --text /nonexistent/file", &rc);
    assert_int_equal(rc, 5);
}

static void unigram_encoding_is_not_implemented(void **) {
    Vocab v = load_tokenizer_json(test::third_party_data("tokenizer-json/t5-small.tokenizer.json"));
    std::string msg = test::expect_error(STK_E_NOT_IMPLEMENTED, [&] { Tokenizer t(v); });
    assert_contains(msg, "Unigram");
}

int main() {
    g_tmp = test::make_temp_dir("bpe");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_vocab_json_matches_reference),
        cmocka_unit_test(gpt2_official_files_match_reference),
        cmocka_unit_test(gpt2_tokenizer_json_matches_reference),
        cmocka_unit_test(gpt2_known_ids),
        cmocka_unit_test(llama_tokenizer_json_matches_reference),
        cmocka_unit_test(gpt2_pretokenizer_corner_cases),
        cmocka_unit_test(byte_to_unicode_map),
        cmocka_unit_test(gpt2_round_trips_random_bytes),
        cmocka_unit_test(decode_refuses_bad_id),
        cmocka_unit_test(tokenizer_json_matches_hf_tokenizers),
        cmocka_unit_test(splits_match_hf_tokenizers),
        cmocka_unit_test(llama3_bpe_fixture_matches_references),
        cmocka_unit_test(ignore_merges_needs_byte_level),
        cmocka_unit_test(split_names),
        cmocka_unit_test(unknown_split_is_refused),
        cmocka_unit_test(cli_tokenize),
        cmocka_unit_test(unigram_encoding_is_not_implemented),
    };
    return cmocka_run_group_tests_name("bpe", tests, nullptr, nullptr);
}
