// The datasets data.name selects, each a descriptor: whether its samples are images or token sequences, the spec
// keys it reads beyond the common ones (data.image_size, data.vocab, ...: declared here, once, bound to DataConfig's
// members; the key table, data.name's choices and which keys apply are assembled from them), the files it needs
// (checked before any work), its sample shape and its loader.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/keys.h"
#include "data/dataset.h"

namespace mpt::data {

// A file a dataset needs that is missing or unreadable, under the key that names it ("data.root", "data.vocab").
struct DataProblem {
  std::string key;
  std::string message;  // "ROOT: train.tsv: no such file (LABEL<TAB>TEXT per line)"
};

struct DatasetKind {
  std::string name;
  Modality modality;
  keys::OptionTable<DataConfig> options;  // its own keys; read_options() fills DataConfig from them
  std::function<std::vector<DataProblem>(const DataConfig&)> check_files;
  std::function<SampleShape(const DataConfig&)> shape;
  std::function<Dataset(const DataConfig&, const std::string& split, int64_t limit)> load;
};

const std::vector<DatasetKind>& dataset_kinds();

// The kind data.name names; a UsageError for an unknown name.
const DatasetKind& dataset_kind(const std::string& name);

// `config` (data.name and the common keys read) with the values of its dataset's own keys.
DataConfig read_options(const keys::Options& values, DataConfig config);

}  // namespace mpt::data
