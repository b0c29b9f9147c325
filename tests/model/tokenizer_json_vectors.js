// The strings tokenizer_json_agrees_with_hf.test.js encodes with each real tokenizer.json,
// made here deterministically (no clock, no randomness beyond a seeded generator):
//   - every string of gpt3_encoder_vectors.js (hand-picked ones for each part of GPT-2's
//     pattern, many scripts, emoji, whitespace, long words, and 300 seeded mixtures);
//   - strings for what tokenizer.json adds: Llama 3's and Qwen's patterns (digit runs cut
//     in threes or ones, a letter run after one symbol, newlines after punctuation,
//     contractions in any case), text that is not in NFC (Qwen normalizes it), a literal
//     "▁" (SentencePiece's space), characters no vocabulary has (byte fallback), more
//     scripts, and added tokens written literally;
//   - for each file, some of its own added tokens inside text (special_token_texts).
//
// Strings where @huggingface/tokenizers (a JavaScript port) and Hugging Face's Rust library
// legitimately differ are left out, and said here:
//   - "(?i:'s|...)" in Llama 3's and Qwen's patterns: Oniguruma and PCRE2 fold case by
//     Unicode (U+017F "ſ" matches "s", U+212A "K" matches "k"); the port folds ASCII only.
//     No string here puts such a character after an apostrophe.
'use strict';

const { texts: gpt2_texts } = require('./gpt3_encoder_vectors.js');

// The seeded generator: mulberry32, as in gpt3_encoder_vectors.js.
function mulberry32(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HAND_PICKED = [
  // Llama 3 / Qwen patterns: digits (\p{N}{1,3} or \p{N}), a letter run after one other
  // character, punctuation followed by newlines, contractions in any case.
  '1234567', '12345678901', ' 1234567 ', 'pi=3.14159265', 'x1234y', '1,234,567.89', '٣٤٥٦٧', '१२३४५',
  '①②③④', '½¼¾', '0000', "don't I'M we'll", "DON'T YOU'RE WE'LL THEY'VE SHE'D IT'S", "I'm i'M I'm",
  '$hello', '#tag', '.hidden', '—dash', '"quoted"', 'end.\n\nNext', 'end!\r\n\r\nNext', 'a;\n\n\nb',
  'x  \n  y', '  \n', '\n  \n  ', 'tab\t\tafter', '\t\n\t\n', ' ' + '\n'.repeat(5),
  // Words that are one Llama 3 token that no sequence of its merges makes: one token only
  // through ignore_merges.
  ' s\u00f6yledi', 'daleko', ' Cumhuriyeti ve', 'V\u00e1clav Havel', ' gerekmektedir.', 'do\u011frudan',
  ' uveden', ' z\u00e1kona', ' a\u00e7\u0131klam',
  // Not NFC: a combining accent after its letter, Hangul jamo, the angstrom and ohm signs,
  // combining marks out of canonical order. Qwen's NFC composes them first.
  'cafe\u0301', 'e\u0301t\u0301e\u0301', 'A\u030angstro\u0308m', '\u1100\u1161\u11a8', '\u212b and \u2126',
  'o\u0323\u0302', 'o\u0302\u0323', 'n\u0303o', '\u0041\u0308\u0301', 'fi\ufb01 (a ligature stays)',
  'Zo\u0308e Ba\u0308r', 'i\u0307stanbul', '\u0915\u093c \u0921\u093c',
  // SentencePiece's space written literally, and runs of spaces (Gemma has tokens for them).
  '\u2581hello', 'a\u2581\u2581b', '\u2581', 'two  spaces', 'four    spaces', ' '.repeat(31) + 'x',
  '\n'.repeat(31) + 'x', '\t'.repeat(40),
  // Characters a vocabulary may lack: byte fallback, or bytes of a byte-level model.
  '\ud835\udd18\ud835\udd2b\ud835\udd26\ud835\udd20\ud835\udd2c\ud835\udd21\ud835\udd22', '\ud80c\udc00 hieroglyph',
  '\ud840\udc00\ud840\udc01 ext B', '\ue000 private use', '\u0b85\u0bae\u0bcd\u0bae\u0bbe Tamil',
  '\u10e5\u10d0\u10e0\u10d7\u10e3\u10da\u10d8 Georgian', '\u0570\u0561\u0575\u0565\u0580\u0565\u0576 Armenian',
  '\u12a0\u121b\u122d\u129b Amharic', '\u1780\u17d2\u1798\u17c2\u179a Khmer', '\u0dc3\u0dd2\u0d82\u0dc4\u0dbd Sinhala',
  // More scripts and mixtures.
  'Za\u017c\u00f3\u0142\u0107 g\u0119\u015bl\u0105 ja\u017a\u0144', 'P\u0159\u00edli\u0161 \u017elu\u0165ou\u010dk\u00fd k\u016f\u0148',
  'Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u', '\u0130stanbul \u0131\u0130iI', 'S\u044a\u0435\u0448\u044c \u0436\u0435 \u0435\u0449\u0451',
  '\u0407\u0436\u0430\u043a \u0491\u0430\u043d\u043e\u043a', '\u039e\u03b5\u03c3\u03ba\u03b5\u03c0\u03ac\u03b6\u03c9',
  '\u0633\u0644\u0627\u0645 \u062f\u0646\u06cc\u0627', '\u09b9\u09cd\u09af\u09be\u09b2\u09cb', '\u4e2d\u6587English\u6df7\u5408123',
  '\u65e5\u672c\u8a9e\u3068\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a', '\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4',
  '\u00bfQu\u00e9? \u00a1S\u00ed!', '\u00abquotes\u00bb \u201eGerman\u201c \u201ccurly\u201d',
  'def f(x):\n    return x ** 2\n', 'if (a != b && c <= d) { x++; }', '<html><body>hi</body></html>',
  // Added tokens written literally, whole and in part, in the names several families use.
  '<|endoftext|>', 'The end.<|endoftext|>The start', '<|endoftext|><|endoftext|>', '<|im_start|>user\nhi<|im_end|>',
  '<|im_start|>assistant\n', '<s>', '</s>', '<s>hello</s>', 'a<s>b', '<unk>', '<bos>', '<eos>', '<pad>',
  '<|begin_of_text|>Hi', '<|eot_id|>', '<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>',
  '<start_of_turn>user\nhi<end_of_turn>\n', '<|im_start', '<|endoftext|', 'endoftext|>', '<<|im_end|>>',
  ' <|im_end|> ', '<tool_call>\n{"name": "f"}\n</tool_call>', '<think>\nhmm\n</think>',
];

// For each file, texts with some of its own added tokens (every 1 in `step`, at most
// `most`) written inside ordinary text.
function special_token_texts(added_tokens, { most = 40, seed = 7 } = {}) {
  const random = mulberry32(seed);
  const step = Math.max(1, Math.floor(added_tokens.length / most));
  const out = [];
  for (let i = 0; i < added_tokens.length && out.length < most; i += step) {
    const token = added_tokens[i].content;
    const before = HAND_PICKED[Math.floor(random() * HAND_PICKED.length)];
    out.push(`${before}${token} after`, `${token}${token}`, ` ${token}\n`);
  }
  return out;
}

const texts = [...gpt2_texts, ...HAND_PICKED];

module.exports = { texts, special_token_texts };
