// The text in chunks of about `target` UTF-16 units, cut only where the GPT-2 pre-tokenizer always
// splits and neither side depends on the other ("<letter> <letter>": the letter run ends, " word"
// starts), so the concatenated ids equal those of the whole text.  HF tokenizers is far slower on
// one 10 MB string (offset tracking over the whole string) than on documents of realistic size.
function gpt2Chunks(s, target) {
  const out = [];
  let start = 0;
  const isLetter = (c) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
  while (start < s.length) {
    let cut = Math.min(s.length, start + target);
    while (cut < s.length && !(s.charCodeAt(cut) === 32 && isLetter(s.charCodeAt(cut - 1)) && isLetter(s.charCodeAt(cut + 1)))) cut++;
    out.push(s.slice(start, cut));
    start = cut;
  }
  return out;
}
module.exports = { gpt2Chunks };
