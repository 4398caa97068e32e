// Writes the ids HF tokenizers (Node package `tokenizers`, bench/node) gives for a text, as JSON,
// so that our tokenizer.json encoder is checked against the real thing (tests/test_bpe.cc).
// Usage: node hf_reference.js TOKENIZER_JSON TEXT_FILE   (see generate.sh)
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '../../../bench/node/node_modules/tokenizers'));
const fs = require('fs');
const [file, textFile] = process.argv.slice(2);
const tok = Tokenizer.fromFile(file);
// stk tokenizes whole texts: GPT-2's hub tokenizer.json truncates to 50 tokens, we do not
tok.disableTruncation();
const text = fs.readFileSync(textFile, 'utf8');
tok.encode(text, null, { addSpecialTokens: true }).then((e) => {
  console.log(JSON.stringify({ tokenizer: path.basename(file), text_file: path.basename(textFile), add_special: true, token_ids: e.getIds() }));
});
