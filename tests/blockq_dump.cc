// Test-only: the block-scaled types of format/lowbit.h on files, for tests/blockq_reference.py
// to compare with gguf-py's quantize / dequantize.
//   blockq_dump quantize TYPE IN.f32 OUT.bin     IN's f32 values (a multiple of 32) -> blocks
//   blockq_dump dequant TYPE IN.bin OUT.f32      blocks -> f32 values
//   blockq_dump dot TYPE IN.bin X.f32 OUT.f32    each row of len(X) values (IN: rows of blocks) . X
// TYPE: q4_0 or q8_0.  Exit 1 with the reason on stderr.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "format/lowbit.h"

using namespace stk;

namespace {

std::vector<uint8_t> slurp(const char *path) {
    std::vector<uint8_t> b;
    FILE *f = std::fopen(path, "rb");
    if (!f) return b;
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) b.insert(b.end(), buf, buf + n);
    std::fclose(f);
    return b;
}

bool spit(const char *path, const void *p, size_t n) {
    FILE *f = std::fopen(path, "wb");
    if (!f) return false;
    const bool ok = std::fwrite(p, 1, n, f) == n;
    return std::fclose(f) == 0 && ok;
}

int fail(const char *why) {
    std::fprintf(stderr, "blockq_dump: %s\n", why);
    return 1;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 5) return fail("usage: blockq_dump quantize|dequant|dot TYPE IN OUT [X]");
    BlockQType t;
    if (!parse_blockq(argv[2], &t)) return fail("TYPE is q4_0 or q8_0");
    const std::string cmd = argv[1];
    const std::vector<uint8_t> in = slurp(argv[3]);
    if (cmd == "quantize") {
        const uint64_t n = in.size() / 4;
        std::vector<float> v(n);
        std::memcpy(v.data(), in.data(), n * 4);
        uint64_t bytes = 0;
        if (!blockq_bytes(t, n, &bytes)) return fail("not a multiple of 32 values");
        std::vector<uint8_t> out(bytes);
        blockq_quantize(t, v.data(), n, out.data());
        return spit(argv[4], out.data(), out.size()) ? 0 : fail("cannot write OUT");
    }
    const uint64_t nb = in.size() / blockq_block_bytes(t);
    if (in.size() % blockq_block_bytes(t)) return fail("IN is not whole blocks");
    if (cmd == "dequant") {
        std::vector<float> out(nb * kBlockQElems);
        blockq_dequantize(t, in.data(), out.size(), out.data());
        return spit(argv[4], out.data(), out.size() * 4) ? 0 : fail("cannot write OUT");
    }
    if (cmd == "dot" && argc == 6) {
        const std::vector<uint8_t> xb = slurp(argv[4]);
        const uint64_t n = xb.size() / 4;
        uint64_t row_bytes = 0;
        if (!blockq_bytes(t, n, &row_bytes) || in.size() % row_bytes) return fail("X's length does not fit IN's rows");
        std::vector<float> x(n), out(in.size() / row_bytes);
        std::memcpy(x.data(), xb.data(), n * 4);
        for (size_t r = 0; r < out.size(); r++) out[r] = blockq_dot(t, in.data() + r * row_bytes, x.data(), n);
        return spit(argv[5], out.data(), out.size() * 4) ? 0 : fail("cannot write OUT");
    }
    return fail("unknown command");
}
