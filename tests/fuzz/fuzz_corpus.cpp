// A file of texts (operations/corpus.hpp: plain text a document a line, or JSON Lines of
// {"text"} or {"ids"}), read for the tiny GPT-2 fixture (vocabulary 40, no tokenizer, so a
// line of text is refused naming its line). The input is the file's bytes. A file that is
// accepted gives documents with at least one token each, every id in the vocabulary, their
// lines ascending, and the same documents when read untokenized and tokenized afterwards (a
// survey's shard); one that is refused says so in valid UTF-8. Read again leaving bad lines
// out, the lines kept and skipped are distinct and in order.
#include <cstddef>
#include <cstdint>

#include "attnlab/model/model_dir.hpp"
#include "attnlab/operations/corpus.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ModelDir model = open_model_dir(ATTNLAB_FUZZ_MODEL);
  const fuzz::MemoryFile input(data, size);
  try {
    const std::vector<CorpusDocument> docs = read_corpus(model, input.path(), "texts");
    fuzz::check(!docs.empty(), "a file of no documents accepted");
    for (std::size_t k = 0; k < docs.size(); ++k) {
      fuzz::check(!docs[k].ids.empty(), "a document of no tokens");
      fuzz::check(k == 0 || docs[k].line > docs[k - 1].line, "lines out of order");
      for (int id : docs[k].ids)
        fuzz::check(id >= 0 && std::size_t(id) < model.model.config.vocab_size, "an id outside the vocabulary");
    }
    // Read without tokenizing (a survey's shard), then tokenized: the same documents.
    std::vector<CorpusDocument> later = read_corpus(model, input.path(), "texts", {}, nullptr, /*tokenize=*/false);
    tokenize_documents(model, later);
    fuzz::check(later.size() == docs.size(), "another number of documents read untokenized");
    for (std::size_t k = 0; k < docs.size(); ++k)
      fuzz::check(later[k].line == docs[k].line && later[k].ids == docs[k].ids, "another document read untokenized");
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  // With bad lines left out (`model survey --skip-bad-lines`): the lines kept and the lines
  // skipped are different lines, each in order, each skipped one with its reason.
  try {
    std::vector<SkippedLine> skipped;
    const std::vector<CorpusDocument> docs = read_corpus(model, input.path(), "texts", {}, &skipped);
    for (std::size_t k = 0; k < skipped.size(); ++k) {
      fuzz::check(k == 0 || skipped[k].line > skipped[k - 1].line, "skipped lines out of order");
      fuzz::check(!skipped[k].error.empty(), "a line skipped without a reason");
      for (const CorpusDocument& d : docs)
        fuzz::check(d.line != skipped[k].line, "a line both kept and skipped");
    }
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
