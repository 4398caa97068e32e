// The bridge (seed 9, 12.6, 18.4): hubs, the token / context hub bitsets, the Q8.8 leg scores,
// the guard tuples and the peer scores.  docs/decisions.md "Bridge" gives the readings of 9.x
// and spec-notes 16; docs/format.md "Bridge arrays" every byte.
//
//   hubs       H = 64 W.  MoE: the (layer, expert) router rows of every layer pooled, ranked by
//              ||row||_2 descending (ties: smaller layer, then smaller expert), the top H; the
//              router weight is stored [E, d_model] (Mixtral block_sparse_moe.gate, Qwen2-MoE
//              mlp.gate), so the spec's W_gate[:, e] is row e of the stored tensor.  Hubs left
//              over (fewer than H rows) and every hub of a dense model are pseudo-experts: a
//              Gaussian direction from the splitmix64 stream (kStreamBridgeHub, hub, counter).
//   legs       x_in[t, h] = <E[t], g_h> (the token embedding), x_out[t, h] = <U[t], g_h> (the
//              output embedding, = x_in for a tied head): the router logits of the token's own
//              embedding, per hub.  Quantized per row: s = 0.8 * 32767 / p99(|x[t, :]|).
//   bitsets    a token row and a context row of W u64 each: two bits per row, each from a salted
//              hash of the id; HUB(t, c) = token row | context row.
//   guard      per token the top-K hubs by z = x_in/s_in + x_out/s_out (dequantized) with
//              m = z_k - z_{K+1} - 2 eps_row, U = beta sd(x_in), V = beta sd(x_out), C_h = U + V;
//              promoted iff m > 0 and C_h < m (18.4: m <= 0 is never promoted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "format/manifest.h"
#include "hash/hub_bits.h"

