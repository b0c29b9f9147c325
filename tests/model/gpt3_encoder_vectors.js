// GPT-2 token ids for a few hundred varied strings, computed by the npm package
// gpt-3-encoder (a JavaScript port of OpenAI's GPT-2 encoder, shipping GPT-2's vocabulary),
// to check attnlab's C++ tokenizer against (bpe_agrees_with_gpt3_encoder.test.js).
//
// The strings are generated here, deterministically (a seeded generator, no clock): hand
// picked ones that exercise each part of the pre-tokenizing pattern (contractions in both
// cases, words with and without a leading space, numbers, punctuation runs, whitespace
// runs before a word and at the end), scripts other than Latin (accents, CJK, Arabic,
// Devanagari, Thai), emoji including ZWJ sequences, flags and skin tones, and long words;
// then random mixtures of those fragments.
//
// Usage: node tests/model/gpt3_encoder_vectors.js [OUT.json]
//   writes [{"text": ..., "ids": [...]}, ...] to OUT.json, or to stdout.
// As a module: require('./gpt3_encoder_vectors.js') gives { texts, vectors, KNOWN_DIFFERENCES }.
'use strict';

const { encode } = require('gpt-3-encoder');

// The seeded generator: mulberry32, 32-bit state, the same sequence on every machine.
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
  // The published examples and the basics.
  'Hello world', ' Hello world', 'Hello, world!', 'hello', 'HELLO', 'a', ' ', '', 'x y z',
  'The quick brown fox jumps over the lazy dog.',
  // Contractions: the pattern knows 's 't 're 've 'm 'll 'd in lower case only.
  "I'm", "I'M", "i'm", "you're", "YOU'RE", "You'Re", "they've", "THEY'VE", "we'll", "WE'LL", "he'd", "HE'D",
  "it's", "IT'S", "don't", "DON'T", "can't", "'s", "'S", "''s", "'''", "rock 'n' roll", "o'clock", "y'all'd've",
  'I\u2019m (a curly apostrophe is punctuation, not a contraction)', "'tis", "students' books", "James's",
  // Whitespace: runs of spaces before a word and at the end, tabs, newlines, CRLF.
  'two  spaces', 'three   spaces', 'trailing   ', '   leading', '\tindented', 'a\tb\tc', 'line one\nline two',
  'windows\r\nline\r\nends\r\n', '\n\n\nparagraphs\n\n', ' \n \n', '\t \t x', 'end with newline\n', '    ',
  'a \u180eb (U+180E is no space to Unicode since 6.3)', 'mixed \u00a0no-break\u00a0spaces', 'ideographic\u3000space', 'em\u2003space', 'line\u2028separator',
  // Numbers.
  '0', '42', '3.14159', '1,000,000', '12345678901234567890', 'year 2024', 'v1.2.3-beta', '0x7fff', '-17',
  '\u00bd and \u00b2 and \u2167', '\u0663\u0664\u0665 Arabic-Indic digits', '\uff11\uff12\uff13 full-width',
  // Punctuation runs and code.
  '!!!', '???!!!...', '...', '---', '***bold***', '```js\nconst x = 1;\n```', 'a->b', 'f(x) = x**2 + 1;',
  '<div class="x">hi</div>', '{"key": [1, 2, 3]}', 'https://example.com/path?q=1&r=2', 'user@example.com',
  '#hashtag @mention $100 50% ^caret ~tilde', 'C++ and C# and F#', ',,,,', 'a,b,c', ',"', '", "', '\\n\\t',
  // Latin with accents, Greek, Cyrillic.
  'caf\u00e9', 'cafe\u0301 (a combining accent)', 'na\u00efve r\u00e9sum\u00e9', '\u00c5ngstr\u00f6m', 'stra\u00dfe',
  '\u0152uvre \u00e6sthetic', '\u03b1\u03b2\u03b3 \u0394\u03b5\u03bb\u03c4\u03b1', '\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!',
  // CJK, Arabic, Hebrew, Devanagari, Thai, Korean.
  '\u4f60\u597d\uff0c\u4e16\u754c', '\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8', '\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8',
  '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645', '\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd',
  '\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e', '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01',
  // Emoji: single, skin tones, ZWJ families, flags, keycaps, variation selectors.
  '\ud83d\ude00', 'I \u2764\ufe0f NY', '\ud83d\udc4d\ud83c\udffd', '\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67\u200d\ud83d\udc66',
  '\ud83c\udff3\ufe0f\u200d\ud83c\udf08', '\ud83c\uddeb\ud83c\uddf7\ud83c\uddef\ud83c\uddf5', '1\ufe0f\u20e3', 'ok\ud83d\udc4cok',
  '\ud83e\uddd1\u200d\ud83d\udcbb codes', ' \ud83d\ude80\ud83d\ude80\ud83d\ude80',
  // Long words.
  'pneumonoultramicroscopicsilicovolcanoconiosis', 'a'.repeat(300), ' ' + 'z'.repeat(257), 'ab'.repeat(200),
  '\u00e9'.repeat(120), '!'.repeat(150), '7'.repeat(100), ' '.repeat(100) + 'x', 'x' + ' '.repeat(100),
  // Odd characters: zero-width space, soft hyphen, controls, replacement character.
  'zero\u200bwidth', 'soft\u00adhyphen', 'bell\u0007char', 'nul\u0000char', '\u007fdel', '\ufffd replacement',
];

