// stk convert: run the DAG of the spec (15.2) over a checkpoint directory inside one arena,
// then say what was published: generation, arrays, bytes, per-stage status, tokenizer mode and
// why, disabled features.  --dry-run prints the plan without writing anything.
#include <sys/mman.h>
#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <cstring>
#include <thread>
#include <vector>

#include "cli/cleanup.h"
#include "cli/cli.h"
#include "stk/stk.h"

namespace stk::cli {

static const char kHelp[] =
    "usage: stk convert --in PATH --out ROOT [options]\n"
    "       stk convert PATH ROOT [options]\n"
    "\n"
    "Project the HuggingFace checkpoint in --in (config.json, safetensors or pytorch_model.bin,\n"
    "tokenizer files) into Sera arrays and a manifest, verify them, and publish them as a new\n"
    "generation of the root --out: ROOT/generations/<name>/ {sera_manifest.bin, arrays/}, made\n"
    "current by an atomic swap of ROOT/CURRENT.  The new generation's manifest names the previous\n"
    "current one (prev_hash).  One writer at a time per root; a crashed run leaves the current\n"
    "generation as it was (stk generations ROOT lists them).\n"
    "Ends with a summary on stderr (or in the JSON object): generation, arrays, bytes, the status\n"
    "of every stage, the tokenizer mode and why, the disabled features.\n"
    "\n"
    "  --in PATH       a model directory; a checkpoint file inside one (its directory is used);\n"
    "                  or a HuggingFace cache folder models--ORG--NAME (its refs/main snapshot)\n"
    "  --out ROOT      generations root (created if absent; may already hold generations); not\n"
    "                  a directory that holds a single generation's sera_manifest.bin, nor the\n"
    "                  model directory or a directory inside it\n"
    "  --r N           PRF rank (default 512, at most 4096)\n"
    "  --rv N          overlay rank (default 12, at most 64)\n"
    "  --ltok N        longest token piece in bytes (default 8, at most 64); also --Ltok\n"
    "  --topl N        FFN top-L (default 12, at most 256); also --topL\n"
    "  --memory-fit spec|lsq  RoPE memory: the spec's AR(2) (default) or a least-squares bank\n"
    "                  (up to 6 sections) of the RoPE kernel the weights imply\n"
    "  --calibration STATS  fit to a calibration statistics file (python -m stk calibrate, made\n"
    "                  from this model and some text): the FFN dictionary's values by least\n"
    "                  squares, the PRF whitener to the model's attention logits (the manifest\n"
    "                  records the file's SHA-256 and what each stage fitted).  Statistics of\n"
    "                  another model, or of another shape, are refused.  Without it the\n"
    "                  conversion uses no data (the spec's default)\n"
    "  --profile default|faithful\n"
    "                  default: the spec's arrays.  faithful: the model's own weights (bf16\n"
    "                  matrices, f32 norms and biases, RoPE frequencies) and the manifest's\n"
    "                  runtime block (sinks, window, per-layer attention kind, the family's\n"
    "                  constants) for a runtime that keeps the model; the spec's numeric stages\n"
    "                  are not run (docs/format.md, \"Faithful profile\")\n"
    "  --ffn bf16|int8|q4_0|q8_0\n"
    "                  faithful profile: the FFN and expert matrices' width (default q8_0;\n"
    "                  q4_0 / q8_0 are ggml's blocks of 32 with an f16 scale each: a matrix\n"
    "                  whose rows are not a multiple of 32 stays bf16, with a warning naming\n"
    "                  it; int8 is the .lwt int8 packing with one scale per matrix)\n"
    "  --sinks N       faithful profile: sink positions kept exact (default 4)\n"
    "  --window N      faithful profile: positions kept besides the sinks (default 252)\n"
    "  --policy window|tova|h2o|tova-head\n"
    "                  faithful profile: which positions the state keeps once the window is\n"
    "                  full (default window: the most recent; docs/decisions.md \"Retention\n"
    "                  policies\"); the default of every sequence run on the generation\n"
    "  --recent R      with --policy h2o: the most recent positions never evicted (default\n"
    "                  window / 2; less than the window)\n"
    "  --threads N     worker threads (default 1, at most 1024); the output bytes do not\n"
    "                  depend on it\n"
    "  --partial       publish even if some stages are not implemented yet (they are recorded\n"
    "                  as disabled in the manifest); without it such a run exits with code 3\n"
    "  --allow-uncertified-tokenizer\n"
    "                  build the greedy token tables even when Sardinas-Patterson rejects the\n"
    "                  vocabulary (recorded as uncertified).  Byte-level BPE vocabularies (GPT-2,\n"
    "                  Llama 3, Qwen2, ...) are always rejected, so without this flag they end in\n"
    "                  EXT mode: no token tables, replay needs the model's own tokenizer\n"
    "  --allow-nonfinite   accept NaN/Inf weights (counted and recorded) instead of refusing\n"
    "  --dry-run       print the plan and exit without writing anything (--out is not created):\n"
    "                  the model, arena bytes, expected peak memory, and for every stage the\n"
    "                  arrays it will publish with dtype, dims, payload and file bytes; \"<=\"\n"
    "                  marks an upper bound (a size that depends on the values: MPHF and cuckoo\n"
    "                  blobs, memory sections), \"optional\" an array written only on some data,\n"
    "                  \"disabled\" one the inputs or options switch off (with the reason, e.g.\n"
    "                  EXT mode), then the totals.  With --json: \"arrays\" and \"array_totals\"\n"
    "  --json          print one JSON object on stdout (docs/cli.md)\n"
    "\n"
    "An optional stage that cannot meet one of its numeric bounds (a failed self-check,\n"
    "non-finite results, exhausted retries) disables its feature (its arrays removed, a manifest\n"
    "record says why),\n"
    "is printed as \"disabled\" with the reason, and the conversion completes with exit code 0.\n"
    "\n"
    "exit codes: 0 ok (features may be disabled: see the summary), 1 input refused or a stage\n"
    "failed, 2 usage, 3 a stage is not implemented (without --partial), 5 file system error\n"
    "(a full disk, a read-only generations/: checked before the conversion), 130 / 143\n"
    "interrupted (SIGINT / SIGTERM): the staging directory, and a root this run created, are\n"
    "removed first.  A failed run leaves the root as it was.\n";

struct StageResult {
    stk_stage stage;
    stk_status status;
    std::string message;
    double seconds;
    uint32_t crc = 0;
    uint64_t sha = 0;
    bool disabled = false;  // seed 1.4: the stage's feature was disabled (reason: a manifest record)
};

// On a terminal: "stk convert: [5/10] ffn_collapse  12/32 FFNs  1.9/s  ETA 10 s  6.3 s" refreshed
// while a stage runs, so a long stage shows it is alive and how far it is (the stages that take
// time report their work on the Job: bytes read, layers, FFN units).
class StageTicker {
public:
    StageTicker() {
        if (::isatty(2)) thread_ = std::thread([this] { loop(); });
    }
    ~StageTicker() {
        {
            std::lock_guard<std::mutex> l(m_);
            stop_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    void start(int index, const char *name, const stk_job *job) {
        std::lock_guard<std::mutex> l(m_);
        job_ = job;
        index_ = index;
        name_ = name;
        t0_ = std::chrono::steady_clock::now();
        show(false);  // at once: a stage shorter than a tick is shown too (its work counters are
                      // still the previous stage's until it starts: not shown yet)
    }
    void clear() {
        std::lock_guard<std::mutex> l(m_);
        name_ = nullptr;
        progress("%s", "");
    }

private:
    void loop() {
        std::unique_lock<std::mutex> l(m_);
        while (!stop_) {
            show(true);
            cv_.wait_for(l, std::chrono::milliseconds(250));
        }
    }
    void show(bool with_work) {  // with m_ held
        if (!name_) return;
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        uint64_t done = 0, total = 0;
        const char *unit = "";
        if (!job_ || !with_work || stk_job_progress(job_, &done, &total, &unit) != STK_OK) total = 0;
        if (total == 0) {
            progress("stk convert: [%d/%d] %s  %.1f s", index_, STK_STAGE_COUNT, name_, s);
            return;
        }
        bool bytes = std::strcmp(unit, "B") == 0;
        double rate = s > 0 ? double(done) / s : 0;
        std::string amount = bytes ? human_bytes(done) + " / " + human_bytes(total)
                                   : std::to_string(done) + "/" + std::to_string(total) + " " + unit;
        char per[48] = "";
        if (rate > 0 && !bytes) std::snprintf(per, sizeof per, "  %.2f %s/s", rate, unit);
        std::string speed = rate <= 0 ? std::string("") : bytes ? "  " + human_bytes(uint64_t(rate)) + "/s" : std::string(per);
        char eta[48] = "";
        if (rate > 0 && done < total) std::snprintf(eta, sizeof eta, "  ETA %.0f s", double(total - done) / rate);
        progress("stk convert: [%d/%d] %s  %s%s%s  %.1f s", index_, STK_STAGE_COUNT, name_, amount.c_str(), speed.c_str(), eta,
                 s);
    }
    std::mutex m_;
    std::condition_variable cv_;
    std::thread thread_;
    bool stop_ = false;
    int index_ = 0;
    const char *name_ = nullptr;
    const stk_job *job_ = nullptr;
    std::chrono::steady_clock::time_point t0_;
};

static const char *stage_state(const StageResult &r) {
    if (r.status == STK_OK) return r.disabled ? "disabled" : "ok";
    return r.status == STK_E_NOT_IMPLEMENTED ? "not_implemented" : "failed";
}

static const char *tokenizer_mode_name(uint32_t m) {
    switch (m) {
        case STK_TOKENIZER_NOT_RUN: return "not_run";
        case STK_TOKENIZER_ABSENT: return "absent";
        case STK_TOKENIZER_FST: return "fst";
        case STK_TOKENIZER_FST_UNCERTIFIED: return "fst_uncertified";
        case STK_TOKENIZER_EXT: return "ext";
    }
    return "?";
}

// Features a not-implemented stage leaves disabled (the manifest records the same).
static const char *feature_of_stage(stk_stage s) {
    switch (s) {
        case STK_STAGE_TOKENIZER: return "tokenizer";
        case STK_STAGE_PRF: return "prf";
        case STK_STAGE_OVERLAYS: return "overlays";
        case STK_STAGE_FFN_COLLAPSE: return "linear";
        case STK_STAGE_MPHF_CUCKOO: return "mphf_cuckoo";
        case STK_STAGE_MEMORY_FIT: return "memory";
        case STK_STAGE_BRIDGE_INIT: return "bridge";
        default: return nullptr;
    }
}

// "[L, r, d]" of a planned array.
static std::string dims_text(const stk_plan_array &a) {
    std::string t = "[";
    for (uint32_t i = 0; i < a.rank; i++) t += (i ? ", " : "") + std::to_string(a.dims[i]);
    return t + "]";
}

static const char *presence_name(uint32_t p) {
    return p == STK_PLAN_OPTIONAL ? "optional" : p == STK_PLAN_DISABLED ? "disabled" : "written";
}

// What --dry-run prints, read from the library's plan (stk_plan_*).
struct DryPlan {
    stk_plan *plan = nullptr;  // the arrays' reasons point into it
    ~DryPlan() { stk_plan_close(plan); }
    stk_plan_info info{};
    std::vector<stk_plan_array> arrays;
    stk_plan_stage stages[STK_STAGE_COUNT] = {};
    uint64_t payload = 0;  // exact + bounded
    bool all_exact = true;
};

static stk_status load_plan(const stk_job_params &params, DryPlan &d) {
    stk_status s = stk_plan_open(&params, &d.plan);
    const stk_plan *plan = d.plan;
    d.info.struct_size = sizeof d.info;
    if (s == STK_OK) s = stk_plan_get_info(plan, &d.info);
    d.arrays = read_entries(stk_plan_array_at, plan, d.info.array_count, &s);
    for (int i = 0; s == STK_OK && i < STK_STAGE_COUNT; i++) {
        d.stages[i].struct_size = sizeof d.stages[i];
        s = stk_plan_stage_info(plan, stk_stage(i + 1), &d.stages[i]);
    }
    d.payload = d.info.payload_exact_bytes + d.info.payload_bound_bytes;
    d.all_exact = d.info.payload_bound_bytes == 0;
    return s;
}

static void print_dry_run_json(const std::string &in, const std::string &out, const DryPlan &d, const std::string &msg) {
    const stk_plan_info &i = d.info;
    std::vector<std::string> stages, list;
    for (int k = 0; k < STK_STAGE_COUNT; k++) {
        Json st;
        st.str("stage", stk_stage_name(stk_stage(k + 1))).str("status", d.stages[k].implemented ? "will_run" : "not_implemented");
        st.unum("arrays", d.stages[k].arrays);
        stages.push_back(st.text());
    }
    for (const stk_plan_array &a : d.arrays) {
        std::vector<std::string> shape;
        for (uint32_t k = 0; k < a.rank; k++) shape.push_back(std::to_string(a.dims[k]));
        Json j;
        j.str("name", a.name).str("stage", stk_stage_name(stk_stage(a.stage))).str("dtype", stk_dtype_name(a.dtype));
        j.raw("shape", json_array(shape)).unum("bytes", a.payload_bytes).unum("file_bytes", a.file_bytes);
        j.boolean("exact", a.exact).str("status", presence_name(a.presence)).str("reason", a.reason ? a.reason : "");
        list.push_back(j.text());
    }
    Json t;
    t.unum("arrays", i.arrays_written + i.arrays_optional).unum("written", i.arrays_written).unum("optional", i.arrays_optional);
    t.unum("disabled", i.arrays_disabled).unum("bytes", d.payload).unum("bytes_exact", i.payload_exact_bytes);
    t.unum("bytes_bound", i.payload_bound_bytes).unum("file_bytes", i.file_bytes).boolean("exact", d.all_exact);
    json_result("convert", kExitOk, STK_OK, msg)
        .boolean("dry_run", true)
        .str("in", in)
        .str("out", out)
        .str("model_type", i.model_type)
        .unum("n_layers", i.n_layers)
        .unum("n_tensors", i.n_tensors)
        .unum("n_params", i.n_params)
        .unum("checkpoint_bytes", i.checkpoint_bytes)
        .unum("arena_bytes", i.arena_bytes)
        .unum("largest_layer_f32_bytes", i.largest_unit_f32_bytes)
        .unum("expected_peak_bytes", i.expected_peak_bytes)
        .unum("r", i.r)
        .unum("rv", i.rv)
        .unum("ltok", i.l_tok)
        .unum("topl", i.top_l)
        .raw("stages", json_array(stages))
        .raw("arrays", json_array(list))
        .raw("array_totals", t.text())
        .print();
}

// The head of the text plan: model, arena, peak, options, totals.
static void print_dry_run_head(const std::string &in, const std::string &out, const DryPlan &d) {
    const stk_plan_info &i = d.info;
    const char *le = d.all_exact ? "" : "<= ";
    std::printf("stk convert --dry-run: the plan; nothing is written\n");
    std::printf("in           %s\n", in.c_str());
    std::printf("out          %s (not created)\n", out.c_str());
    std::printf("model        %s, %u layers, %" PRIu64 " parameters, %u tensors\n", i.model_type, i.n_layers, i.n_params,
                i.n_tensors);
    std::printf("checkpoint   %s (%s)\n", human_bytes(i.checkpoint_bytes).c_str(), i.format);
    std::printf("arena        %s (%zu bytes, allocated once before the first stage)\n", human_bytes(i.arena_bytes).c_str(),
                size_t(i.arena_bytes));
    std::printf("peak memory  about %s (arena + the largest layer in f32, %s)\n", human_bytes(i.expected_peak_bytes).c_str(),
                human_bytes(i.largest_unit_f32_bytes).c_str());
    std::printf("options      r %u, rv %u, ltok %u, topl %u, threads %u\n", i.r, i.rv, i.l_tok, i.top_l, i.threads);
    std::printf("output       %" PRIu64 " arrays%s, %s%s payload, %s%s in files (header included)\n",
                i.arrays_written + i.arrays_optional,
                i.arrays_optional ? (" (" + std::to_string(i.arrays_optional) + " optional)").c_str() : "", le,
                human_bytes(d.payload).c_str(), le, human_bytes(i.file_bytes).c_str());
    if (!d.all_exact)
        std::printf("%s\n", wrap("of which " + human_bytes(i.payload_exact_bytes) + " exact and <= " +
                                     human_bytes(i.payload_bound_bytes) + " bounded (sizes that depend on the values)",
                                 13, 100, 13)
                                .insert(0, 13, ' ')
                                .c_str());
    if (i.arrays_disabled)
        std::printf("             %" PRIu64 " array%s disabled (not written, not counted)\n", i.arrays_disabled,
                    i.arrays_disabled == 1 ? "" : "s");
}

// One stage's arrays in the text plan, then its notes (each "; "-separated clause once).
static void print_dry_run_stage(const DryPlan &d, int k) {
    const stk_stage id = stk_stage(k + 1);
    std::printf("%s%s\n", stk_stage_name(id), d.stages[k].implemented ? "" : "  (not implemented: its feature will be disabled)");
    std::vector<std::string> notes;
    for (const stk_plan_array &a : d.arrays) {
        if (a.stage != uint32_t(id)) continue;
        const char *b = a.exact ? "" : "<= ";
        const char *state = a.presence == STK_PLAN_WRITTEN ? "" : a.presence == STK_PLAN_OPTIONAL ? "  optional" : "  disabled";
        // A disabled array of unknown size (no tokenizer file): no sizes to show.
        const bool unknown = a.presence == STK_PLAN_DISABLED && a.payload_bytes == 0;
        std::printf("  %-22s %-5s %-22s %12s %12s%s\n", a.name, stk_dtype_name(a.dtype),
                    unknown ? "-" : (b + dims_text(a)).c_str(), unknown ? "-" : (b + human_bytes(a.payload_bytes)).c_str(),
                    unknown ? "-" : (b + human_bytes(a.file_bytes)).c_str(), state);
        const std::string reason = a.reason ? a.reason : "";
        for (size_t at = 0; at < reason.size();) {
            size_t end = reason.find("; ", at);
            if (end == std::string::npos) end = reason.size();
            std::string clause = reason.substr(at, end - at);
            if (std::find(notes.begin(), notes.end(), clause) == notes.end()) notes.push_back(clause);
            at = end + 2;
        }
    }
    for (const std::string &n : notes) std::printf("    %s\n", wrap("- " + n, 6).c_str());
}

// --dry-run: the plan, from the model described once (config, tensor layout) and the tokenizer
// files: stages, every array each stage will publish with its dtype, dims and bytes (exact, or
// an upper bound marked "<="), arena bytes and the expected peak.  Writes nothing.
static int dry_run(const std::string &in, const std::string &out, const stk_job_params &params, bool json) {
    DryPlan d;
    stk_status s = load_plan(params, d);
    if (s != STK_OK) return report_failure("convert", s, json);
    const stk_plan_info &i = d.info;
    std::string msg = "dry run: nothing written; " + std::to_string(i.n_tensors) + " tensors (" +
                      human_bytes(i.checkpoint_bytes) + ") of " + i.model_type + "; " +
                      std::to_string(i.arrays_written + i.arrays_optional) + " arrays, " + (d.all_exact ? "" : "<= ") +
                      human_bytes(d.payload) + "; arena " + human_bytes(i.arena_bytes) + ", expected peak " +
                      human_bytes(i.expected_peak_bytes);
    if (json) {
        print_dry_run_json(in, out, d, msg);
    } else {
        print_dry_run_head(in, out, d);
        std::printf("\nstages and their arrays, in order (\"<=\": an upper bound; file = payload + %d-byte header):\n",
                    STK_ARRAY_HEADER_BYTES);
        std::printf("  %-22s %-5s %-22s %12s %12s\n", "array", "dtype", "dims", "payload", "file");
        for (int k = 0; k < STK_STAGE_COUNT; k++) print_dry_run_stage(d, k);
    }
    return kExitOk;
}

// The absolute path `path` names once it exists: realpath of its longest existing prefix, the
// rest appended (".." and "." in the rest resolved by hand).
static std::string absolute_path(const std::string &path) {
    std::string head = path, tail;
    while (true) {
        if (char *r = ::realpath(head.c_str(), nullptr)) {
            std::string out = r;
            std::free(r);
            size_t at = 0;
            while (at < tail.size()) {
                size_t next = tail.find('/', at);
                std::string part = tail.substr(at, next == std::string::npos ? std::string::npos : next - at);
                at = next == std::string::npos ? tail.size() : next + 1;
                if (part.empty() || part == ".") continue;
                if (part == "..") {
                    size_t slash = out.find_last_of('/');
                    out = slash == 0 ? "/" : out.substr(0, slash);
                } else {
                    out += (out == "/" ? "" : "/") + part;
                }
            }
            return out;
        }
        size_t slash = head.find_last_of('/');
        if (slash == std::string::npos) {  // relative, nothing of it exists: from the current directory
            tail = head + (tail.empty() ? "" : "/" + tail);
            head = ".";
            continue;
        }
        tail = head.substr(slash + 1) + (tail.empty() ? "" : "/" + tail);
        head = slash == 0 ? "/" : head.substr(0, slash);
    }
}

// --out equal to --in's model directory or below it.
static bool out_inside(const std::string &out, const std::string &model_dir) {
    std::string o = absolute_path(out), m = absolute_path(model_dir);
    return o == m || (o.size() > m.size() && o.compare(0, m.size(), m) == 0 && (m == "/" || o[m.size()] == '/'));
}

namespace {

// What the command line asked for, checked before any work.
struct ConvertOptions {
    stk_job_params p{};
    std::string in, out, model_dir;  // p.in_dir / p.out_dir point into model_dir / out
    std::string calibration;         // p.calibration points into it (null: none)
    bool partial = false, json = false, dry = false;
    bool out_existed = false;      // a root this run creates is removed again if nothing is published
};

// The options and the refusals that need no model: --out first (a refused output should not
// cost a parse of the checkpoint), then the model directory.  Returns -1 to go on, else the
// exit code.
int convert_options(int argc, char **argv, ConvertOptions &o) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kHelp, stdout);
        return kExitOk;
    }
    stk_job_params &p = o.p;
    p.struct_size = sizeof p;
    o.in = args.get("in");
    o.out = args.get("out");
    // Absent: 0, the library's default (stk_job_params); an explicit 0 means nothing and is refused.
    p.r = args.get_count("r", 4096);
    p.rv = args.get_count("rv", 64);
    p.l_tok = args.get_count("ltok", 64);
    p.top_l = args.get_count("topl", 256);
    p.threads = args.get_count("threads", 1024);
    o.partial = args.flag("partial");
    o.json = args.flag("json");
    o.dry = args.flag("dry-run");
    const bool json = o.json;
    if (args.flag("allow-uncertified-tokenizer")) p.flags |= STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER;
    if (args.flag("allow-nonfinite")) p.flags |= STK_JOB_ALLOW_NONFINITE;
    const std::string memory_fit = args.get("memory-fit");
    if (memory_fit == "lsq") p.flags |= STK_JOB_MEMORY_FIT_LSQ;
    if (!memory_fit.empty() && memory_fit != "lsq" && memory_fit != "spec")
        return report_usage("convert", "--memory-fit " + memory_fit + ": expected spec or lsq", json);
    o.calibration = args.get("calibration");
    if (!o.calibration.empty()) p.calibration = o.calibration.c_str();
    const std::string profile = args.get("profile"), ffn = args.get("ffn");
    if (profile == "faithful") p.flags |= STK_JOB_PROFILE_FAITHFUL;
    else if (!profile.empty() && profile != "default")
        return report_usage("convert", "--profile " + profile + ": expected default or faithful", json);
    if (ffn == "int8") p.flags |= STK_JOB_FAITHFUL_FFN_INT8;
    else if (ffn == "q4_0") p.flags |= STK_JOB_FAITHFUL_FFN_Q4_0;
    else if (ffn == "q8_0") p.flags |= STK_JOB_FAITHFUL_FFN_Q8_0;
    else if (!ffn.empty() && ffn != "bf16")
        return report_usage("convert", "--ffn " + ffn + ": expected bf16, int8, q4_0 or q8_0", json);
    if (!ffn.empty() && profile != "faithful") return report_usage("convert", "--ffn needs --profile faithful", json);
    p.sinks = args.get_count("sinks", 65536);
    p.window = args.get_count("window", 16777216);
    if ((p.sinks || p.window) && profile != "faithful")
        return report_usage("convert", "--sinks / --window need --profile faithful", json);
    if (ffn == "bf16") p.flags |= STK_JOB_FAITHFUL_FFN_BF16;
    const std::string policy = args.get("policy");
    if (!policy.empty()) {
        if (profile != "faithful") return report_usage("convert", "--policy needs --profile faithful", json);
        if (!policy_number(policy, &p.policy))
            return report_usage("convert", "--policy " + policy + ": expected window, tova, h2o or tova-head", json);
    }
    p.recent = args.get_count("recent", 16777215);
    if (p.recent && p.policy != STK_SEQ_POLICY_H2O)
        return report_usage("convert", "--recent needs --policy h2o (the other policies keep no recent positions apart)", json);
    if (!args.finish("convert", 2)) return kExitUsage;
    const auto &pos = args.positional();
    if (!pos.empty()) {
        if (!o.in.empty()) return report_usage("convert", "the model is given twice (--in and '" + pos[0] + "')", json);
        o.in = pos[0];
    }
    if (pos.size() > 1) {
        if (!o.out.empty()) return report_usage("convert", "the output is given twice (--out and '" + pos[1] + "')", json);
        o.out = pos[1];
    }
    const std::string &in = o.in, &out = o.out;
    if (in.empty() || out.empty()) return report_usage("convert", "--in PATH and --out DIR are required", json);
    if (out == "-")
        return report_usage("convert", "--out - (stdout) is not supported: --out is a directory (a generations root)", json);

