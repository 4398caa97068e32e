// The Transformer forward of the language-model runtime (issue 36 item 2), token by token over a
// fixed state: per layer, the keys and values of S sink positions (the first S of the sequence)
// plus a ring of the W most recent (StreamingLLM).  A query at position p sees key k when
// k <= p and (k < S or p - k < W), and on a layer with the model's own sliding window sw also
// p - k < sw: the same set as `stk eval --swap window` (python/stk/evaluation.py).  With
// S + W >= the context it is the exact model.  Positions stay absolute (RoPE of the true position).
//
// One forward for every family it runs: the family's facts are data (ModelConfig: norm kind,
// offset, eps; pre / post / parallel norms; RoPE part, pairing, bases, scaling; GQA; q/k norms;
// softcaps; score scale; gated or plain FFN and its activation; MoE router and experts; learned
// positions; embedding scale).  Families whose facts it does not compute are refused by name
// (STK_E_NOT_IMPLEMENTED) when a sequence opens: lm::unsupported().
//
// Compute is f32 (bf16 / int8 weights widened on the fly).  Deterministic at any thread count:
// threads split output rows (and attention heads), never a sum; sums run in a fixed order.  No
// allocation after open: every buffer lies in the caller's arena, sized by arena_size first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lm/weights.h"

namespace stk {
class WorkerPool;
}

namespace stk::lm {

// Which W non-sink positions a layer's state keeps (issue 37; docs/decisions.md "Retention
// policies").  The state holds S + W positions per layer (per key/value head for TovaHead),
// the query's own included: at position p >= S, once W non-sink positions are held, one is
// evicted before p is written and attended:
//   Window   the oldest (StreamingLLM; the ring above);
//   Tova     the lowest attention weight of the last query (p - 1), averaged over the layer's
//            heads (Oren et al. 2024, "Transformers are Multi-State RNNs");
//   H2o      the lowest attention accumulated over every query so far (averaged over heads),
//            among those older than the `recent` most recent positions (Zhang et al. 2023);
//   TovaHead Tova per key/value head (weights averaged over the query heads of its group): each
//            key/value head keeps its own positions.
// Ties go to the oldest.  On a layer with the model's own sliding window sw, a position the
// window hides (p - k >= sw) is evicted first (oldest first).  The scores are state: counted in
// arena_size, kept per position.
enum class Policy : uint32_t { Window = 0, Tova = 1, H2o = 2, TovaHead = 3 };
const char *policy_name(Policy p);
constexpr uint32_t kPolicyCount = 4;

struct SeqOptions {
    uint32_t sinks = 4;          // S
    uint32_t window = 252;       // W >= 1
    uint32_t threads = 1;        // 0: 1
    uint32_t max_batch = 64;     // prompt tokens computed together (GEMM); feed() splits longer runs
    Policy policy = Policy::Window;
    uint32_t recent = 0;         // H2o: the most recent positions never evicted (0: W / 2; < W)
};

// Probes (stk.h's stk_seq_set_probe; docs/decisions.md "Probes"): points of every layer where
// a callback reads (and at the writable ones may overwrite) the chunk's activations.  The numbers
// are stk.h's STK_PROBE_*.
enum class Point : uint32_t { AttnIn = 0, QPre, KPre, Q, K, V, AttnOut, AttnProj, FfnIn, FfnOut };
constexpr uint32_t kPointCount = 10;
constexpr uint32_t kProbeMoe = 1, kProbeSliding = 2, kProbeInterleaved = 4;  // ProbeData.flags

struct ProbeData {
    uint32_t layer = 0;
    Point point = Point::AttnIn;
    uint64_t position = 0, n = 0, width = 0;  // tokens at position .. position + n - 1; [n, width]
    float *data = nullptr;
    bool writable = false;
    uint32_t flags = 0, heads = 1, head_width = 0, rot_offset = 0, rot_pairs = 0;
};
// Returns 0 to go on; anything else stops the feed (STK_E_CANCELLED).
using ProbeFn = int (*)(void *user, const ProbeData &d);

// "" when the forward runs this model; else why not, naming the family and the feature.
std::string unsupported(const ModelConfig &c);

// Bytes of the arena a Sequence over `w` with `o` needs (KV ring, activations, scratch).
// STK_E_NOT_IMPLEMENTED for a model unsupported() refuses; STK_E_INVALID_ARGUMENT for window 0.
size_t arena_size(const WeightSource &w, const SeqOptions &o);

class Sequence {
public:
    // `arena` (at least arena_size(w, o) bytes, 64-byte aligned or not) and `w` must outlive the
    // sequence.  Checks that every tensor the forward reads is present with its shape
    // (STK_E_CORRUPT naming role, layer and expert otherwise).
    Sequence(const WeightSource &w, const SeqOptions &o, void *arena, size_t arena_bytes);
    ~Sequence();
    Sequence(const Sequence &) = delete;
    Sequence &operator=(const Sequence &) = delete;

    // Feed n tokens at the next positions.  The logits of the last one are kept (logits());
    // with all_logits non-null, every token's logits are written there ([n, vocab] floats).
    // A token id >= vocab is STK_E_INVALID_ARGUMENT (nothing fed).
    void feed(const int32_t *tokens, size_t n, float *all_logits = nullptr);
    const float *logits() const;  // [vocab] of the last token fed (zeros before any)
    uint64_t vocab() const;
    uint64_t position() const;    // tokens fed so far
    void reset();                 // back to position 0 (the state emptied)
    // The positions layer `layer`'s state holds now (key/value head `kv_head`'s under TovaHead;
    // ignored otherwise), ascending, into out[cap]; returns how many (at most S + W).
    // STK_E_INVALID_ARGUMENT for a layer or head out of range.
    size_t kept(uint32_t layer, uint32_t kv_head, uint64_t *out, size_t cap) const;
    // The probe called at the points of `mask` (bit i: Point i) of every layer, on the calling
    // thread between parallel phases; fn null: none.  STK_E_INVALID_ARGUMENT for bits past the last.
    void set_probe(uint32_t mask, ProbeFn fn, void *user);
    // y[n, d] = W_O x (+ bias) of layer `layer` (x [n, heads * value width]), as the forward's own.
    void attn_project(uint32_t layer, const float *x, uint64_t n, float *y);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace stk::lm
