// stk: the command-line front of libstk.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/cleanup.h"
#include "cli/cli.h"

using namespace stk::cli;

static const char kUsage[] =
    "usage: stk <command> [options]\n"
    "\n"
    "commands:\n"
    "  convert   project an HF checkpoint directory into Sera arrays and a manifest, published\n"
    "            as a new generation of a generations root\n"
    "  check     verify a root's current generation and its chain, or one generation directory\n"
    "  replay    run the O(1) per-token path of a published output over a prompt\n"
    "  inspect   show what a checkpoint directory holds (architecture, tensors, roles), or what a\n"
    "            published generation holds (manifest, arrays, sizes, digests)\n"
    "  tokenize  encode text with a model directory's tokenizer\n"
    "  generate  continue a prompt with the library's own Transformer forward (greedy or sampled)\n"
    "  export    write an HF checkpoint's weights as one .lwt weight file\n"
    "  generations  list the generations of a root; --gc / --remove NAME remove old ones\n"
    "\n"
    "  stk <command> --help   options of one command (also: stk help <command>)\n"
    "  stk --list-models      model families with built-in presets and the roles they map\n"
    "  stk --version          library and tool version\n"
    "\n"
    "Paths may be given plainly: stk inspect DIR, stk convert MODEL OUT, stk check OUT.\n"
    "Option names ignore case and '_' (--Ltok = --ltok).  --json makes every command print\n"
    "exactly one JSON object on stdout (keys in docs/cli.md); messages go to stderr.\n"
    "\n"
    "Byte-level BPE vocabularies (GPT-2, Llama 3, Qwen2, ...) end in EXT mode (no token tables)\n"
    "unless convert is given --allow-uncertified-tokenizer; README.md, \"Choosing the tokenizer\n"
    "mode\", says when to pass it.\n"
    "\n"
    "exit codes: 0 ok, 1 input refused or operation failed, 2 usage, 3 not implemented,\n"
    "            4 verification failed, 5 file system error\n";

// --json anywhere on the command line: usage errors answer in JSON too.
static bool wants_json(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!std::strcmp(argv[i], "--json")) return true;
    return false;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fputs(kUsage, stderr);
        return kExitUsage;
    }
    const char *cmd = argv[1];
    install_fatal_signal_handlers(cmd);  // SIGBUS: a message and exit code 5, never a core dump
    if (!std::strcmp(cmd, "--list-models")) return cmd_list_models(argc, argv);
    if (!std::strcmp(cmd, "help") && argc == 3) {  // stk help COMMAND = stk COMMAND --help
        static char help_flag[] = "--help";
        char *args[] = {argv[0], argv[2], help_flag, nullptr};
        return main(3, args);
    }
    if (!std::strcmp(cmd, "--help") || !std::strcmp(cmd, "-h") || !std::strcmp(cmd, "help")) {
        std::fputs(kUsage, stdout);
        return kExitOk;
    }
    if (!std::strcmp(cmd, "--version")) {
        Args args(argc, argv, 2);
        bool json = args.flag("json");
        if (!args.finish("--version")) return kExitUsage;
        if (json)
            json_result("--version", kExitOk, STK_OK, std::string("stk ") + STK_VERSION_STRING)
                .str("version", STK_VERSION_STRING)
                .str("library_version", stk_version_string())
                .print();
        else std::printf("stk %s (libstk %s)\n", STK_VERSION_STRING, stk_version_string());
        return kExitOk;
    }
    if (!std::strcmp(cmd, "convert")) return cmd_convert(argc, argv);
    if (!std::strcmp(cmd, "check")) return cmd_check(argc, argv);
    if (!std::strcmp(cmd, "replay")) return cmd_replay(argc, argv);
    if (!std::strcmp(cmd, "inspect")) return cmd_inspect(argc, argv);
    if (!std::strcmp(cmd, "tokenize")) return cmd_tokenize(argc, argv);
    if (!std::strcmp(cmd, "generate")) return cmd_generate(argc, argv);
    if (!std::strcmp(cmd, "export")) return cmd_export(argc, argv);
    if (!std::strcmp(cmd, "generations")) return cmd_generations(argc, argv);
    if (wants_json(argc, argv)) return report_usage("", std::string("unknown command '") + cmd + "'", true);
    std::fprintf(stderr, "stk: unknown command '%s'\n\n%s", cmd, kUsage);
    return kExitUsage;
}