    struct stat st;
    o.out_existed = ::stat(out.c_str(), &st) == 0;
    if (o.out_existed) {
        if (!S_ISDIR(st.st_mode))
            return report_error("convert", STK_E_OUTPUT_EXISTS, format("--out %s exists and is not a directory", out.c_str()),
                                json);
        if (uint32_t kind; stk_path_kind_of(out.c_str(), &kind) == STK_OK && kind == STK_PATH_GENERATION)
            return report_error("convert", STK_E_OUTPUT_EXISTS,
                                format("--out %s already holds a published generation (%s) directly: it is a generation "
                                       "directory, not a generations root; choose a new --out",
                                       out.c_str(), STK_MANIFEST_FILE_NAME),
                                json);
    }
    std::string error;
    stk_status s = resolve_model_path(in, &o.model_dir, &error);
    if (s != STK_OK) return report_error("convert", s, error, json);
    const std::string &model_dir = o.model_dir;
    std::string gguf;
    s = gguf_model_path(model_dir, &gguf);
    if (s != STK_OK) return report_failure("convert", s, json);
    if (gguf.empty() && !file_exists_plain(model_dir + "/config.json"))
        return report_error("convert", STK_E_NOT_FOUND,
                            format("--in %s: no config.json in %s and no .gguf (expected a HuggingFace model directory or a "
                                   "GGUF file)",
                                   in.c_str(), model_dir.c_str()),
                            json);
    if (out_inside(out, model_dir))
        return report_error("convert", STK_E_INVALID_ARGUMENT,
                            format("--out %s is the model directory %s or inside it: the root's CURRENT, LOCK and generations/ "
                                   "would be written among the model's files; choose a directory outside it",
                                   out.c_str(), model_dir.c_str()),
                            json);
    p.in_dir = model_dir.c_str();
    p.out_dir = out.c_str();
    p.flags |= STK_JOB_PUBLISH_ROOT;  // --out is a generations root: the check stage publishes
    return -1;
}

// What the stages did.
struct ConvertRun {
    std::vector<StageResult> results;
    int exit_code = kExitOk;
    stk_status failed_status = STK_OK;
    std::string failed_message;
    bool failure_printed = false;  // the error is printed once, and no summary follows it
};

// Every stage in order, each line printed as it ends (stderr; not with --json).
ConvertRun run_stages(stk_job *job, const ConvertOptions &o) {
    ConvertRun run;
    bool missing = false;
    StageTicker ticker;
    for (int i = 1; i <= STK_STAGE_COUNT; i++) {
        stk_stage sid = stk_stage(i);
        // Without --partial, nothing is published when a stage is missing: stop before the manifest.
        if (sid == STK_STAGE_MANIFEST_EMIT && missing && !o.partial) break;
        ticker.start(i, stk_stage_name(sid), job);
        auto t0 = std::chrono::steady_clock::now();
        stk_status s = stk_stage_run(job, sid);
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        StageResult r{sid, s, s == STK_OK ? "" : stk_last_error(), secs};
        if (s == STK_OK) stk_stage_digest(job, sid, &r.crc, &r.sha);
        stk_stage_info si{};
        si.struct_size = sizeof si;
        if (s == STK_OK && stk_stage_get_info(job, sid, &si) == STK_OK && si.state == STK_STAGE_STATE_DISABLED) {
            r.disabled = true;
            r.message = si.reason;
        }
        stk_job_info ji{};
        ji.struct_size = sizeof ji;
        if (sid == STK_STAGE_TOKENIZER && s == STK_OK && stk_job_get_info(job, &ji) == STK_OK &&
            ji.tokenizer_mode != STK_TOKENIZER_NOT_RUN)
            r.message = ji.tokenizer_reason;
        run.results.push_back(r);
        ticker.clear();
        if (s == STK_E_NOT_IMPLEMENTED) {
            missing = true;
            if (!o.json)
                std::fprintf(stderr, "stk convert: %-24s NOT IMPLEMENTED: nothing written, feature disabled\n",
                             stk_stage_name(sid));
            continue;
        }
        if (s != STK_OK) {
            std::fprintf(stderr, "stk convert: stage %s failed: %s: %s\n", stk_stage_name(sid), stk_status_str(s),
                         r.message.c_str());
            run.failure_printed = true;
            run.exit_code = exit_code_for(s);
            run.failed_status = s;
            run.failed_message = "stage " + std::string(stk_stage_name(sid)) + " failed: " + r.message;
            break;
        }
        if (!o.json && r.disabled)
            std::fprintf(stderr, "stk convert: %-24s DISABLED  %8.3f s  %s\n", stk_stage_name(sid), secs, r.message.c_str());
        else if (!o.json)
            std::fprintf(stderr, "stk convert: %-24s ok  %8.3f s  crc32c %08x  sha256_low64 %016llx\n", stk_stage_name(sid), secs,
                         r.crc, (unsigned long long)r.sha);
    }
    if (run.exit_code == kExitOk && missing && !o.partial) {
        run.exit_code = kExitNotImplemented;
        run.failed_status = STK_E_NOT_IMPLEMENTED;
        run.failed_message =
            "some stages are not implemented; nothing was published (no manifest). Use --partial to "
            "publish a generation with those features disabled";
    }
    return run;
}

// What was decided and published, as the JSON and the summary report it.
struct ConvertReport {
    stk_job_info info{};
    bool tok = false;  // the tokenizer stage ran
    std::string tok_mode, tok_why;
    std::vector<std::string> warnings, disabled;
    std::vector<std::pair<std::string, std::string>> breaches;  // feature, the record's reason
    // What the family does that the arrays cannot represent: parse_tensors' "approx: " records,
    // read back from the published manifest (issue 20: recorded, never silent).
    std::vector<std::string> approximations;
    bool published = false;
    std::string generation, gen_dir, gen_name, previous, summary;
    uint64_t bytes = 0;
    size_t n_arrays = 0;
    uint32_t rv = 0;  // the manifest's overlay rank (the default clamped on a narrow model)
    // --calibration: the SHA-256 of the statistics the stages fitted to and their token count, as
    // the published manifest records them ("calib sha256 HEX" note of parse_tensors); "" without.
    std::string calib_sha256;
    uint64_t calib_tokens = 0;
};

// What the published manifest says: its hashes, arrays and bytes, the overlay rank, and the
// approximations parse_tensors recorded ("approx: " notes).
static void read_published(ConvertReport &rep) {
    stk_manifest *m = nullptr;
    stk_manifest_info mi{};
    mi.struct_size = sizeof mi;
    if (stk_manifest_open(rep.gen_dir.c_str(), &m) != STK_OK || stk_manifest_get_info(m, &mi) != STK_OK) {
        stk_manifest_close(m);
        return;
    }
    rep.published = true;
    rep.generation = hex_hash(mi.curr_hash);
    static const uint8_t zero[32] = {};
    if (std::memcmp(mi.prev_hash, zero, 32) != 0) rep.previous = hex_hash(mi.prev_hash);
    rep.n_arrays = mi.array_count;
    rep.rv = mi.overlays_rv;
    rep.bytes = mi.payload_bytes;
    for (uint32_t i = 0; i < mi.record_count; i++) {
        stk_manifest_record rec{};
        rec.struct_size = sizeof rec;
        if (stk_manifest_record_at(m, i, &rec) != STK_OK) continue;
        std::string text = rec.text;
        if (rec.stage == STK_STAGE_PARSE_TENSORS && rec.kind == STK_RECORD_NOTE && text.rfind("approx: ", 0) == 0)
            rep.approximations.push_back(text.substr(8));
        static const char kCalib[] = "calib sha256 ";
        if (rec.stage == STK_STAGE_PARSE_TENSORS && rec.kind == STK_RECORD_NOTE && text.rfind(kCalib, 0) == 0) {
            rep.calib_sha256 = text.substr(sizeof kCalib - 1, 64);
            rep.calib_tokens = uint64_t(rec.value);
        }
    }
    stk_manifest_close(m);
}

ConvertReport convert_report(stk_job *job, const ConvertOptions &o, const ConvertRun &run) {
    ConvertReport rep;
    stk_job_info &info = rep.info;
    info.struct_size = sizeof info;
    if (stk_job_get_info(job, &info) != STK_OK) info.tokenizer_mode = STK_TOKENIZER_NOT_RUN;
    rep.tok = info.tokenizer_mode != STK_TOKENIZER_NOT_RUN;
    rep.tok_mode = tokenizer_mode_name(info.tokenizer_mode);
    rep.tok_why = info.tokenizer_reason;
    if (info.tokenizer_mode == STK_TOKENIZER_FST && rep.tok_why.empty())
        rep.tok_why = "Sardinas-Patterson certified the vocabulary uniquely decodable: greedy token tables built";
    for (const StageResult &r : run.results) {
        if (r.status == STK_E_NOT_IMPLEMENTED && feature_of_stage(r.stage)) rep.disabled.push_back(feature_of_stage(r.stage));
        if (r.disabled && feature_of_stage(r.stage)) {
            rep.disabled.push_back(feature_of_stage(r.stage));
            rep.breaches.emplace_back(feature_of_stage(r.stage), r.message);
        }
    }
    if (info.tokenizer_mode == STK_TOKENIZER_EXT || info.tokenizer_mode == STK_TOKENIZER_ABSENT)
        rep.disabled.insert(rep.disabled.begin(), "tokenizer_fst");

    const char *published_dir = nullptr;
    if (run.exit_code == kExitOk && stk_job_generation_dir(job, &published_dir) == STK_OK) {
        rep.gen_dir = published_dir;
        rep.gen_name = rep.gen_dir.substr(rep.gen_dir.rfind('/') + 1);
        read_published(rep);
    }
    // The warnings are the library's (the bindings print the same list).
    uint32_t n_warnings = 0;
    if (stk_job_warning_count(job, &n_warnings) == STK_OK)
        for (uint32_t i = 0; i < n_warnings; i++) {
            std::vector<char> text(1024);
            size_t len = 0;
            stk_status ws = stk_job_warning_at(job, i, text.data(), text.size(), &len);
            if (ws != STK_OK && len >= text.size()) {
                text.resize(len + 1);
                ws = stk_job_warning_at(job, i, text.data(), text.size(), &len);
            }
            if (ws == STK_OK) rep.warnings.emplace_back(text.data(), len);
        }
    rep.summary = rep.published ? "published generation " + rep.gen_name + " in " + o.out + ": " + std::to_string(rep.n_arrays) +
                                      " arrays, " + human_bytes(rep.bytes) + ", tokenizer " + rep.tok_mode
                                : run.failed_message;
    return rep;
}

// --json: one object on stdout.
void print_convert_json(const ConvertOptions &o, const ConvertRun &run, const ConvertReport &rep, size_t arena_bytes) {
    std::vector<std::string> stages, warn, dis;
    for (const StageResult &r : run.results) {
        char crc[16], sha[24];
        std::snprintf(crc, sizeof crc, "%08x", r.crc);
        std::snprintf(sha, sizeof sha, "%016llx", (unsigned long long)r.sha);
        Json j;
        j.str("stage", stk_stage_name(r.stage)).str("status", stage_state(r)).real("seconds", r.seconds);
        j.str("crc32c", crc).str("sha256_low64", sha).str("message", r.message);
        stages.push_back(j.text());
    }
    for (const std::string &w : rep.warnings) warn.push_back(json_escape(w));
    for (const std::string &f : rep.disabled) dis.push_back(json_escape(f));
    std::vector<std::string> br, apx;
    for (const std::string &a : rep.approximations) apx.push_back(json_escape(a));
    for (const auto &b : rep.breaches) {
        Json j;
        j.str("feature", b.first).str("reason", b.second);
        br.push_back(j.text());
    }
    Json t;
    t.str("mode", rep.tok_mode).str("reason", rep.tok_why);
    std::string calib = "null";
    if (!rep.calib_sha256.empty()) {
        Json c;
        c.str("file", o.calibration).str("sha256", rep.calib_sha256).unum("tokens", rep.calib_tokens);
        calib = c.text();
    }
    if (rep.tok) t.unum("vocab_size", rep.info.vocab_size).unum("ltok", rep.info.l_tok);
    const bool published = rep.published;
    json_result("convert", run.exit_code, run.failed_status, rep.summary)
        .str("in", o.model_dir)
        .str("out", o.out)
        .boolean("published", published)
        .str_or_null("generation", published ? rep.generation.c_str() : nullptr)
        .str("root", o.out)
        .str_or_null("generation_name", published ? rep.gen_name.c_str() : nullptr)
        .str_or_null("generation_dir", published ? rep.gen_dir.c_str() : nullptr)
        .str_or_null("previous", rep.previous.c_str())
        .unum("arrays", rep.n_arrays)
        .unum("bytes", rep.bytes)
        .unum("arena_bytes", arena_bytes)
        .raw("tokenizer", t.text())
        .raw("calibration", calib)
        .raw("disabled_features", json_array(dis))
        .raw("policy_disabled", json_array(br))
        .raw("approximations", json_array(apx))
        .raw("warnings", json_array(warn))
        .raw("stages", json_array(stages))
        .print();
}

// The summary of a published generation (stderr, also with --json: stdout holds only the JSON).
void print_convert_summary(const ConvertOptions &o, const ConvertReport &rep) {
    std::fprintf(stderr, "stk convert: published generation %s\n", rep.generation.c_str());
    std::fprintf(stderr, "  output      %s (%s, arrays/), now current in %s/%s\n", rep.gen_dir.c_str(), STK_MANIFEST_FILE_NAME,
                 o.out.c_str(), STK_CURRENT_FILE_NAME);
    std::fprintf(stderr, "  previous    %s\n",
                 rep.previous.empty() ? "none (the root's first generation)" : rep.previous.c_str());
    std::fprintf(stderr, "  arrays      %zu, %s (%llu bytes of payload)\n", rep.n_arrays, human_bytes(rep.bytes).c_str(),
                 (unsigned long long)rep.bytes);
    if (!rep.calib_sha256.empty())
        std::fprintf(stderr, "  calibration %s\n",
                     wrap(o.calibration + " (sha256 " + rep.calib_sha256 + ", " + std::to_string(rep.calib_tokens) +
                              " tokens): the stages fitted to these statistics",
                          14)
                         .c_str());
    if (rep.tok)
        std::fprintf(stderr, "  tokenizer   %s\n",
                     wrap(rep.tok_mode + ": " + (rep.tok_why.empty() ? "-" : rep.tok_why), 14).c_str());
    if (!rep.disabled.empty()) {
        std::string d;
        for (const std::string &f : rep.disabled) d += (d.empty() ? "" : " ") + f;
        std::fprintf(stderr, "  disabled    %s\n", wrap(d, 14).c_str());
    }
    // (wrap drops a text's leading spaces: the label is printed before it, as above.)
    for (const auto &b : rep.breaches) std::fprintf(stderr, "  policy      %s\n", wrap(b.first + ": " + b.second, 14).c_str());
    for (const std::string &a : rep.approximations) std::fprintf(stderr, "  approx      %s\n", wrap(a, 14).c_str());
    // Last, so that they are what the user sees: fallbacks that change what was written.
    for (const std::string &w : rep.warnings) std::fprintf(stderr, "%s\n", wrap("stk convert: WARNING: " + w, 4, 100, 0).c_str());
}

}  // namespace