namespace stk {

constexpr uint32_t kBridgeK = 4;                 // 14.5: guard pairs per token (K in {4, 6})
constexpr uint32_t kBridgeW = 2;                 // 14.5: u64 words per leg (W in {2, 3})
constexpr uint32_t kBridgeHubs = 64 * kBridgeW;  // H = H_bits
constexpr double kBridgeGuardSlack = 0.01;       // beta: leg update bound per unit of the leg's sd
constexpr double kBridgeP99Fraction = 0.8;       // spec-notes 16: p99 maps to 0.8 * 32767
constexpr uint32_t kBridgeHubSamples = 4096;     // (token, context) pairs the 12.6 hub check draws
constexpr uint32_t kStreamBridgeHub = 8;         // PRNG streams (seed 10.4), module = stage 8
constexpr uint32_t kStreamBridgePeer = 0x108;
constexpr uint32_t kStreamBridgeCheck = 0x208;
constexpr uint32_t kStreamAcceptanceBridge = 0x1008;

// Guard tuple flags.
constexpr uint16_t kGuardPromoted = 1u << 0;        // the O(0) route may use this pair
constexpr uint16_t kGuardNegativeMargin = 1u << 1;  // m <= 0 (18.4): never promoted
constexpr size_t kGuardTupleSize = 24;              // u16 hub, u16 flags, f32 m, C_h, U, V, z

struct GuardTuple {
    uint16_t hub = 0, flags = 0;
    float m = 0, c_h = 0, u = 0, v = 0, z = 0;
};
void guard_tuple_store(const GuardTuple &g, uint8_t out[kGuardTupleSize]);
GuardTuple guard_tuple_load(const uint8_t in[kGuardTupleSize]);

// 9.3: the p99 of |x| over a row (nearest rank: the ceil(0.99 n)-th smallest), its scale
// s = 0.8 * 32767 / p99 (absmax when the p99 is 0; 1 when the row is all zero), and the row
// quantized: q = clip(round(x s), -32768, 32767), round half away from zero.  scratch: n floats.
// std::round (half away from zero, -0 kept), the same double for every input, without the libm
// call the baseline x86-64 target makes of it (two a quantized entry: most of the stage's tail).
double round_half_away(double x);
double bridge_p99_abs(const float *x, size_t n, float *scratch);
float bridge_row_scale(const float *x, size_t n, float *scratch);
// Returns how many entries were clipped.
uint32_t bridge_quantize_row(const float *x, size_t n, float s, int16_t *q);

// 9.4: the K guard tuples of one token from its quantized legs (h hubs, k < h).
// z: h doubles, order: h u32 of scratch.
void bridge_guard_row(const int16_t *qin, const int16_t *qout, float s_in, float s_out, uint32_t h, uint32_t k, double beta,
                      double *z, uint32_t *order, GuardTuple *out);

// x[v, h] = rows[v, d] gt[d, h] (f32, BLIS sgemm) over a fixed grid of row_block-row blocks dealt
// round-robin to `threads` threads: the grid does not depend on the thread count, so neither do
// the bytes (plain_sgemm alone runs one thread here: h = 128 is a single column block).
constexpr uint64_t kBridgeLegRowBlock = 2048;
void bridge_leg_scores(const float *rows, uint64_t v, uint64_t d, const float *gt, uint64_t h, float *x, unsigned threads,
                       uint64_t row_block);
// The same with the rows fetched block by block: rows_of(r0, m, buf) returns rows [r0, r0 + m)
// in f32 (in buf, room for row_block * d floats, or elsewhere); worker w passes bufs + w * row_block
// * d.  The same grid and products: the same bytes as the whole-matrix form.
using LegRows = std::function<const float *(uint64_t r0, uint64_t m, float *buf)>;
void bridge_leg_scores(const LegRows &rows_of, uint64_t v, uint64_t d, const float *gt, uint64_t h, float *x, unsigned threads,
                       uint64_t row_block, float *bufs);
// Workers (and row-block buffers) of the streamed form: min(threads, blocks), at least 1; threads
// is the normalised count (normalize_params: 1..1024), and the row blocks of all workers together
// are at most one block more than the embedding in f32.
unsigned bridge_leg_workers(unsigned threads, uint64_t v, uint64_t row_block);

// What bridge_build measured (records, tests, acceptance).
struct BridgeStats {
    uint64_t entries = 0, clipped = 0;  // quantized entries (both legs), clipped ones
    double rms_err_p99 = 0;             // RMS dequantization error / RMS of x, p99 scaling
    double rms_err_absmax = 0;          // the same with absmax scaling (spec-notes 16 comparison)
    uint64_t pairs = 0, promoted = 0, negative = 0;
    double hub_p99 = 0;  // p99 over sampled pairs of popcount(HUB(t, c))
    bool scales_ok = false, hubs_ok = false, guard_ok = false;
};

// The bridge of a model whose legs are already computed: x_in, x_out [v, h] f32 (x_out may equal
// x_in).  Fills the outputs (qin/qout [v, h], s_in/s_out [v], hubs [(v + n_ctx), w], guard
// [v, k] tuples of kGuardTupleSize bytes) and writes the 12.6 / 18.4 records into `m`.
// The rows are shared over `workers` threads (a worker's rows are a function of its index and the
// worker count only); the error sums are added in the order of the entries on one thread, so
// every byte and record is the same at any worker count.  Scratch (bridge_scratch_size):
// f: workers * h floats, d: workers * h doubles, u: max(workers * h, kBridgeHubSamples) u32,
// terms: 2 * 3 * kBridgeQuantChunkRows * h doubles (two chunks' terms: one quantized, one added).
struct BridgeOut {
    int16_t *qin, *qout;
    float *s_in, *s_out;
    uint64_t *hubs;
    uint8_t *guard;
};
constexpr uint64_t kBridgeQuantChunkRows = 1024;  // rows quantized between two in-order error sums
struct BridgeScratch {
    float *f;
    double *d, *terms;
    uint32_t *u;
};
BridgeStats bridge_build(const float *x_in, const float *x_out, uint64_t v, uint32_t h, uint32_t k, uint32_t w, uint32_t n_ctx,
                         double beta, const BridgeOut &out, const BridgeScratch &scratch, unsigned workers, ManifestDraft &m);

// Test hook: nonzero corrupts one guard tuple after it is built (forces the 12.6 guard check to
// fail: the O(0) route is disabled and bridge_guard.bin is not written).
extern uint32_t g_bridge_test_corrupt_guard;

}  // namespace stk
