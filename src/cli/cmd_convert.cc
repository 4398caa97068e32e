#include <cstdio>

#include "cli/cli.h"

namespace stk::cli {
int cmd_convert(int argc, char **argv) {
    std::fprintf(stderr, "stk convert: not implemented yet\n");
    return kExitNotImplemented;
}
}  // namespace stk::cli
