// Whole-process peer of `stk tokenize --json` (bench/tokenize_cli_bench.py): one Node process reads
// the text file, encodes it with tiktoken (npm `tiktoken`, encoding "gpt2", the whole text in one
// encode_ordinary call: its default use) or HF tokenizers (npm `tokenizers`, the hub's gpt2
// tokenizer.json, truncation off, the text in ~64 KiB chunks cut where GPT-2 always splits: on the
// whole 24 MB string it is far slower still), and prints {"count": N, "ids": [...]} on stdout, as
// `stk tokenize --json` prints its ids.  Everything is inside the process the script times: Node's
// start, loading the module and the vocabulary, reading, encoding, printing.
//
//   node bench/node/tokenize_cli_peer.js tiktoken TEXT
//   node bench/node/tokenize_cli_peer.js hf_tokenizers TEXT TOKENIZER_JSON
const fs = require('fs');

const [peer, textPath, tokJson] = process.argv.slice(2);
const text = fs.readFileSync(textPath, 'utf8');

const chunks = require('./gpt2_chunks.js').gpt2Chunks;

function print(ids) {
  fs.writeSync(1, '{"count": ' + ids.length + ', "ids": [' + ids.join(', ') + ']}\n');
}

async function main() {
  if (peer === 'tiktoken') {
    const { get_encoding } = require('tiktoken');
    const enc = get_encoding('gpt2');
    print(enc.encode_ordinary(text));
    enc.free();
  } else if (peer === 'hf_tokenizers') {
    const { Tokenizer } = require('tokenizers');
    const tok = Tokenizer.fromFile(tokJson);
    tok.disableTruncation();
    const ids = [];
    for (const part of chunks(text, 65536)) for (const id of (await tok.encode(part, null, { addSpecialTokens: false })).getIds()) ids.push(id);
    print(ids);
  } else {
    throw new Error('peer is tiktoken or hf_tokenizers');
  }
}
main();
