// A GGUF file: the input is a whole file, mapped as GgufFile maps one (an in-memory file,
// memfd_create, opened by its /proc path). A file that is accepted has every tensor inside
// the file at an aligned offset, spanning exactly its blocks, overlapping no other, and
// each tensor dequantizes (the values' count checked; the values are whatever the bytes say);
// a tokenizer in the metadata is read and tokenizes a text into ids of its vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnlab/model/bpe.hpp"
#include "attnlab/model/gguf.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fuzz::MemoryFile input(data, size);
  const std::string path = input.path();
  try {
    const GgufFile file(path);
    for (const GgufTensor& t : file.tensors()) {
      fuzz::check(t.offset % file.alignment() == 0, "a tensor at an unaligned offset", t.name);
      fuzz::check(t.bytes == t.elements() / ggml_block_values(t.type) * ggml_block_bytes(t.type),
                  "a tensor's bytes are not its blocks'", t.name);
      fuzz::check(file.find(t.name) == &t, "find misses a tensor", t.name);
      const std::span<const std::byte> bytes = file.bytes(t);
      fuzz::check(bytes.size() == t.bytes, "bytes() gives the wrong size", t.name);
      if (t.elements() <= (1u << 20)) {  // dequantizing a large tensor proves no more than a small one
        std::vector<float> values(t.elements());
        dequantize(t.type, bytes.data(), values.size(), values.data());
      }
    }
    (void)file.metadata().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (has_gguf_tokenizer(file)) {  // the tokenizer in the metadata, and a text through it
      const BpeTokenizer tokenizer = BpeTokenizer::from_gguf(file);
      const std::vector<TokenId> ids = tokenizer.encode("Hello, world! 12345 \xc3\xa9");
      for (TokenId id : ids)
        fuzz::check(static_cast<std::size_t>(id) < tokenizer.id_limit(), "an id past the vocabulary");
      (void)tokenizer.decode(ids);
    }
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
