// Writes a Hugging Face tokenizer.json as the GGUF metadata llama.cpp's converter
// (convert_hf_to_gguf.py) writes for it: a GGUF v3 file with no tensors whose metadata is
// tokenizer.ggml.*, for the tests that check attnlab's GGUF tokenizer against the
// tokenizer.json it came from. Written here from the GGUF specification (ggml's
// docs/gguf.md) and llama.cpp's vocabulary keys, independently of attnlab's C++ reader.
//
//   model       "gpt2" for a byte-level BPE file (its pre_tokenizer has ByteLevel), else
//               "llama" (SentencePiece-style: byte_fallback, "▁" for a space)
//   pre         ("gpt2" only) the name llama.cpp gives the file's pre-tokenizer: "llama-bpe"
//               (Llama 3's pattern), "qwen2" (Qwen's), "gpt-2" (ByteLevel's own pattern),
//               "smollm" (Digits, then ByteLevel)
//   tokens      by id; token_type: 1 normal, 2 unknown, 3 control (a special added token),
//               4 user-defined (an added token that is not special), 6 byte ("<0xNN>", "llama")
//   merges      ("gpt2") "a b" by rank
//   scores      ("llama") a SentencePiece score per token: the tokenizer.json's merges were
//               made by ranking every split of a token by its score, so a token's score here
//               is minus the rank of the first merge that makes it (tokens no merge makes:
//               below every merge's, by id)
//   bos/eos/unknown_token_id, add_bos_token (the post-processor puts a token first),
//   add_space_prefix ("llama": the normalizer prepends "▁")
'use strict';

const { gguf_file } = require('./gguf_writer.js');

const LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The steps of a normalizer, pre-tokenizer or post-processor (a Sequence's, or itself).
const steps = (x, key) => (x ? (x.type === 'Sequence' ? x[key] : [x]) : []);

function pre_name(json) {
  const pre = steps(json.pre_tokenizer, 'pretokenizers');
  const split = pre.find((s) => s.type === 'Split');
  if (split && split.pattern.Regex === LLAMA3) return 'llama-bpe';
  if (split && split.pattern.Regex === QWEN2) return 'qwen2';
  if (pre.some((s) => s.type === 'Digits' && s.individual_digits)) return 'smollm';
  if (pre.length === 1 && pre[0].type === 'ByteLevel' && pre[0].use_regex !== false) return 'gpt-2';
  throw new Error(`no llama.cpp pre-tokenizer name for ${JSON.stringify(json.pre_tokenizer).slice(0, 200)}`);
}

// The token the post-processor puts before the text, or null.
function bos_of(json) {
  for (const p of steps(json.post_processor, 'processors')) {
    if (p.type !== 'TemplateProcessing') continue;
    const first = p.single[0];
    if (first && first.SpecialToken) return p.special_tokens[first.SpecialToken.id].ids[0];
  }
  return null;
}

// ---- the conversion ------------------------------------------------------------------------

// The GGUF bytes of a tokenizer.json (parsed) and its tokenizer_config.json (parsed, or {}).
function gguf_of_tokenizer(json, config = {}) {
  const model = json.model;
  const byte_level = steps(json.pre_tokenizer, 'pretokenizers').some((s) => s.type === 'ByteLevel');
  const tokens = [];
  const types = [];
  for (const [token, id] of Object.entries(model.vocab)) {
    tokens[id] = token;
    types[id] = !byte_level && /^<0x[0-9A-F]{2}>$/.test(token) ? 6 : 1;
  }
  for (const t of json.added_tokens) {
    tokens[t.id] = t.content;
    types[t.id] = t.special ? 3 : 4;
  }
  if (model.unk_token != null) types[model.vocab[model.unk_token]] = 2;
  for (let i = 0; i < tokens.length; ++i)
    if (tokens[i] === undefined) { tokens[i] = `[PAD${i}]`; types[i] = 5; }
  const merges = model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));

  const entries = [['general.architecture', 'string', 'llama'],
    ['tokenizer.ggml.model', 'string', byte_level ? 'gpt2' : 'llama'],
    ['tokenizer.ggml.tokens', ['string'], tokens],
    ['tokenizer.ggml.token_type', ['i32'], types]];
  if (byte_level) {
    entries.push(['tokenizer.ggml.pre', 'string', pre_name(json)], ['tokenizer.ggml.merges', ['string'], merges]);
  } else {
    const first_rank = new Map();
    merges.forEach((m, rank) => {
      const made = m.replace(' ', '');
      if (!first_rank.has(made)) first_rank.set(made, rank);
    });
    const scores = tokens.map((t, id) => (first_rank.has(t) ? -first_rank.get(t) : -merges.length - 1 - id));
    const prepends = steps(json.normalizer, 'normalizers').some((s) => s.type === 'Prepend');
    entries.push(['tokenizer.ggml.scores', ['f32'], scores], ['tokenizer.ggml.add_space_prefix', 'bool', prepends]);
  }
  const bos = bos_of(json);
  const id_of = (name) => (typeof name === 'string' ? tokens.indexOf(name) : name && tokens.indexOf(name.content));
  const bos_id = bos ?? (config.bos_token ? id_of(config.bos_token) : -1);
  if (bos_id >= 0) entries.push(['tokenizer.ggml.bos_token_id', 'u32', bos_id]);
  const eos_id = config.eos_token ? id_of(config.eos_token) : -1;
  if (eos_id >= 0) entries.push(['tokenizer.ggml.eos_token_id', 'u32', eos_id]);
  if (model.unk_token != null) entries.push(['tokenizer.ggml.unknown_token_id', 'u32', model.vocab[model.unk_token]]);
  entries.push(['tokenizer.ggml.add_bos_token', 'bool', bos !== null]);
  return gguf_file(entries);
}

module.exports = { gguf_of_tokenizer };