// Fragments the random strings are made of.
const FRAGMENTS = [
  'the', 'The', 'THE', ' cat', ' Cat', 'running', "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'M", "'LL",
  ' ', '  ', '   ', '\t', '\n', '\r\n', '\n\n', '0', '12', '345', '2024', '.', ',', '!', '?', '...', '-', '--', '(',
  ')', '"', "'", '`', '/', ':', ';', '[', ']', '{', '}', '<', '>', '=', '+', '*', '&', '%', '$', '#', '@', '_',
  'caf\u00e9', '\u00fc', '\u00f1', '\u00df', '\u00e5', 'e\u0301', '\u4e2d\u6587', '\u6f22\u5b57', '\u3072\u3089\u304c\u306a',
  '\u30ab\u30bf\u30ab\u30ca', '\ud55c', '\u0639\u0631\u0628\u064a', '\u05e2\u05d1\u05e8\u05d9\u05ea', '\u0939\u093f\u0928\u094d\u0926\u0940',
  '\u0e44\u0e17\u0e22', '\u0440\u0443\u0441', '\u03b5\u03bb', '\ud83d\ude00', '\ud83d\udc4d\ud83c\udffb', '\u2764\ufe0f',
  '\ud83d\udc69\u200d\ud83d\udd2c', '\ud83c\uddfa\ud83c\uddf8', '\u00a0', '\u3000', '\u2019', '\u2014', '\u00bd', '\u2167',
];

function random_texts(count, seed) {
  const random = mulberry32(seed);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const texts = [];
  for (let i = 0; i < count; ++i) {
    const parts = 1 + Math.floor(random() * 12);
    let text = '';
    for (let p = 0; p < parts; ++p) text += pick(FRAGMENTS);
    texts.push(text);
  }
  return texts;
}

// Strings on which gpt-3-encoder and GPT-2's own pattern legitimately differ, kept out of
// `texts`. The pattern's \s means Unicode's White_Space property in Python's `regex`
// module, which GPT-2's encoder uses (and in attnlab, which spells it \p{White_Space} for
// PCRE2); JavaScript's \s is another list:
//   U+FEFF (byte-order mark) is \s to JavaScript only;
//   U+0085 (next line) is White_Space, but not \s to JavaScript.
// `pieces` is how GPT-2's pattern cuts the text and `ids` what GPT-2's own encoder (the
// Python original, with the `regex` module) gives; both were taken from it once and are
// written here, as the test cannot run Python.
const KNOWN_DIFFERENCES = [
  { text: 'a \ufeffb', pieces: ['a', ' \ufeff', 'b'], ids: [64, 27332, 119, 123, 65],
    why: 'U+FEFF is \\s to JavaScript, not White_Space' },
  { text: 'a \u0085b', pieces: ['a', ' ', '\u0085', 'b'], ids: [64, 220, 126, 227, 65],
    why: 'U+0085 is White_Space, not \\s to JavaScript' },
  { text: '! \ufeff!', pieces: ['!', ' \ufeff!'], ids: [0, 27332, 119, 123, 0],
    why: 'U+FEFF is \\s to JavaScript, not White_Space' },
  { text: '! \u0085!', pieces: ['!', ' ', '\u0085', '!'], ids: [0, 220, 126, 227, 0],
    why: 'U+0085 is White_Space, not \\s to JavaScript' },
];

const texts = [...HAND_PICKED, ...random_texts(300, 20240601)];
const vectors = () => texts.map((text) => ({ text, ids: encode(text) }));

module.exports = { texts, vectors, KNOWN_DIFFERENCES };

if (require.main === module) {
  const out = JSON.stringify(vectors());
  if (process.argv[2]) require('node:fs').writeFileSync(process.argv[2], out + '\n');
  else process.stdout.write(out + '\n');
}
