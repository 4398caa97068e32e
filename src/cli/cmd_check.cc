#include <cstdio>

#include "cli/cli.h"

namespace stk::cli {
int cmd_check(int argc, char **argv) {
    std::fprintf(stderr, "stk check: not implemented yet\n");
    return kExitNotImplemented;
}
}  // namespace stk::cli
