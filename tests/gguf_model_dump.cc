// Test-only: what stk makes of a model (an HF directory or a GGUF) as HF tensors, for
// tests/gguf_model_reference.py to compare with gguf-py and safetensors.
//   gguf_model_dump MODEL   one JSON object: the normalised config's main fields and, per
//                           checkpoint tensor (HF name), its shape and the SHA-256 of its
//                           values as little-endian f32 (every dtype converted by stk's reader);
//                           "model": the rest of the normalised config the stages read (MLA,
//                           routing, multipliers, sinks, RoPE scaling, ...), the approximations
//                           convert records, and the plan's roles (name, role, slot, layer,
//                           expert, logical dims) in plan order
// Exit 1 with the error on stderr ("STATUS message") when stk refuses the model.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/error.h"
#include "ingest/model.h"
#include "ingest/roles.h"

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
            ", \"norm_eps\": %.9g, \"rope_theta\": %.9g, \"tied\": %s, \"params\": %" PRIu64 "},\n",
            c.model_type, c.d_model, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size, c.ffn_dim, c.norm_eps,
            c.rope_theta, c.tied_embeddings ? "true" : "false", d->plan.n_params);
        std::printf(
            " \"model\": {\"attn_scale\": %.17g, \"emb_multiplier\": %.17g, \"residual_multiplier\": %.17g, "
            "\"logit_scale\": %.17g, \"rope_scaling\": \"%s\", \"rope_factor\": %.17g, \"rope_original_max\": %" PRIu64
            ", \"rope_beta\": [%.17g, %.17g], \"rope_attn_factor\": %.17g, \"yarn_truncate\": %d, \"rotary_dim\": %u, "
            "\"max_positions\": %" PRIu64
            ", \"sliding_window\": %u, \"attn_sinks\": %d, \"qkv_bias\": %d, \"o_bias\": %d, "
            "\"lm_head_bias\": %d, \"norm\": %d, \"mla\": [%d, %u, %u, %u, %u, %u, %.17g, %d], \"experts\": [%u, %u, %" PRIu64
            ", %" PRIu64
            ", %d, %d, %d, %u, %.17g, %u, %u, %.17g], \"router\": \"%s\", \"swiglu\": [%.17g, %.17g], "
            "\"mxfp4\": %d, \"qkv_layout\": %d,\n  \"approximations\": [",
            c.attn_scale, c.emb_multiplier, c.residual_multiplier, c.logit_scale, c.rope_scaling_type, c.rope_scaling_factor,
            c.rope_original_max, c.rope_beta_fast, c.rope_beta_slow, c.rope_attn_factor, int(c.rope_yarn_truncate), c.rotary_dim,
            c.max_positions, c.sliding_window, int(c.attn_sinks), int(c.qkv_bias), int(c.o_bias), int(c.lm_head_bias),
            int(c.norm), int(c.mla), c.q_lora_rank, c.kv_lora_rank, c.qk_nope_dim, c.qk_rope_dim, c.v_head_dim, c.mla_rope_gain,
            int(c.mla_rope_interleaved), c.n_experts, c.top_k, c.moe_ffn_dim, c.shared_expert_ffn_dim, int(c.norm_topk_prob),
            int(c.router_bias), int(c.expert_bias), c.first_moe_layer, c.routed_scaling, c.n_group, c.topk_group, c.router_jitter,
            c.router, c.swiglu_limit, c.gated_up_offset, int(c.mxfp4), int(c.qkv_layout));
        const std::vector<std::string> approx = model_approximations(c);
        for (size_t i = 0; i < approx.size(); i++) {
            std::string e;
            for (char ch : approx[i]) {
                if (ch == '"' || ch == '\\') e += '\\';
                if (uint8_t(ch) >= 0x20) e += ch;
            }
            std::printf("%s\"%s\"", i ? ", " : "", e.c_str());
        }
        std::printf("],\n  \"rope_long_factor\": [");
        for (uint32_t i = 0; i < c.n_rope_long_factor; i++) std::printf("%s%.9g", i ? ", " : "", double(c.rope_long_factor[i]));
        std::printf("],\n  \"roles\": [");
        for (uint32_t i = 0; i < d->plan.n_tensors; i++) {
            const PlanTensor &p = d->plan.tensors[i];
            std::printf("%s[\"%s\", \"%s\", %d, %d, %d, %" PRIu64 ", %" PRIu64 ", %d, %d]", i ? ", " : "", p.name,
                        role_name(p.role), int(p.slot), p.layer, p.expert, p.dims[0], p.dims[1], int(p.buffer), int(p.composed));
        }
        std::printf("]},\n");
        std::vector<uint8_t> scratch;
        std::vector<float> f32;
        std::printf(" \"tensors\": [");
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
