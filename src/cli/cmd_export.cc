// stk export --in PATH --out FILE.lwt [--dtype NAME] [--threads N] [--json]: a HuggingFace
// checkpoint as one .lwt weight file (docs/format.md), through stk_export_lwt.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "cli/cleanup.h"
#include "cli/cli.h"

namespace stk::cli {

static const char kExportHelp[] =
    "usage: stk export --in PATH --out FILE.lwt [--dtype NAME] [--threads N] [--json]\n"
    "       stk export PATH FILE.lwt [options]\n"
    "\n"
    "Write the weights of a HuggingFace model directory as one memory-mappable .lwt file\n"
    "(docs/format.md, \"LWT weight file\").  GPT-2 is stored with the names and layout of the\n"
    "LightwatchAI2 .lwt format (docs/spec/lwt-gpt2-loading.txt): names \"transformer.*\", Conv1D\n"
    "weights transposed to [out, in], the tied lm_head not stored, the parameter count checked\n"
    "against config.json.  Other families keep their own tensor names.  A float32 file is\n"
    "version 1, the layout readers of that format expect; other dtypes write version 2.\n"
    "The file appears under its name only when complete; an existing file is never replaced.\n"
    "\n"
    "  --in PATH      a model directory (config.json + model.safetensors[.index.json] or\n"
    "                 pytorch_model.bin[.index.json]; safetensors preferred); a checkpoint file\n"
    "                 inside one (its directory is used); or a HuggingFace cache folder\n"
    "                 models--ORG--NAME (its refs/main snapshot)\n"
    "  --out FILE     the .lwt to create (a path: the file is written in place and renamed, so\n"
    "                 '-' for stdout is refused)\n"
    "  --dtype NAME   element type of matrices (rank >= 2): float32 (default), float16, bfloat16,\n"
    "                 int8, uint8, int4, uint4, fp4, int2, uint2, ternary, binary (one scale per\n"
    "                 tensor), q4_0, q8_0 (ggml's blocks: a scale per 32 values; every matrix's\n"
    "                 rows must be whole blocks); short names f32, f16, bf16, i8 (or q8), u8,\n"
    "                 i4 (or q4), u4, i2, u2.  Vectors (biases, norms) stay float32.\n"
    "                 Quantisation rules: docs/format.md\n"
    "  --threads N    threads converting and packing (default 1, 1..64); the output bytes do not\n"
    "                 depend on it\n"
    "  --json         one JSON object on stdout instead of the summary (docs/cli.md)\n"
    "\n"
    "exit codes: 0 ok, 1 refused (message on stderr), 2 usage, 5 file system error,\n"
    "130 / 143 interrupted (SIGINT / SIGTERM: the temporary .FILE.tmp.PID is removed first)\n";

// Short names for --dtype (the file and the C API know only the full names and codes).
static const struct {
    const char *alias, *name;
} kDTypeAliases[] = {{"f32", "float32"}, {"fp32", "float32"}, {"f16", "float16"}, {"fp16", "float16"}, {"bf16", "bfloat16"},
                     {"i8", "int8"},     {"q8", "int8"},      {"u8", "uint8"},    {"i4", "int4"},      {"q4", "int4"},
                     {"u4", "uint4"},    {"i2", "int2"},      {"u2", "uint2"}};

static bool parse_dtype_arg(std::string name, uint32_t *out) {
    for (char &c : name) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    for (const auto &a : kDTypeAliases)
        if (name == a.alias) name = a.name;
    return stk_lwt_dtype_parse(name.c_str(), out) == STK_OK;
}

int cmd_export(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help") || args.flag("h")) {
        std::fputs(kExportHelp, stdout);
        return kExitOk;
    }
    std::string in = args.get("in");
    std::string out = args.get("out");
    std::string dtype = args.get("dtype", "float32");
    uint32_t threads = args.get_count("threads", 64);
    bool json = args.flag("json");
    if (!args.finish("export", 2)) return kExitUsage;
    const auto &pos = args.positional();
    if (!pos.empty()) {
        if (!in.empty()) return report_usage("export", "the model is given twice (--in and '" + pos[0] + "')", json);
        in = pos[0];
    }
    if (pos.size() > 1) {
        if (!out.empty()) return report_usage("export", "the output is given twice (--out and '" + pos[1] + "')", json);
        out = pos[1];
    }
    if (in.empty() || out.empty()) return report_usage("export", "--in PATH and --out FILE are required", json);
    if (out == "-")
        return report_usage("export",
                            "--out - (stdout) is not supported: the .lwt is written in place and renamed when "
                            "complete; give a file name",
                            json);
    uint32_t dt = 0;
    if (!parse_dtype_arg(dtype, &dt)) {
        std::string names;
        for (uint32_t c = STK_LWT_F32; stk_lwt_dtype_name(c); c++)
            names += std::string(c > STK_LWT_F32 ? ", " : "") + stk_lwt_dtype_name(c);
        return report_usage(
            "export",
            "unknown --dtype '" + dtype + "': one of " + names + " (short: f32, f16, bf16, i8/q8, u8, i4/q4, u4, i2, u2)", json);
    }
    std::string model_dir;
    if (int code = resolve_model_arg("export", in, json, &model_dir)) return code;
    stk_status s = STK_OK;
    stk_export_params p = {};
    p.struct_size = sizeof p;
    p.in_dir = model_dir.c_str();
    p.out_path = out.c_str();
    p.dtype = dt;
    p.threads = threads;
    stk_export_report r = {};
    r.struct_size = sizeof r;
    progress("exporting %s -> %s\n", model_dir.c_str(), out.c_str());
    {
        // Ctrl-C / SIGTERM while writing: the temporary file (OutputFile's .NAME.tmp.PID) goes.
        const size_t slash = out.rfind('/');
        const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : out.substr(0, slash);
        const std::string base = slash == std::string::npos ? out : out.substr(slash + 1);
        Cleanup cleanup("export", dir, "." + base + ".tmp." + std::to_string(::getpid()), false, json);
        s = stk_export_lwt(&p, &r);
    }
    if (s != STK_OK) return report_failure("export", s, json);
    std::string summary =
        format("wrote %s: %" PRIu64 " tensors, %" PRIu64 " parameters, %" PRIu64 " bytes, matrices %s, data crc32 %08x%s",
               out.c_str(), r.tensors, r.parameters, r.file_bytes, stk_lwt_dtype_name(dt), r.data_crc32,
               r.tied_lm_head ? ", lm_head tied to wte (not stored)" : "");
    if (json)
        json_result("export", kExitOk, STK_OK, summary)
            .str("in", model_dir)
            .str("out", out)
            .str("dtype", stk_lwt_dtype_name(dt))
            .num("version", dt == STK_LWT_F32 ? 1 : 2)
            .unum("tensors", r.tensors)
            .unum("parameters", r.parameters)
            .unum("file_bytes", r.file_bytes)
            .str("data_crc32", hex8(r.data_crc32))
            .boolean("tied_lm_head", r.tied_lm_head)
            .print();
    else std::printf("%s\n", summary.c_str());
    return kExitOk;
}

}  // namespace stk::cli
