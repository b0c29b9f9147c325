// A file of texts, as a user gives one to the operations that measure over many texts
// (model evict): plain text, a document a line (empty lines skipped), or JSON Lines, a line
// each {"text": "..."} or {"ids": [...]}. A file is JSON Lines when its first non-empty line
// starts with '{'.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attnlab/model/model_dir.hpp"

namespace attnlab {

struct CorpusLimits {
  std::uintmax_t max_bytes = std::uintmax_t(256) << 20;  // the file
  std::size_t max_documents = 1'000'000;
  std::size_t max_skipped = 10'000;  // bad lines left out (read_corpus with `skipped`) before the file is refused
};

struct CorpusDocument {
  std::size_t line = 0;  // 1-based, for messages
  std::vector<int> ids;  // tokenized, each id checked against the model's vocabulary
  std::string text;      // a text not tokenized yet (read_corpus with tokenize false), then empty
};

// A line left out of the documents (read_corpus with `skipped`): its number and why.
struct SkippedLine {
  std::size_t line = 0;
  std::string error;
};

// The documents of `path`, tokenized by the model. InputError naming `field` and the line for
// a line that is not JSON, has neither "text" nor "ids", holds an id the model lacks or no
// tokens (or, given `skipped`, that line listed there and left out); for a file over the
// limits, or one with no documents. With `tokenize` false a text is kept as it is, to be
// tokenized later (tokenize_documents) where only some documents are needed: every line is
// still checked, so the documents are the same ones, numbered the same.
std::vector<CorpusDocument> read_corpus(const ModelDir& model, const std::string& path, std::string_view field,
                                        const CorpusLimits& limits = {}, std::vector<SkippedLine>* skipped = nullptr,
                                        bool tokenize = true);

// Documents read with `tokenize` false, tokenized now (a text that gives no tokens is a document
// of none).
void tokenize_documents(const ModelDir& model, std::span<CorpusDocument> documents);

}  // namespace attnlab
