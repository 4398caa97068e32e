#include <cstdio>

#include "cli/cli.h"

namespace stk::cli {
int cmd_tokenize(int argc, char **argv) {
    std::fprintf(stderr, "stk tokenize: not implemented yet\n");
    return kExitNotImplemented;
}
}  // namespace stk::cli
