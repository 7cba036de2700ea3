// Hugging Face's config.json for BERT, both ways: the architecture of a pretrained model (all-MiniLM-L6-v2 is
// 6 layers, hidden 384, 12 heads) and the file an export writes so that from_pretrained rebuilds mpt's model.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "models/bert.h"

namespace mpt::models {

// The architecture in `path` (a config.json, or a folder holding one). Dropout and the head are the spec's.
// Throws mpt::Error naming the file, the key and what was expected.
BertConfig read_hf_bert_config(const std::string& path);

// config.json for `config`: BertForMaskedLM, or BertForSequenceClassification with its label count.
nlohmann::ordered_json hf_bert_config(const BertConfig& config);

}  // namespace mpt::models
