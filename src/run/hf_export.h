// A trained BERT or Llama run as a complete Hugging Face model folder: config.json (the family's, with
// id2label/label2id for a classifier), model.safetensors, and the tokenizer the run trained with (vocab.txt,
// tokenizer_config.json and special_tokens_map.json for WordPiece; tokenizer.json and tokenizer_config.json for a
// data.tokenizer), so that AutoTokenizer, AutoModel* and pipeline() load the folder as they load the hub's.
#pragma once

#include <string>

#include "io/weights.h"

namespace mpt::run {

// Writes the folder `out` for `weights`, read from `checkpoint` inside a run directory whose config.yaml gives
// the architecture, the vocabulary, the lower-casing and the classes. A folder that holds files already is refused
// (UsageError) unless `force`, which first removes every file a Hugging Face loader would read there. Returns
// warnings (a class list that could not be read) for the caller to print.
std::vector<std::string> write_hf_folder(const std::string& checkpoint, const io::NamedTensorList& weights,
                                         const std::string& out, bool force = false);

}  // namespace mpt::run
