// Hugging Face's config.json: reading its keys, and for BERT both ways: the architecture of a pretrained model
// (all-MiniLM-L6-v2 is 6 layers, hidden 384, 12 heads) and the file an export writes so that from_pretrained rebuilds
// mpt's model.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "models/bert.h"

namespace mpt::models {

// The JSON object in `path` (a config.json, or a folder holding one), with `file` set to the file read; an error
// naming it when it is missing, not JSON or not an object.
nlohmann::json read_hf_config_json(const std::string& path, std::string& file);

// `key` of `json` (read from `file`): a positive integer up to `ceiling`; `fallback` when absent (0: required).
int64_t hf_config_size(const nlohmann::json& json, const std::string& file, const char* key, int64_t fallback,
                       int64_t ceiling);

// `key` of `json` (read from `file`): a positive number; `fallback` when absent.
double hf_config_positive(const nlohmann::json& json, const std::string& file, const char* key, double fallback);

// The first dimension of the weight `name` (a vocabulary, a class count) for an export; an mpt::Error naming the
// tensor and `what` the weights were expected to be ("a BERT checkpoint of this head") when it is not there.
int64_t weight_rows(const WeightShapes& weights, const std::string& name, const std::string& what);

// model.hf_config's problems for a family whose bare name (`bare_name`: "bert", "llama") builds from it: a path
// that is not there, or the bare name without one (`needs` says what to do).
std::vector<ModelProblem> hf_config_problems(const ModelConfig& config, const std::string& hf_config,
                                             const std::string& bare_name, const std::string& needs);

// The architecture in `path` (a config.json, or a folder holding one). Dropout and the head are the spec's.
// Throws mpt::Error naming the file, the key and what was expected.
BertConfig read_hf_bert_config(const std::string& path);

// config.json for `config`: BertForMaskedLM, or BertForSequenceClassification with its label count.
nlohmann::ordered_json hf_bert_config(const BertConfig& config);

}  // namespace mpt::models
