// Test-only: what stk makes of a model (an HF directory or a GGUF) as HF tensors, for
// tests/gguf_model_reference.py to compare with gguf-py and safetensors.
//   gguf_model_dump MODEL   one JSON object: the normalised config's main fields and, per
//                           checkpoint tensor (HF name), its shape and the SHA-256 of its
//                           values as little-endian f32 (every dtype converted by stk's reader)
// Exit 1 with the error on stderr ("STATUS message") when stk refuses the model.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/error.h"
#include "ingest/model.h"

using namespace stk;

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: gguf_model_dump MODEL\n");
        return 2;
    }
    try {
        auto d = describe_model(argv[1]);
        const ModelConfig &c = d->plan.config;
        std::printf(
            "{\"config\": {\"model_type\": \"%s\", \"d_model\": %u, \"n_layers\": %u, \"n_heads\": %u, "
            "\"n_kv_heads\": %u, \"head_dim\": %u, \"vocab_size\": %" PRIu64 ", \"ffn_dim\": %" PRIu64
            ", \"norm_eps\": %.9g, \"rope_theta\": %.9g, \"tied\": %s, \"params\": %" PRIu64 "},\n \"tensors\": [",
            c.model_type, c.d_model, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size, c.ffn_dim, c.norm_eps,
            c.rope_theta, c.tied_embeddings ? "true" : "false", d->plan.n_params);
        std::vector<uint8_t> scratch;
        std::vector<float> f32;
        bool first = true;
        for (const TensorRef &t : d->checkpoint->tensors()) {
            const uint8_t *b = d->checkpoint->tensor_bytes(t, scratch);
            f32.resize(t.n_elements);
            convert_to_f32(t, b, 0, t.n_elements, f32.data());
            Sha256Digest h = sha256(f32.data(), f32.size() * 4);
            std::printf("%s\n  {\"name\": \"%s\", \"shape\": [", first ? "" : ",", t.name.c_str());
            for (size_t i = 0; i < t.shape.size(); i++) std::printf("%s%" PRIu64, i ? ", " : "", t.shape[i]);
            std::printf("], \"sha256\": \"");
            for (uint8_t x : h.bytes) std::printf("%02x", x);
            std::printf("\"}");
            first = false;
            d->checkpoint->release(t);
        }
        std::printf("]}\n");
    } catch (const Error &e) {
        std::fprintf(stderr, "%s %s\n", stk_status_str(e.status()), e.what());
        return 1;
    }
    return 0;
}
