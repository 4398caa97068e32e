// stk export --in DIR --out FILE.lwt [--dtype NAME] [--json]: a HuggingFace checkpoint as one
// .lwt weight file (seed 001; seed 002's low-bit dtypes), through stk_export_lwt.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "cli/cleanup.h"
#include "cli/cli.h"
#include "format/lowbit.h"

namespace stk::cli {

static const char kExportHelp[] =
    "usage: stk export --in DIR --out FILE.lwt [--dtype NAME] [--threads N] [--json]\n"
    "\n"
    "Write the weights of a HuggingFace model directory as one memory-mappable .lwt file\n"
    "(docs/format.md, \"LWT weight file\").  GPT-2 is stored as seed 001 says: names\n"
    "\"transformer.*\", Conv1D weights transposed to [out, in], the tied lm_head not stored, the\n"
    "parameter count checked against config.json.  Other families keep their own tensor names.\n"
    "The file appears under its name only when complete; an existing file is never replaced.\n"
    "\n"
    "  --in DIR       model directory (config.json + model.safetensors[.index.json] or\n"
    "                 pytorch_model.bin[.index.json]; safetensors preferred)\n"
    "  --out FILE     the .lwt to create\n"
    "  --dtype NAME   element type of matrices (rank >= 2): float32 (default), float16, bfloat16,\n"
    "                 int8, uint8, int4, uint4, fp4, int2, uint2, ternary, binary.  Vectors\n"
    "                 (biases, norms) stay float32.  Quantisation rules: docs/format.md\n"
    "  --threads N    threads converting and packing (default 1, at most 64); the output bytes\n"
    "                 do not depend on it\n"
    "  --json         one JSON object on stdout instead of the summary\n"
    "\n"
    "exit codes: 0 ok, 1 refused (message on stderr), 2 usage, 5 file system error,\n"
    "130 / 143 interrupted (SIGINT / SIGTERM: the temporary .FILE.tmp.PID is removed first)\n";

int cmd_export(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help") || args.flag("h")) {
        std::fputs(kExportHelp, stdout);
        return kExitOk;
    }
    std::string in = args.get("in");
    std::string out = args.get("out");
    std::string dtype = args.get("dtype", "float32");
    uint32_t threads = args.get_u32("threads", 1);
    bool json = args.flag("json");
    if (!args.finish("export")) return kExitUsage;
    if (in.empty() || out.empty() || !args.positional().empty()) {
        std::fprintf(stderr, "stk export: --in DIR and --out FILE are required (see stk export --help)\n");
        return kExitUsage;
    }
    LwtDType dt;
    if (!parse_lwt_dtype(dtype, &dt)) {
        std::fprintf(stderr, "stk export: unknown --dtype '%s' (see stk export --help)\n", dtype.c_str());
        return kExitUsage;
    }
    stk_export_params p = {};
    p.struct_size = sizeof p;
    p.in_dir = in.c_str();
    p.out_path = out.c_str();
    p.dtype = uint32_t(dt);
    p.threads = threads;
    stk_export_report r = {};
    r.struct_size = sizeof r;
    progress("exporting %s -> %s\n", in.c_str(), out.c_str());
    stk_status s;
    {
        // Ctrl-C / SIGTERM while writing: the temporary file (OutputFile's .NAME.tmp.PID) goes.
        const size_t slash = out.rfind('/');
        const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : out.substr(0, slash);
        const std::string base = slash == std::string::npos ? out : out.substr(slash + 1);
        Cleanup cleanup("export", dir, "." + base + ".tmp." + std::to_string(::getpid()), false, json);
        s = stk_export_lwt(&p, &r);
    }
    if (s != STK_OK) return report_failure("export", s, json);
    if (json)
        std::printf("{\"out\": %s, \"dtype\": \"%s\", \"tensors\": %" PRIu64 ", \"parameters\": %" PRIu64
                    ", \"file_bytes\": %" PRIu64 ", \"data_crc32\": \"%08x\", \"tied_lm_head\": %s}\n",
                    json_escape(out).c_str(), lwt_dtype_name(dt), r.tensors, r.parameters, r.file_bytes, r.data_crc32,
                    r.tied_lm_head ? "true" : "false");
    else
        std::printf("wrote %s: %" PRIu64 " tensors, %" PRIu64 " parameters, %" PRIu64 " bytes, matrices %s, data crc32 %08x%s\n",
                    out.c_str(), r.tensors, r.parameters, r.file_bytes, lwt_dtype_name(dt), r.data_crc32,
                    r.tied_lm_head ? ", lm_head tied to wte (not stored)" : "");
    return kExitOk;
}

}  // namespace stk::cli
