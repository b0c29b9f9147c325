// A file of texts (attnlab/operations/corpus.hpp).
#include "attnlab/operations/corpus.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/model/forward.hpp"

namespace attnlab {

std::vector<CorpusDocument> read_corpus(const ModelDir& m, const std::string& path, std::string_view field,
                                        const CorpusLimits& limits, std::vector<SkippedLine>* skipped, bool tokenize) {
  const std::string bytes = read_file_within(path, limits.max_bytes, field);
  std::vector<CorpusDocument> out;
  bool json_lines = false, first = true;
  std::size_t line = 0;
  for (std::size_t begin = 0; begin < bytes.size();) {
    std::size_t end = bytes.find('\n', begin);
    if (end == std::string::npos) end = bytes.size();
    std::string_view text(bytes.data() + begin, end - begin);
    begin = end + 1;
    ++line;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (first) json_lines = text[text.find_first_not_of(" \t")] == '{', first = false;
    const auto at_line = [&](std::string_view what) { fail(field, fmt::format("{} line {}: {}", path, line, what)); };
    if (out.size() == limits.max_documents)
      at_line(fmt::format("more than {} documents; split the file", limits.max_documents));
    CorpusDocument doc;
    doc.line = line;
    try {  // a bad line: InputError, refused, or with `skipped` listed and left out
      try {
        const auto encode = [&](std::string_view words) {
          if (!m.tokenizer)
            at_line(
                "this model has no tokenizer (tokenizer.json, or vocab.json and merges.txt); write JSON Lines of "
                "{\"ids\": [...]} instead");
          if (tokenize)
            doc.ids = encode_text(m, words);
          else if (words.empty())
            at_line("no tokens");
          else
            doc.text = words;
        };
        if (!json_lines) {
          encode(text);
        } else {
          const nlohmann::json j = nlohmann::json::parse(text);
          if (!j.is_object() || (j.contains("text") == j.contains("ids")))
            at_line("a JSON Lines document is an object with \"text\" (a string) or \"ids\" (token ids), one of them");
          if (j.contains("text")) {
            if (!j["text"].is_string()) at_line("\"text\" must be a string");
            encode(j["text"].get<std::string>());
          } else {
            if (!j["ids"].is_array()) at_line("\"ids\" must be a list of token ids");
            for (const nlohmann::json& id : j["ids"]) {
              if (!id.is_number_integer()) at_line("\"ids\" must be a list of token ids (integers)");
              const long long v = id.get<long long>();
              if (v < 0 || v >= static_cast<long long>(m.model.config.vocab_size))
                at_line(
                    fmt::format("id {} is outside the model's vocabulary (0 to {})", v, m.model.config.vocab_size - 1));
              doc.ids.push_back(static_cast<int>(v));
            }
          }
        }
      } catch (const nlohmann::json::parse_error& e) {  // its message quotes the bytes, which may not be UTF-8
        at_line(fmt::format(
            "not JSON (a syntax error at byte {} of the line); the file's first line made it JSON Lines", e.byte));
      } catch (const nlohmann::json::exception&) {
        at_line("a value of the wrong type; \"text\" is a string, \"ids\" a list of token ids");
      }
      if (doc.ids.empty() && doc.text.empty()) at_line("no tokens");
    } catch (const InputError& e) {
      if (!skipped) throw;
      if (skipped->size() == limits.max_skipped)
        at_line(fmt::format("more than {} lines skipped as bad; is this the file meant? ({})", limits.max_skipped,
                            e.what()));
      skipped->push_back({line, e.what()});
      continue;
    }
    out.push_back(std::move(doc));
  }
  if (out.empty()) fail(field, fmt::format("{} holds no documents; write one a line", path));
  return out;
}

void tokenize_documents(const ModelDir& m, std::span<CorpusDocument> documents) {
  for (CorpusDocument& d : documents)
    if (!d.text.empty()) d.ids = encode_text(m, d.text), d.text.clear(), d.text.shrink_to_fit();
}

}  // namespace attnlab