// Options, run, report, print: the phases above, and the arena and job they share.
int cmd_convert(int argc, char **argv) {
    ConvertOptions o;
    if (int code = convert_options(argc, argv, o); code >= 0) return code;
    if (o.dry) return dry_run(o.model_dir, o.out, o.p, o.json);  // the model described once, for the plan and the arena

    size_t arena_bytes = 0;
    stk_status s = stk_job_arena_size(&o.p, &arena_bytes);
    if (s != STK_OK) return report_failure("convert", s, o.json);
    // 2 MiB-aligned and marked for transparent huge pages (a hint, where the kernel has them on
    // madvise): the stages' tables (the cuckoo table, the FFN maps) are read at random over tens of
    // MiB, and with 4 KiB pages most of those reads also missed the TLB.  The bytes do not change.
    constexpr size_t kHuge = size_t(2) << 20;
    size_t alloc_bytes = arena_bytes > SIZE_MAX - kHuge ? 0 : (arena_bytes + kHuge - 1) / kHuge * kHuge;
    void *arena = alloc_bytes || !arena_bytes ? std::aligned_alloc(kHuge, alloc_bytes ? alloc_bytes : kHuge) : nullptr;
    if (arena) ::madvise(arena, alloc_bytes ? alloc_bytes : kHuge, MADV_HUGEPAGE);
    if (!arena)
        return report_error("convert", STK_E_ARENA_TOO_SMALL,
                            format("cannot allocate the %zu-byte arena the conversion of %s needs (stk convert --dry-run "
                                   "shows the plan)",
                                   arena_bytes, o.model_dir.c_str()),
                            o.json);
    // A root whose CURRENT is gone: stk_open points it at the newest generation that verifies
    // (the job's warnings say so).
    // Ctrl-C / SIGTERM from here on: this run's staging directory goes, and a root it created.
    Cleanup cleanup("convert", o.out, std::string(STK_STAGING_PREFIX) + std::to_string(::getpid()) + "-", !o.out_existed, o.json);
    stk_job *job = nullptr;
    s = stk_open(&o.p, arena, arena_bytes, &job);
    if (s != STK_OK) {
        std::free(arena);
        if (!o.out_existed) remove_created_root(o.out);
        return report_failure("convert", s, o.json);
    }

    const ConvertRun run = run_stages(job, o);
    const ConvertReport rep = convert_report(job, o, run);
    if (o.json) print_convert_json(o, run, rep, arena_bytes);
    if (rep.published) {
        print_convert_summary(o, rep);
    } else {
        if (!run.failure_printed) std::fprintf(stderr, "stk convert: %s\n", run.failed_message.c_str());
        stk_close(job);  // releases the lock and removes the staging directory
        std::free(arena);
        if (!o.out_existed) remove_created_root(o.out);
        return run.exit_code;
    }
    stk_close(job);
    std::free(arena);
    return run.exit_code;
}

}  // namespace stk::cli
