// The stk command as a user meets it: every test runs the built binary ($STK_BIN) with real
// arguments and asserts exit codes, what stderr says, and that --json output is exactly one
// valid JSON object with the shared keys of docs/cli.md (parsed with simdjson).
#include <dirent.h>
#include <fcntl.h>
#include <pty.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simdjson.h>

#include <algorithm>

#include "ingest/family.h"
#include "test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/greedy.h"
#include "tokenizer/vocab_greedy.h"
#include "tokenizer/vocab_io.h"

using namespace stk;

namespace {

using Run = test::StkRun;
using test::run_stk;

std::string model() {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    return std::string(root ? root : ".") + "/bindings/testdata/tiny-gpt2";
}

bool exists(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

// stdout must be one JSON object (simdjson refuses trailing content) with the shared keys, and
// "ok"/"exit_code" agreeing with the process.
simdjson::dom::element parse_result(simdjson::dom::parser &parser, const Run &r, const char *command) {
    simdjson::dom::element root;
    auto err = parser.parse(r.out).get(root);
    if (err) fail_msg("not one JSON object (%s): '%s'", simdjson::error_message(err), r.out.c_str());
    assert_true(root.is_object());
    assert_true(std::string_view(root["command"]) == command);
    assert_int_equal(int64_t(root["exit_code"]), r.exit_code);
    assert_true(bool(root["ok"]) == (r.exit_code == 0));
    std::string_view status = root["status"];
    assert_true(status.rfind("STK_", 0) == 0);
    assert_true(root["status_code"].is_int64());
    assert_true(root["message"].is_string());
    if (r.exit_code == 0) assert_true(root["error"].is_null());
    else assert_true(root["error"].is_string());
    return root;
}

std::string fresh_out(const char *tag) { return test::make_temp_dir(tag) + "/out"; }

}  // namespace

// Byte-level BPE without the opt-in: EXT mode, said on stderr and in JSON; a summary follows.
static void convert_says_what_it_did(void **) {
    std::string out = fresh_out("cli-ext");
    Run r = run_stk({"convert", "--in", model(), "--out", out, "--partial"});
    if (r.exit_code != 0) fail_msg("exit %d: %s", r.exit_code, r.err.c_str());
    assert_contains(r.err, "published generation");
    assert_contains(r.err, "arrays      22, 373 KiB");  // the numeric stages' arrays; no token tables
    assert_contains(r.err, "tokenizer   ext: tokenizer: Sardinas-Patterson rejects the 260 bytepieces");
    assert_contains(r.err, "WARNING: tokenizer in EXT mode");
    assert_contains(r.err, "--allow-uncertified-tokenizer");
    assert_contains(r.err, "disabled    tokenizer_fst\n");  // the bridge is built
    assert_true(r.out.empty());                             // stdout is for --json only

    std::string out2 = fresh_out("cli-ext-json");
    Run j = run_stk({"convert", "--in", model(), "--out", out2, "--partial", "--json"});
    simdjson::dom::parser p;
    auto root = parse_result(p, j, "convert");
    assert_true(bool(root["published"]));
    assert_int_equal(uint64_t(root["arrays"]), 22);
    assert_true(std::string_view(root["tokenizer"]["mode"]) == "ext");
    assert_int_equal(uint64_t(root["tokenizer"]["vocab_size"]), 261);
    assert_int_equal(root["warnings"].get_array().size(), 1);  // EXT mode (the numeric stages write arrays)
    assert_int_equal(root["stages"].get_array().size(), 10);
    std::string_view msg = root["stages"].at(1)["message"];
    assert_true(msg.find("EXT mode") != std::string_view::npos);  // the stage's message is not ""
    assert_contains(j.err, "WARNING: tokenizer in EXT mode");     // the warning shows with --json too
    // Same inputs -> the same generation.
    std::string_view gen = root["generation"];
    assert_int_equal(gen.size(), 64);
    assert_contains(r.err, std::string(gen));
}

// With the opt-in the tables are written: the summary's arrays and bytes are what check verifies.
static void convert_uncertified_matches_check(void **) {
    std::string out = fresh_out("cli-fst");
    Run j = run_stk({"convert", model(), out, "--partial", "--allow-uncertified-tokenizer", "--json"});
    simdjson::dom::parser p;
    auto root = parse_result(p, j, "convert");
    assert_true(std::string_view(root["tokenizer"]["mode"]) == "fst_uncertified");
    uint64_t arrays = root["arrays"], bytes = root["bytes"];
    assert_int_equal(arrays, 31);  // 9 tokenizer arrays + 22 of the numeric stages and the bridge
    assert_int_equal(bytes, 385895);
    assert_contains(j.err, "WARNING: token tables built UNCERTIFIED");
    Run c = run_stk({"check", out, "--json"});
    simdjson::dom::parser p2;
    auto croot = parse_result(p2, c, "check");
    assert_int_equal(uint64_t(croot["arrays"]), arrays);
    assert_int_equal(uint64_t(croot["bytes"]), bytes);
    // inspect on the generation: the manifest's arrays, sizes and digests.
    Run i = run_stk({"inspect", out, "--json"});
    simdjson::dom::parser p3;
    auto iroot = parse_result(p3, i, "inspect");
    assert_true(std::string_view(iroot["kind"]) == "generation");
    assert_true(std::string_view(iroot["generation"]) == std::string_view(root["generation"]));
    assert_true(iroot["previous"].is_null());
    uint64_t sum = 0, n = 0;
    for (auto a : iroot["arrays"].get_array()) {
        sum += uint64_t(a["bytes"]);
        n++;
        assert_int_equal(std::string_view(a["crc32c"]).size(), 8);
    }
    assert_int_equal(n, arrays);
    assert_int_equal(sum, bytes);
    assert_true(std::string_view(iroot["tokenizer"]["mode"]) == "fst_uncertified");
    assert_true(std::string_view(iroot["arrays"].at(0)["name"]) == "tokenizer_fst.bin");
    Run it = run_stk({"inspect", "--in", out});
    assert_int_equal(it.exit_code, 0);
    assert_contains(it.out, "tokenizer_fst.bin");
    assert_contains(it.out, "fst_uncertified");
    for (size_t pos = 0, nl; pos < it.out.size(); pos = nl + 1) {  // columns fit 100 characters
        nl = it.out.find('\n', pos);
        if (nl == std::string::npos) nl = it.out.size();
        if (nl - pos > 100) fail_msg("line over 100: %s", it.out.substr(pos, nl - pos).c_str());
    }

    // replay --json: a token that is part of a UTF-8 character is still valid JSON; hex is exact.
    const std::string prompt = "a \xf0\x9f\x98\x80 b";
    Run rp = run_stk({"replay", out, "--prompt", prompt, "--json"});
    simdjson::dom::parser p4;
    auto rroot = parse_result(p4, rp, "replay");
    std::string hex;
    for (auto t : rroot["tokens"].get_array()) {
        hex += std::string(std::string_view(t["hex"]));
        assert_true(bool(t["lookup_round_trip"]));
    }
    assert_string_equal(hex.c_str(),
                        "6120f09f988020"
                        "62");
    assert_true(std::string_view(rroot["tokens"].at(2)["bytes"]) == "\xef\xbf\xbd");  // U+FFFD
    // Modules: every module is walked, the bridge too (its hub bitsets through STK_LOOKUP_HUB).
    assert_int_equal(rroot["disabled_modules"].get_array().size(), 0);
    assert_int_equal(rroot["modules"].get_array().size(), 6);  // every module, with its state
    assert_true(std::string_view(rroot["modules"].at(5)["name"]) == "bridge");
    assert_true(std::string_view(rroot["modules"].at(5)["state"]) == "enabled");
}

// Every failure and usage error with --json: one object on stdout, the right exit code.
static void json_always_one_object(void **) {
    std::string out = fresh_out("cli-json");
    struct Case {
        std::vector<std::string> args;
        const char *command;
        int exit_code;
        const char *error;
    };
    const std::string missing = "/nonexistent/stk-model";
    std::vector<Case> cases = {
        {{"convert", "--json", "--bogus"}, "convert", 2, "usage"},
        {{"convert", "--json", "-q", "--in", model(), "--out", out}, "convert", 2, "usage"},
        {{"convert", "--json", model(), out, "stray"}, "convert", 2, "usage"},
        {{"convert", "--json", "--in", model()}, "convert", 2, "usage"},
        {{"convert", "--json", "--in", missing, "--out", out}, "convert", 5, "io"},
        {{"convert", "--json", "--in", model(), "--out", out, "--r", "x"}, "convert", 2, "usage"},
        {{"convert", "--json", "--in", model(), "--out", out, "--r", "99999"}, "convert", 2, "usage"},
        {{"check", "--json"}, "check", 2, "usage"},
        {{"check", "--json", "a", "b"}, "check", 2, "usage"},
        {{"check", "--json", missing}, "check", 5, "io"},
        {{"replay", "--json", "--out", missing}, "replay", 2, "usage"},
        {{"replay", "--json", missing, "--prompt", "x"}, "replay", 5, "io"},
        {{"inspect", "--json", missing}, "inspect", 5, "io"},
        {{"inspect", "--json", "--in", model(), "extra"}, "inspect", 2, "usage"},
        {{"tokenize", "--json", model()}, "tokenize", 2, "usage"},
        {{"tokenize", "--json", model(), "--prompt", "x", "--mode", "wrong"}, "tokenize", 2, "usage"},
        {{"tokenize", "--json", model(), "--prompt", "x", "--no-special=1"}, "tokenize", 2, "usage"},
        {{"export", "--json"}, "export", 2, "usage"},
        {{"export", "--json", model(), out + ".lwt", "--bogus"}, "export", 2, "usage"},
        {{"export", "--json", missing, out + ".lwt"}, "export", 5, "io"},
        {{"nosuchcommand", "--json"}, "stk", 2, "usage"},
        {{"--version", "--json", "--x"}, "--version", 2, "usage"},
        {{"--list-models", "--json", "--x"}, "--list-models", 2, "usage"},
    };
    for (const Case &c : cases) {
        Run r = run_stk(c.args);
        std::string line;
        for (const std::string &a : c.args) line += a + " ";
        if (r.exit_code != c.exit_code)
            fail_msg("stk %s: exit %d, expected %d; %s", line.c_str(), r.exit_code, c.exit_code, r.err.c_str());
        simdjson::dom::parser p;
        auto root = parse_result(p, r, c.command);
        if (std::string_view(root["error"]) != c.error) fail_msg("stk %s: error %s", line.c_str(), r.out.c_str());
        assert_false(r.err.empty());  // and a human message on stderr
    }
    // Successful commands too (convert/check/replay/inspect are covered above).
    std::vector<std::vector<std::string>> ok = {
        {"tokenize", model(), "--prompt", "Hello \xff world", "--json", "--decode"},
        {"inspect", model(), "--json"},
        {"--list-models", "--json"},
        {"--version", "--json"},
        {"convert", model(), out, "--dry-run", "--json"},
        {"export", model(), test::make_temp_dir("cli-json-export") + "/m.lwt", "--json"},
    };
    for (const auto &args : ok) {
        Run r = run_stk(args);
        assert_int_equal(r.exit_code, 0);
        simdjson::dom::parser p;
        parse_result(p, r, args[0].c_str());
    }
    assert_false(exists(out));  // --dry-run wrote nothing
}

// Arguments are checked before any work, and the missing thing is named.
static void arguments_validated_first(void **) {
    std::string dir = test::make_temp_dir("cli-args");
    // --out naming a file, with a model that does not exist: the --out problem is reported.
    std::string file = dir + "/afile";
    test::write_bytes(file, {1, 2, 3});
    Run r = run_stk({"convert", "--in", "/nonexistent/model", "--out", file});
    assert_int_equal(r.exit_code, 1);
    assert_contains(r.err, "STK_E_OUTPUT_EXISTS");
    assert_contains(r.err, "is not a directory");
    // --out holding a single generation (not a root): refused before the checkpoint is read
    // (the model is missing).
    std::string root = dir + "/gen";
    assert_int_equal(run_stk({"convert", model(), root, "--partial"}).exit_code, 0);
    std::vector<uint8_t> current = test::read_bytes(root + "/CURRENT");
    std::string gen = root + "/generations/" + std::string(current.begin(), current.begin() + 23);
    r = run_stk({"convert", "--in", "/nonexistent/model", "--out", gen});
    assert_int_equal(r.exit_code, 1);
    assert_contains(r.err, "already holds a published generation");
    // A missing --in is named as such, not as a missing config.json.
    r = run_stk({"convert", "--in", dir + "/nope", "--out", dir + "/o2"});
    assert_int_equal(r.exit_code, 5);
    assert_contains(r.err, "--in " + dir + "/nope: no such file or directory");
    assert_false(exists(dir + "/o2"));
    // A directory that is not a model: config.json named.
    r = run_stk({"convert", "--in", dir, "--out", dir + "/o3"});
    assert_int_equal(r.exit_code, 5);
    assert_contains(r.err, "no config.json in " + dir);
    // Unknown options, single-dash words and stray words are usage errors, named.
    r = run_stk({"check", gen, "-q"});
    assert_int_equal(r.exit_code, 2);
    assert_contains(r.err, "unknown option -q");
    r = run_stk({"check", "--out", gen, "foo"});
    assert_int_equal(r.exit_code, 2);
    assert_contains(r.err, "the directory is given twice");
    r = run_stk({"inspect", model(), "foo"});
    assert_int_equal(r.exit_code, 2);
    assert_contains(r.err, "unexpected argument 'foo'");
    r = run_stk({"convert", model(), dir + "/o4", "--threads", "-1"});
    assert_int_equal(r.exit_code, 2);
    assert_contains(r.err, "--threads takes 1..1024, not '-1'");
    // Boolean flags before positionals keep the order (--partial does not swallow the model).
    std::string o5 = dir + "/o5";
    assert_int_equal(run_stk({"convert", "--partial", model(), o5}).exit_code, 0);
    assert_true(exists(o5 + "/CURRENT"));
}

// One spelling for one option across commands: --Ltok = --ltok = --L_tok; --topL = --topl.
static void flag_names_consistent(void **) {
    std::string dir = test::make_temp_dir("cli-flags");
    std::string gens[3];
    const char *spell[3] = {"--Ltok", "--ltok", "--L_tok"};
    for (int i = 0; i < 3; i++) {
        gens[i] = dir + "/g" + std::to_string(i);
        Run r = run_stk({"convert", model(), gens[i], "--partial", "--allow-uncertified-tokenizer", spell[i], "6",
                         i == 1 ? "--topl" : "--topL", "10", "--json"});
        simdjson::dom::parser p;
        auto root = parse_result(p, r, "convert");
        assert_int_equal(uint64_t(root["tokenizer"]["ltok"]), 6);
        // 6 token-table lengths instead of 8: tokenizer_fst.bin + T_1..T_6, beside the numeric
        // stages' 22 arrays
        assert_int_equal(uint64_t(root["arrays"]), 7 + 22);
    }
    for (const char *s : spell) {
        Run r = run_stk({"tokenize", model(), "--prompt", "the theorem", "--mode", "greedy", s, "6"});
        assert_int_equal(r.exit_code, 0);
    }
    Run a = run_stk({"tokenize", model(), "--prompt", "the theorem", "--mode=greedy", "--Ltok=6"});
    Run b = run_stk({"tokenize", "--in", model(), "--prompt", "the theorem", "--mode", "greedy", "--ltok", "6"});
    assert_int_equal(a.exit_code, 0);
    assert_string_equal(a.out.c_str(), b.out.c_str());
}

// `stk tokenize` prints exactly the ids the library computes, in both modes and both output forms
// (the ids are streamed through the command's id table or std::to_chars): the real GPT-2 vocabulary,
// ids of 1 to 5 digits ("!" is id 0).
static void tokenize_prints_the_library_ids(void **) {
    const std::string dir = test::third_party_data("gpt2/hf-dir");
    const std::string line =
        "!\"Hello world! It's 2026: 0 9 10 99 100 999 1000 12345678, na\xc3\xafve caf\xc3\xa9 "
        "\xe2\x82\xac\n\tantidisestablishmentarianism";
    // The line, and the line repeated past 65536 ids, where the command prints from a table of
    // every id's digits instead of formatting each one (given as --text FILE).
    std::string big;
    for (int k = 0; k < 2500; k++) big += line + " " + std::to_string(k * 37) + "\n";
    const std::string big_file = test::make_temp_dir("tokenize_big") + "/text.txt";
    test::write_bytes(big_file, std::vector<uint8_t>(big.begin(), big.end()));
    Vocab v = load_vocab_dir(dir);
    for (const std::string *text_of : {&line, static_cast<const std::string *>(&big)}) {
        const std::string &text = *text_of;
        std::vector<uint32_t> bpe;
        Tokenizer(v).encode(text, bpe, true);
        GreedyTables g(v, 8);
        std::vector<uint32_t> greedy(text.size() + 1);
        greedy.resize(greedy_encode(*g.tables, reinterpret_cast<const uint8_t *>(text.data()), text.size(), greedy.data()));
        const bool from_file = text_of == &big;
        auto source = [&]() -> std::vector<std::string> {
            return {from_file ? "--text" : "--prompt", from_file ? big_file : text};
        };
        for (const auto &[mode, want] : {std::pair<std::string, const std::vector<uint32_t> &>{"bpe", bpe}, {"greedy", greedy}}) {
            assert_true(want.size() > (from_file ? 65536u : 20u));
            assert_int_equal(*std::min_element(want.begin(), want.end()), 0);
            assert_true(*std::max_element(want.begin(), want.end()) >= 10000);
            std::vector<std::string> args = {"tokenize", dir};
            for (const std::string &a : source()) args.push_back(a);
            for (const char *a : {"--mode", mode.c_str(), "--json"}) args.push_back(a);
            Run r = run_stk(args);
            assert_int_equal(r.exit_code, 0);
            simdjson::dom::parser p;
            auto root = parse_result(p, r, "tokenize");
            assert_int_equal(uint64_t(root["count"]), want.size());
            simdjson::dom::array ids = root["ids"];
            assert_int_equal(ids.size(), want.size());
            size_t i = 0;
            for (simdjson::dom::element e : ids) assert_int_equal(uint64_t(e), want[i++]);
            assert_true(std::string_view(root["mode"]) == mode);
            std::string plain;
            for (size_t k = 0; k < want.size(); k++) plain += (k ? " " : "") + std::to_string(want[k]);
            args.pop_back();  // --json
            Run t = run_stk(args);
            assert_int_equal(t.exit_code, 0);
            assert_true(t.out == plain + "\n");
        }
    }
    // No text: no ids.
    Run e = run_stk({"tokenize", dir, "--prompt", "", "--mode", "greedy", "--json"});
    simdjson::dom::parser p;
    auto root = parse_result(p, e, "tokenize");
    assert_int_equal(simdjson::dom::array(root["ids"]).size(), 0);
    assert_string_equal(run_stk({"tokenize", dir, "--prompt", "", "--mode", "greedy"}).out.c_str(), "\n");
}

// --in: a directory, a checkpoint file in it, a HuggingFace cache folder; stk inspect DIR.
static void in_resolution(void **) {
    Run base = run_stk({"inspect", "--in", model(), "--json"});
    assert_int_equal(base.exit_code, 0);
    Run pos = run_stk({"inspect", model(), "--json"});
    assert_string_equal(base.out.c_str(), pos.out.c_str());
    Run file = run_stk({"inspect", model() + "/model.safetensors", "--json"});
    assert_int_equal(file.exit_code, 0);
    simdjson::dom::parser p;
    auto root = parse_result(p, file, "inspect");
    assert_int_equal(uint64_t(root["n_params"]), 11280);
    assert_true(std::string_view(root["kind"]) == "model");
    // A tokenizer file names its directory too.
    Run tf = run_stk({"tokenize", model() + "/vocab.json", "--prompt", "the theorem"});
    Run td = run_stk({"tokenize", model(), "--prompt", "the theorem"});
    assert_int_equal(tf.exit_code, 0);
    assert_string_equal(tf.out.c_str(), td.out.c_str());
    // A file in a directory without config.json: convert names the missing config.json.
    std::string lone = test::make_temp_dir("cli-lone");
    test::write_bytes(lone + "/model.safetensors", {0});
    Run lf = run_stk({"convert", lone + "/model.safetensors", lone + "/out"});
    assert_int_equal(lf.exit_code, 5);
    assert_contains(lf.err, "no config.json in " + lone);
    // models--org--name with refs/main -> snapshots/<rev> (files are links into blobs/ on the hub).
    std::string cache = test::make_temp_dir("cli-hf") + "/models--stk--tiny-gpt2";
    std::string rev = "0123456789abcdef0123456789abcdef01234567";
    for (const char *d : {"", "/refs", "/snapshots", "/blobs"}) assert_int_equal(mkdir((cache + d).c_str(), 0755), 0);
    assert_int_equal(mkdir((cache + "/snapshots/" + rev).c_str(), 0755), 0);
    assert_int_equal(mkdir((cache + "/snapshots/other").c_str(), 0755), 0);
    for (const char *f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
        assert_int_equal(symlink((model() + "/" + f).c_str(), (cache + "/snapshots/" + rev + "/" + f).c_str()), 0);
    // Two snapshots and no refs/main: which one is ambiguous, and the message says how to choose.
    Run amb = run_stk({"inspect", cache});
    assert_int_equal(amb.exit_code, 5);
    assert_contains(amb.err, "2 snapshots");
    test::write_bytes(cache + "/refs/main", std::vector<uint8_t>(rev.begin(), rev.end()));
    Run hf = run_stk({"inspect", cache, "--json"});
    simdjson::dom::parser p2;
    auto hroot = parse_result(p2, hf, "inspect");
    assert_int_equal(uint64_t(hroot["n_params"]), 11280);
    std::string out = fresh_out("cli-hf-out");
    Run conv = run_stk({"convert", "--in", cache, "--out", out, "--partial", "--json"});
    simdjson::dom::parser p3;
    auto croot = parse_result(p3, conv, "convert");
    assert_true(std::string_view(croot["in"]) == cache + "/snapshots/" + rev);
}

// export takes the other verbs' forms (positionals, a file inside the model, a HuggingFace cache
// folder is resolve_model_dir as for convert), --dtype's short names and its error, JSON with the
// shared keys on one line; inspect --json of a .lwt is one line too.
static void export_arguments_and_json(void **) {
    std::string dir = test::make_temp_dir("cli-export");
    Run a = run_stk({"export", model(), dir + "/a.lwt", "--dtype", "f16", "--json"});
    simdjson::dom::parser p;
    auto root = parse_result(p, a, "export");
    assert_int_equal(std::count(a.out.begin(), a.out.end(), '\n'), 1);
    assert_true(std::string_view(root["dtype"]) == "float16");
    assert_int_equal(int64_t(root["version"]), 2);
    assert_int_equal(uint64_t(root["tensors"]), 28);
    Run b = run_stk({"export", "--in", model() + "/model.safetensors", "--out", dir + "/b.lwt", "--dtype", "float16"});
    assert_int_equal(b.exit_code, 0);
    assert_true(test::read_bytes(dir + "/a.lwt") == test::read_bytes(dir + "/b.lwt"));
    // Short names: the same bytes as the full ones.
    for (auto [alias, name] :
         {std::pair<const char *, const char *>{"bf16", "bfloat16"}, {"q8", "int8"}, {"i4", "int4"}, {"F32", "float32"}}) {
        std::string x = dir + "/" + alias + ".lwt", y = dir + "/" + name + ".lwt";
        assert_int_equal(run_stk({"export", model(), x, "--dtype", alias}).exit_code, 0);
        assert_int_equal(run_stk({"export", model(), y, "--dtype", name}).exit_code, 0);
        assert_true(test::read_bytes(x) == test::read_bytes(y));
    }
    Run bad = run_stk({"export", model(), dir + "/z.lwt", "--dtype", "int3"});
    assert_int_equal(bad.exit_code, 2);
    assert_contains(bad.err,
                    "unknown --dtype 'int3': one of float32, float16, bfloat16, int8, uint8, int4, uint4, fp4, int2, "
                    "uint2, ternary, binary, q4_0, q8_0 (short: f32, f16, bf16, i8/q8, u8, i4/q4, u4, i2, u2)");
    // --out - is refused, nothing named "-" appears.
    Run dash = run_stk({"export", model(), "-"});
    assert_int_equal(dash.exit_code, 2);
    assert_contains(dash.err, "--out - (stdout) is not supported");
    assert_false(exists("-"));
    // inspect --json of a .lwt: one line, the shared keys, the version and entry size.
    Run i = run_stk({"inspect", dir + "/float32.lwt", "--json"});
    simdjson::dom::parser p2;
    auto iroot = parse_result(p2, i, "inspect");
    assert_int_equal(std::count(i.out.begin(), i.out.end(), '\n'), 1);
    assert_true(std::string_view(iroot["kind"]) == "lwt");
    assert_int_equal(uint64_t(iroot["version"]), 1);
    assert_int_equal(uint64_t(iroot["entry_bytes"]), 216);
    assert_int_equal(iroot["tensors"].get_array().size(), 28);
    // inspect --json of a model: one line.
    Run im = run_stk({"inspect", model(), "--json"});
    assert_int_equal(std::count(im.out.begin(), im.out.end(), '\n'), 1);
}

// Counts are 1..cap on every verb (0 means nothing; absent = the default), the caps are in the
// help, an option given twice is refused, convert refuses --out inside the model and '-'.
static void counts_and_paths(void **) {
    std::string dir = test::make_temp_dir("cli-counts");
    struct Case {
        std::vector<std::string> args;
        const char *message;
    };
    std::vector<Case> cases = {
        {{"convert", model(), dir + "/o", "--threads", "0"}, "--threads takes 1..1024, not '0'"},
        {{"convert", model(), dir + "/o", "--r", "0"}, "--r takes 1..4096, not '0'"},
        {{"convert", model(), dir + "/o", "--rv", "0"}, "--rv takes 1..64, not '0'"},
        {{"convert", model(), dir + "/o", "--rv", "65"}, "--rv takes 1..64, not '65'"},
        {{"convert", model(), dir + "/o", "--ltok", "0"}, "--ltok takes 1..64, not '0'"},
        {{"convert", model(), dir + "/o", "--topl", "0"}, "--topl takes 1..256, not '0'"},
        {{"export", model(), dir + "/o.lwt", "--threads", "0"}, "--threads takes 1..64, not '0'"},
        {{"tokenize", model(), "--prompt", "x", "--ltok", "0"}, "--ltok takes 1..64, not '0'"},
        {{"convert", "--in", model(), "--in", model(), "--out", dir + "/o"}, "--in is given more than once"},
        {{"convert", model(), "-"}, "--out - (stdout) is not supported"},
    };
    for (const Case &c : cases) {
        Run r = run_stk(c.args);
        if (r.exit_code != 2) fail_msg("%s: exit %d: %s", c.message, r.exit_code, r.err.c_str());
        assert_contains(r.err, c.message);
    }
    assert_false(exists(dir + "/o"));
    assert_false(exists(dir + "/o.lwt"));
    Run h = run_stk({"convert", "--help"});
    for (const char *cap : {"--r N           PRF rank (default 512, at most 4096)", "(default 12, at most 64)",
                            "(default 8, at most 64)", "(default 12, at most 256)", "(default 1, at most 1024)"})
        assert_contains(h.out, cap);
    assert_contains(run_stk({"export", "--help"}).out, "(default 1, 1..64)");
    assert_contains(run_stk({"tokenize", "--help"}).out, "(default 8, at most 64)");
    // convert M M and convert M M/sub: refused, nothing written into the model directory.
    std::string m = dir + "/model";
    assert_int_equal(mkdir(m.c_str(), 0755), 0);
    for (const char *f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"}) {
        std::vector<uint8_t> b = test::read_bytes(model() + "/" + f);
        test::write_bytes(m + "/" + f, b);
    }
    const std::string leaf = dir.substr(dir.find_last_of('/') + 1);
    for (std::string out : {m, m + "/", m + "/sub/root", dir + "/../" + leaf + "/model"}) {
        Run r = run_stk({"convert", m, out});
        if (r.exit_code != 2) fail_msg("convert %s %s: exit %d %s", m.c_str(), out.c_str(), r.exit_code, r.err.c_str());
        assert_contains(r.err, "is the model directory");
        assert_false(exists(m + "/CURRENT"));
        assert_false(exists(m + "/LOCK"));
        assert_false(exists(m + "/generations"));
        assert_false(exists(m + "/sub"));
    }
    // A sibling whose name starts like the model's is not inside it.
    Run ok = run_stk({"convert", m, m + "-root"});
    assert_int_equal(ok.exit_code, 0);
}

// replay in EXT mode shows each token's text from the model's tokenizer (bytes, hex, the line).
static void replay_ext_shows_text(void **) {
    std::string out = fresh_out("cli-replay-ext");
    assert_int_equal(run_stk({"convert", model(), out}).exit_code, 0);
    Run r = run_stk({"replay", out, "--prompt", "the theorem", "--in", model(), "--json"});
    simdjson::dom::parser p;
    auto root = parse_result(p, r, "replay");
    assert_true(std::string_view(root["mode"]) == "ext");
    std::string text, hex;
    for (auto t : root["tokens"].get_array()) {
        text += std::string(std::string_view(t["bytes"])) + "|";
        hex += std::string(std::string_view(t["hex"]));
    }
    assert_string_equal(text.c_str(), "t|he| the|o|r|e|m|");
    assert_string_equal(hex.c_str(),
                        "74"
                        "6865"
                        "20746865"
                        "6f"
                        "72"
                        "65"
                        "6d");
    Run plain = run_stk({"replay", out, "--prompt", "the theorem", "--in", model()});
    assert_int_equal(plain.exit_code, 0);
    assert_contains(plain.out, "  \" the\"\n");
}

// Messages of the C API in the library's words: a missing model directory is named as one.
static void library_messages(void **) {
    std::string dir = test::make_temp_dir("cli-libmsg");
    stk_job_params p{};
    p.struct_size = sizeof p;
    std::string in = dir + "/no-such-model", out = dir + "/out";
    p.in_dir = in.c_str();
    p.out_dir = out.c_str();
    size_t bytes = 0;
    assert_int_equal(stk_job_arena_size(&p, &bytes), STK_E_NOT_FOUND);
    std::string m = stk_last_error();
    assert_contains(m, in + ": no such model directory");
    assert_true(m.find("config.json") == std::string::npos);
    assert_true(m.find("--") == std::string::npos);
    // stk_generation_remove of a chain link: refused in the library's words; the CLI adds --force.
    std::string root = dir + "/root";
    for (int i = 0; i < 3; i++) assert_int_equal(run_stk({"convert", model(), root}).exit_code, 0);
    std::vector<std::string> names;
    if (DIR *d = opendir((root + "/generations").c_str())) {
        while (struct dirent *e = readdir(d))
            if (e->d_name[0] != '.') names.push_back(e->d_name);
        closedir(d);
    }
    std::sort(names.begin(), names.end());
    assert_int_equal(names.size(), 3);
    assert_int_equal(stk_generation_remove(root.c_str(), names[1].c_str()), STK_E_INVALID_ARGUMENT);
    std::string lm = stk_last_error();
    assert_contains(lm, "cuts the chain");
    assert_true(lm.find("--") == std::string::npos);
    Run r = run_stk({"generations", root, "--remove", names[1]});
    assert_int_equal(r.exit_code, 1);
    assert_contains(r.err, "cuts the chain; it is removed only when forced (--force removes it anyway)");
}

// --dry-run: the plan, nothing written; --list-models; --help of every command.
static void plan_models_help(void **) {
    std::string out = fresh_out("cli-plan");
    Run d = run_stk({"convert", model(), out, "--dry-run", "--json"});
    simdjson::dom::parser p;
    auto root = parse_result(p, d, "convert");
    assert_true(bool(root["dry_run"]));
    assert_int_equal(uint64_t(root["n_params"]), 11280);
    assert_int_equal(root["stages"].get_array().size(), 10);
    uint64_t arena = root["arena_bytes"];
    assert_true(uint64_t(root["expected_peak_bytes"]) == arena + uint64_t(root["largest_layer_f32_bytes"]));
    assert_false(exists(out));
    // The arena of the plan is the arena of the run.
    Run c = run_stk({"convert", model(), out, "--partial", "--json"});
    simdjson::dom::parser p2;
    assert_int_equal(uint64_t(parse_result(p2, c, "convert")["arena_bytes"]), arena);
    Run t = run_stk({"convert", model(), out + "2", "--dry-run"});
    assert_int_equal(t.exit_code, 0);
    assert_contains(t.out, "nothing is written");
    assert_contains(t.out, "\nmanifest_emit\ncheck\n");  // every stage is implemented, these two write no array
    assert_true(t.out.find("not implemented") == std::string::npos);
    // The arrays: prf_W exact [L, r, d_model]; the token tables of this byte-level BPE vocabulary
    // disabled (EXT mode without --allow-uncertified-tokenizer); tests/cli/dry_run.sh compares
    // the whole list against real conversions.
    assert_contains(t.out, "  prf_W.bin              f32   [2, 512, 16]               64.0 KiB     64.1 KiB\n");
    assert_contains(t.out, "  T_1.bin                u8    <= [1944]");
    bool prf = false, t1 = false;
    for (auto a : root["arrays"].get_array()) {
        std::string_view name = a["name"];
        if (name == "prf_W.bin") {
            prf = true;
            assert_true(std::string_view(a["stage"]) == "prf_build" && std::string_view(a["dtype"]) == "f32");
            std::vector<uint64_t> shape;
            for (auto d : a["shape"].get_array()) shape.push_back(uint64_t(d));
            assert_true((shape == std::vector<uint64_t>{2, 512, 16}));
            assert_int_equal(uint64_t(a["bytes"]), 2 * 512 * 16 * 4);
            assert_int_equal(uint64_t(a["file_bytes"]), 2 * 512 * 16 * 4 + 128);
            assert_true(bool(a["exact"]) && std::string_view(a["status"]) == "written");
        }
        if (name == "T_1.bin") {
            t1 = true;
            assert_false(bool(a["exact"]));
            assert_true(std::string_view(a["status"]) == "disabled");
            assert_contains(std::string(std::string_view(a["reason"])), "--allow-uncertified-tokenizer");
        }
    }
    assert_true(prf && t1);
    assert_int_equal(uint64_t(root["array_totals"]["arrays"]), 22);
    assert_int_equal(uint64_t(root["array_totals"]["disabled"]), 9);
    assert_int_equal(uint64_t(root["array_totals"]["optional"]), 1);  // bridge_guard.bin

    Run m = run_stk({"--list-models", "--json"});
    simdjson::dom::parser p3;
    auto mroot = parse_result(p3, m, "--list-models");
    bool gpt2 = false;
    size_t n = 0;
    for (auto f : mroot["families"].get_array()) {
        n++;
        if (std::string_view(f["family"]) != "gpt2") continue;
        gpt2 = true;
        std::string roles;
        for (auto r : f["roles"].get_array()) roles += std::string(std::string_view(r)) + " ";
        assert_contains(roles, "EMB ");
        assert_contains(roles, "Q ");
        assert_contains(roles, "POS_EMB ");
    }
    assert_true(gpt2);
    assert_int_equal(n, kFamilyCount - 1);  // the table less "custom"

    struct Help {
        const char *command;
        std::vector<const char *> mentions;
    };
    std::vector<Help> helps = {
        {"convert",
         {"--in PATH", "--out ROOT", "--r N", "--rv N", "--ltok N", "--topl N", "--threads N", "--partial",
          "--allow-uncertified-tokenizer", "--allow-nonfinite", "--dry-run", "--json", "EXT mode", "exit codes"}},
        {"check", {"--out DIR", "--json", "exit codes"}},
        {"replay", {"--out DIR", "--prompt TEXT", "--in PATH", "--json", "exit codes"}},
        {"inspect", {"--in PATH", "--json", "sera_manifest.bin", "exit codes"}},
        {"generations", {"--gc", "--keep N", "--remove NAME", "--force", "--json", "CURRENT", "exit codes"}},
        {"tokenize", {"--in PATH", "--text FILE", "--prompt TEXT", "--mode", "--ltok N", "--no-special", "--decode", "--json"}},
        {"export", {"--in PATH", "--out FILE", "--dtype NAME", "--threads N", "--json", "exit codes"}},
    };
    for (const Help &h : helps) {
        for (const char *form : {"--help", "-h"}) {
            Run r = run_stk({h.command, form});
            assert_int_equal(r.exit_code, 0);
            for (const char *w : h.mentions) assert_contains(r.out, w);
            for (size_t pos = 0, nl; pos < r.out.size(); pos = nl + 1) {
                nl = r.out.find('\n', pos);
                if (nl == std::string::npos) nl = r.out.size();
                if (nl - pos > 100) fail_msg("help line over 100 columns: %s", r.out.substr(pos, nl - pos).c_str());
            }
        }
    }
    Run via_help = run_stk({"help", "convert"});
    assert_int_equal(via_help.exit_code, 0);
    assert_string_equal(via_help.out.c_str(), run_stk({"convert", "--help"}).out.c_str());
    // inspect's tensor table fits 100 columns on the test models.
    for (const std::string &m : {model(), test::test_data("models/llama"), test::test_data("models/qwen2_moe")}) {
        Run r = run_stk({"inspect", m});
        assert_int_equal(r.exit_code, 0);
        for (size_t pos = 0, nl; pos < r.out.size(); pos = nl + 1) {
            nl = r.out.find('\n', pos);
            if (nl == std::string::npos) nl = r.out.size();
            if (nl - pos > 100) fail_msg("inspect %s: line over 100 columns: %s", m.c_str(), r.out.substr(pos, nl - pos).c_str());
        }
    }
    Run top = run_stk({"--help"});
    assert_int_equal(top.exit_code, 0);
    assert_contains(top.out, "--list-models");
    assert_contains(top.out, "--allow-uncertified-tokenizer");
}

// On a terminal, convert shows which stage runs ("[i/10] name  seconds"); off a terminal it does
// not (the other tests read stderr from a file and see no escape codes).
static void progress_on_a_terminal(void **) {
    const char *bin = std::getenv("STK_BIN");
    assert_non_null(bin);
    std::string out = fresh_out("cli-tty");
    std::string m = model();
    int master = -1;
    pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
    assert_true(pid >= 0);
    if (pid == 0) {
        execl(bin, bin, "convert", m.c_str(), out.c_str(), "--partial", (char *)nullptr);
        _exit(127);
    }
    std::string tty;
    char buf[4096];
    ssize_t n;
    while ((n = read(master, buf, sizeof buf)) > 0) tty.append(buf, size_t(n));  // EIO at child exit
    int st = 0;
    waitpid(pid, &st, 0);
    close(master);
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_contains(tty, "stk convert: [1/10] parse_tensors");
    assert_contains(tty, "\r\033[K");
    Run plain = run_stk({"convert", m, out + "2", "--partial"});
    assert_true(plain.err.find("[1/10]") == std::string::npos);
    assert_true(plain.err.find('\033') == std::string::npos);
}

// A GGUF file the user names is the file opened, damaged or not: with a second GGUF beside it,
// a damaged one is refused for its own bytes (as it is alone), not as a folder of two models.
static void damaged_gguf_beside_another(void **) {
    for (const bool beside : {false, true}) {
        std::string dir = test::make_temp_dir("cli-gguf-pair");
        std::vector<uint8_t> bytes = test::read_bytes(test::test_data("gguf/tiny-llama-f32.gguf"));
        bytes[0] = 'X';
        test::write_bytes(dir + "/a.gguf", bytes);
        if (beside) test::write_bytes(dir + "/b.gguf", test::read_bytes(test::test_data("gguf/tiny-gpt2-f32.gguf")));
        for (const char *verb : {"inspect", "convert", "export"}) {
            std::vector<std::string> args = {verb, dir + "/a.gguf"};
            if (std::string(verb) != "inspect") args.push_back(dir + (std::string(verb) == "export" ? "/o.lwt" : "/out"));
            Run r = run_stk(args);
            assert_int_equal(r.exit_code, 1);
            assert_string_equal(r.err.c_str(), ("stk " + std::string(verb) + ": STK_E_BAD_MAGIC: wrong magic: " + dir +
                                                "/a.gguf: offset 0: not a GGUF file (magic is not 'GGUF')\n")
                                                   .c_str());
        }
        // The folder itself still names its two models.
        if (beside) {
            Run f = run_stk({"inspect", dir});
            assert_int_equal(f.exit_code, 2);
            assert_contains(f.err, "holds 2 GGUF models (a.gguf, b.gguf); pass the file to open");
        }
    }
}

// Words (issue 32 item 13): inspect of a quantised GGUF names the stored ggml type and what it is
// read as, and the GGUF metadata (not a config.json) as what the count is checked against; a
// key whose length bytes were flipped is quoted with its bytes escaped; convert's approx lines
// carry the summary's indent, and the EXT tokenizer line says what the proposals are.
static void words_of_issue_32(void **) {
    Run q = run_stk({"inspect", test::test_data("gguf/tiny-llama-q8_0.gguf")});
    assert_int_equal(q.exit_code, 0);
    assert_contains(q.out, "parameters      86336 (= what the GGUF metadata implies)\n");
    assert_contains(q.out, "model.layers.0.self_attn.q_proj.weight         Q              0      - [64, 64]  Q8_0 (read as F32)\n");
    assert_true(q.out.find("config.json") == std::string::npos);
    Run qj = run_stk({"inspect", test::test_data("gguf/tiny-llama-q8_0.gguf"), "--json"});
    assert_contains(qj.out, "\"name\": \"model.layers.0.self_attn.q_proj.weight\", \"role\": \"Q\", \"layer\": 0, \"expert\": null, "
                            "\"shape\": [64, 64], \"dtype\": \"Q8_0\", \"read_as\": \"F32\"");
    Run f = run_stk({"inspect", test::test_data("gguf/tiny-llama-f32.gguf")});
    assert_contains(f.out, "model.layers.0.self_attn.q_proj.weight         Q              0      - [64, 64]  F32\n");
    Run hf = run_stk({"inspect", model()});
    assert_contains(hf.out, "(= what config.json implies)");

    std::string dir = test::make_temp_dir("cli-words");
    std::vector<uint8_t> b = test::read_bytes(test::test_data("gguf/tiny-llama-f32.gguf"));
    assert_int_equal(b[24], 20);  // the first key, general.architecture: its length, 24 bytes more
    b[24] = 44;
    test::write_bytes(dir + "/flip.gguf", b);
    Run k = run_stk({"inspect", dir + "/flip.gguf"});
    assert_int_equal(k.exit_code, 1);
    assert_string_equal(k.err.c_str(), ("stk inspect: STK_E_CORRUPT: malformed data: " + dir +
                                        "/flip.gguf: offset 76: key 'general.architecture\\x08\\x00\\x00\\x00\\x05\\x00\\x00\\x00"
                                        "\\x00\\x00\\x00\\x00llama\\x0c\\x00\\x00\\x00\\x00\\x00\\x00': unknown value type "
                                        "1852139264 (GGUF defines 0..12)\n")
                                           .c_str());

    Run g = run_stk({"convert", test::test_data("gguf/tiny-gemma2-bf16.gguf"), dir + "/g"});
    assert_int_equal(g.exit_code, 0);
    assert_contains(g.err, "\n  approx      sliding window 4 on 1 of 2 layers: the stages treat them as full attention\n"
                           "  approx      attention logits soft-capped at 50 (tanh): the stages use them uncapped\n");
    assert_true(g.err.find("\napprox") == std::string::npos);

    // A SentencePiece (Unigram) tokenizer: EXT mode, and the reason ends in words.
    std::string sp = dir + "/sp";
    assert_int_equal(mkdir(sp.c_str(), 0755), 0);
    for (const char *name : {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                             "model-00002-of-00002.safetensors"})
        test::write_bytes(sp + "/" + name, test::read_bytes(test::test_data(std::string("models/llama/") + name)));
    test::write_bytes(sp + "/tokenizer.model", test::read_bytes(test::test_data("third_party/sentencepiece/unigram-test.model")));
    Run e = run_stk({"convert", sp, dir + "/sp-out"});
    assert_int_equal(e.exit_code, 0);
    std::string flat;
    for (size_t i = 0; i < e.err.size(); i++) {  // the summary's wrapped lines joined
        if (e.err[i] == '\n' && e.err.compare(i + 1, 14, std::string(14, ' ')) == 0) {
            flat += ' ';
            i += 14;
        } else flat += e.err[i];
    }
    assert_contains(flat, "is Unigram, not byte-level BPE: EXT mode (the model's own tokenizer), no token tables built; the "
                          "proposal ids (p_gen: up to 256 likely first tokens, by merge rank or piece score) are still written\n");
    assert_true(e.err.find("proposals emitted") == std::string::npos);
}

int main() {
    std::vector<CMUnitTest> tests = {
        cmocka_unit_test(convert_says_what_it_did),        cmocka_unit_test(convert_uncertified_matches_check),
        cmocka_unit_test(json_always_one_object),          cmocka_unit_test(arguments_validated_first),
        cmocka_unit_test(flag_names_consistent),           cmocka_unit_test(in_resolution),
        cmocka_unit_test(export_arguments_and_json),       cmocka_unit_test(counts_and_paths),
        cmocka_unit_test(replay_ext_shows_text),           cmocka_unit_test(library_messages),
        cmocka_unit_test(tokenize_prints_the_library_ids), cmocka_unit_test(plan_models_help),
        cmocka_unit_test(progress_on_a_terminal),
        cmocka_unit_test(damaged_gguf_beside_another),
        cmocka_unit_test(words_of_issue_32),
    };
    return _cmocka_run_group_tests("cli", tests.data(), tests.size(), nullptr, nullptr);
}
