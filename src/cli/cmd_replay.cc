#include <cstdio>

#include "cli/cli.h"

namespace stk::cli {
int cmd_replay(int argc, char **argv) {
    std::fprintf(stderr, "stk replay: not implemented yet\n");
    return kExitNotImplemented;
}
}  // namespace stk::cli
