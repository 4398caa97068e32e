// stk: the command-line front of libstk.
#include <cstdio>
#include <cstring>

#include "cli/cli.h"

using namespace stk::cli;

static const char kUsage[] =
    "usage: stk <command> [options]\n"
    "\n"
    "commands:\n"
    "  convert   project an HF checkpoint directory into Sera arrays and a manifest\n"
    "  check     verify a published output directory (manifest and every array)\n"
    "  replay    run the O(1) per-token path of a published output over a prompt\n"
    "  inspect   show what a checkpoint directory holds (architecture, tensors, roles)\n"
    "  tokenize  encode text with a model directory's tokenizer\n"
    "  export    write an HF checkpoint's weights as one .lwt file (seed 001/002)\n"
    "\n"
    "  stk <command> --help   options of one command\n"
    "  stk --version          library and tool version\n"
    "\n"
    "exit codes: 0 ok, 1 input refused or operation failed, 2 usage, 3 not implemented,\n"
    "            4 verification failed, 5 file system error\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fputs(kUsage, stderr);
        return kExitUsage;
    }
    const char *cmd = argv[1];
    if (!std::strcmp(cmd, "--help") || !std::strcmp(cmd, "-h") || !std::strcmp(cmd, "help")) {
        std::fputs(kUsage, stdout);
        return kExitOk;
    }
    if (!std::strcmp(cmd, "--version")) {
        std::printf("stk %s (libstk %s)\n", STK_VERSION_STRING, stk_version_string());
        return kExitOk;
    }
    if (!std::strcmp(cmd, "convert")) return cmd_convert(argc, argv);
    if (!std::strcmp(cmd, "check")) return cmd_check(argc, argv);
    if (!std::strcmp(cmd, "replay")) return cmd_replay(argc, argv);
    if (!std::strcmp(cmd, "inspect")) return cmd_inspect(argc, argv);
    if (!std::strcmp(cmd, "tokenize")) return cmd_tokenize(argc, argv);
    if (!std::strcmp(cmd, "export")) return cmd_export(argc, argv);
    std::fprintf(stderr, "stk: unknown command '%s'\n\n%s", cmd, kUsage);
    return kExitUsage;
}
