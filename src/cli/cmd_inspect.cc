#include <cstdio>

#include "cli/cli.h"

namespace stk::cli {
int cmd_inspect(int argc, char **argv) {
    std::fprintf(stderr, "stk inspect: not implemented yet\n");
    return kExitNotImplemented;
}
}  // namespace stk::cli
