// Labelled text for sequence classification: ROOT/train.tsv and ROOT/test.tsv, one "label<TAB>text" per line.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/error.h"
#include "data/dataset.h"
#include "data/tokenizer.h"

namespace mpt::data {
namespace {

struct Example {
  std::string label, text;
};

std::vector<Example> read_tsv(const std::string& path) {
  if (!std::ifstream(path))
    throw Error(path + ": cannot open (text_classification reads ROOT/train.tsv and ROOT/test.tsv)");
  std::vector<Example> examples;
  for_each_utf8_line(path, [&](std::string& line, int64_t number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) return;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0)
      throw Error(path + ":" + std::to_string(number) + ": expected LABEL<TAB>TEXT");
    examples.push_back({line.substr(0, tab), line.substr(tab + 1)});
  });
  if (examples.empty()) throw Error(path + ": no examples");
  return examples;
}

std::vector<std::string> sorted_labels(const std::vector<Example>& examples) {
  std::set<std::string> labels;
  for (const auto& example : examples) labels.insert(example.label);
  return {labels.begin(), labels.end()};
}

}  // namespace

std::vector<std::string> text_classification_labels(const std::string& root) {
  return sorted_labels(read_tsv(root + "/train.tsv"));
}

Dataset load_text_classification(const DataConfig& config, const std::string& split, int64_t limit) {
  const std::string path = config.root + "/" + (split == "train" ? "train" : "test") + ".tsv";
  std::vector<Example> examples = read_tsv(path);
  const std::vector<std::string> labels =
      split == "train" ? sorted_labels(examples) : text_classification_labels(config.root);
  if (limit > 0 && limit < static_cast<int64_t>(examples.size())) examples.resize(static_cast<size_t>(limit));
  WordPieceTokenizer tokenizer = wordpiece_tokenizer(config);
  const auto cls = static_cast<int32_t>(tokenizer.vocab().id("[CLS]"));
  const auto sep = static_cast<int32_t>(tokenizer.vocab().id("[SEP]"));
  const auto count = static_cast<int64_t>(examples.size());
  Dataset dataset;
  dataset.tokens = torch::zeros({count, config.seq_len}, torch::kInt);  // [PAD] = 0
  std::vector<int64_t> targets;
  auto rows = dataset.tokens.accessor<int32_t, 2>();
  for (int64_t i = 0; i < count; ++i) {
    const Example& example = examples[static_cast<size_t>(i)];
    auto label = std::lower_bound(labels.begin(), labels.end(), example.label);
    if (label == labels.end() || *label != example.label)
      throw Error(path + ": label '" + example.label + "' does not occur in train.tsv");
    targets.push_back(label - labels.begin());
    std::vector<int32_t> ids = tokenizer.encode(example.text);
    ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(config.seq_len - 2)));  // truncate, BERT-style
    rows[i][0] = cls;
    for (size_t t = 0; t < ids.size(); ++t) rows[i][static_cast<int64_t>(t) + 1] = ids[t];
    rows[i][static_cast<int64_t>(ids.size()) + 1] = sep;
  }
  dataset.labels = torch::tensor(targets, torch::kLong);
  dataset.num_classes = static_cast<int64_t>(labels.size());
  return dataset;
}

}  // namespace mpt::data
