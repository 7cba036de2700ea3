// `mpt tokenize`: text through the WordPiece tokenizer mpt trains with (data.vocab, data.lowercase), one line
// in, one line out: the tokens, or with --json the tokens and their ids.
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

#include "app/commands.h"
#include "common/error.h"
#include "common/files.h"
#include "data/wordpiece.h"

namespace mpt::app {

int run_tokenize(const TokenizeOptions& options) {
  const data::WordPieceTokenizer tokenizer(data::Vocabulary::load(options.vocab), /*lowercase=*/!options.cased);
  std::ifstream file;
  if (!options.input.empty() && options.input != "-") {
    require_regular_file(options.input);
    file.open(options.input, std::ios::binary);
    if (!file) throw UsageError(options.input + ": cannot open the text to tokenize");
  }
  std::istream& in = file.is_open() ? static_cast<std::istream&>(file) : std::cin;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<std::string> tokens = tokenizer.tokenize(line);
    if (options.json) {
      std::vector<int64_t> ids;
      for (const auto& token : tokens) ids.push_back(tokenizer.vocab().find(token));
      std::cout << nlohmann::json{{"tokens", tokens}, {"ids", ids}}.dump() << "\n";
    } else {
      for (size_t i = 0; i < tokens.size(); ++i) std::cout << (i ? " " : "") << tokens[i];
      std::cout << "\n";
    }
  }
  return kExitOk;
}

}  // namespace mpt::app
