// Peers of bench/tokenize_bench: GPT-2 encoding of the same text with tiktoken (npm `tiktoken`,
// Rust compiled to WASM, encoding "gpt2" = r50k) and HF tokenizers (npm `tokenizers`, native
// Rust, the hub's gpt2 tokenizer.json), single-threaded, median of RUNS runs each.  Writes each
// peer's ids (u32 LE) to OUT_DIR for the identity check and prints one JSON line per peer.
//
//   node bench/node/tokenize_peers.js TEXT TOKENIZER_JSON OUT_DIR [RUNS]
const fs = require('fs');
const path = require('path');
const { get_encoding } = require('tiktoken');
const { Tokenizer } = require('tokenizers');

const [textPath, tokJson, outDir, runsArg] = process.argv.slice(2);
const runs = Number(runsArg || 5);
const text = fs.readFileSync(textPath, 'utf8');
const bytes = Buffer.byteLength(text, 'utf8');

// The peers get the text in chunks of about 64 KiB (gpt2_chunks.js says where it is cut).
const chunks = require('./gpt2_chunks.js').gpt2Chunks;
const parts = chunks(text, 65536);

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

// Wall time and process CPU time (user + system, all threads) of each run: on a loaded machine
// the CPU-time rate is the steadier of the two.
function report(name, secs, cpu, ids) {
  fs.writeFileSync(path.join(outDir, name + '.ids'), Buffer.from(new Uint32Array(ids).buffer));
  const mbps = secs.map((s) => bytes / 1e6 / s);
  const cpu_mbps = cpu.map((s) => bytes / 1e6 / s);
  console.log(JSON.stringify({ peer: name, bytes, chunks: parts.length, tokens: ids.length, runs,
    median_mb_s: median(mbps), median_cpu_mb_s: median(cpu_mbps), all_mb_s: mbps, all_cpu_mb_s: cpu_mbps }));
}
function concat(arrays) {
  const out = [];
  for (const a of arrays) for (const id of a) out.push(id);
  return out;
}
function cpuSecs(u) { return (u.user + u.system) / 1e6; }

async function main() {
  fs.mkdirSync(outDir, { recursive: true });
  {
    const enc = get_encoding('gpt2');
    const secs = [], cpu = [];
    let ids;
    for (let r = 0; r < runs; r++) {
      const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
      const got = [];
      for (const part of parts) got.push(enc.encode_ordinary(part));
      secs.push(Number(process.hrtime.bigint() - t0) / 1e9);
      cpu.push(cpuSecs(process.cpuUsage(c0)));
      ids = concat(got);  // outside the timing: only the encoder's own work is timed
    }
    report('tiktoken', secs, cpu, ids);
    // tiktoken's plain use: the whole text in one call (its default; the chunks above are the
    // faster of the two here, and both are reported).
    const wsecs = [], wcpu = [];
    for (let r = 0; r < runs; r++) {
      const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
      const got = enc.encode_ordinary(text);
      wsecs.push(Number(process.hrtime.bigint() - t0) / 1e9);
      wcpu.push(cpuSecs(process.cpuUsage(c0)));
      ids = got;
    }
    report('tiktoken_whole', wsecs, wcpu, ids);
    enc.free();
  }
  {
    const tok = Tokenizer.fromFile(tokJson);
    tok.disableTruncation();
    const secs = [], cpu = [];
    let ids;
    for (let r = 0; r < runs; r++) {
      const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
      const got = [];
      for (const part of parts) got.push((await tok.encode(part, null, { addSpecialTokens: false })).getIds());
      secs.push(Number(process.hrtime.bigint() - t0) / 1e9);
      cpu.push(cpuSecs(process.cpuUsage(c0)));
      ids = concat(got);
    }
    report('hf_tokenizers', secs, cpu, ids);
  }
}
main();
