// `mpt tokenize`: text through the tokenizer mpt trains with (data.tokenizer, or data.vocab and data.lowercase),
// one line in, one line out: the tokens, or with --json the tokens and their ids.
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

#include "app/commands.h"
#include "common/error.h"
#include "common/files.h"
#include "data/tokenizer.h"
#include "data/wordpiece.h"

namespace mpt::app {

int run_tokenize(const TokenizeOptions& options) {
  data::DataConfig text;
  text.tokenizer = options.tokenizer;
  text.vocab = options.vocab;
  text.lowercase = !options.cased;
  const auto tokenizer = data::text_tokenizer(text);
  std::ifstream file;
  const bool from_file = !options.input.empty() && options.input != "-";
  if (from_file) {
    require_regular_file(options.input);
    file.open(options.input, std::ios::binary);
    if (!file) throw UsageError(options.input + ": cannot open the text to tokenize");
  }
  std::ios::sync_with_stdio(false);  // standard input read a byte at a time: without the C stdio locks
  std::istream& in = from_file ? static_cast<std::istream&>(file) : std::cin;
  // The training reader's rules (invalid UTF-8, binary data and overlong lines are refused), so that what this
  // prints is what training sees, or the same error.
  data::for_each_utf8_line(in, from_file ? options.input : "standard input", [&](std::string& line, int64_t) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<int32_t> ids = tokenizer->encode(line);
    std::vector<std::string> tokens;
    for (const int32_t id : ids) tokens.push_back(tokenizer->token(id));
    if (options.json) {
      std::cout << nlohmann::json{{"tokens", tokens}, {"ids", ids}}.dump() << "\n";
    } else {
      for (size_t i = 0; i < tokens.size(); ++i) std::cout << (i ? " " : "") << tokens[i];
      std::cout << "\n";
    }
  });
  std::cout.flush();
  if (!std::cout) throw Error("standard output: writing the tokens failed");
  return kExitOk;
}

}  // namespace mpt::app
