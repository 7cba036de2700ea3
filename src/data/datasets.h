// The datasets data.name selects, as a table: each says whether its samples are images or token sequences, checks
// the files it needs before any work, gives its sample shape and loads a split.
#pragma once

#include <functional>
#include <string>
#include <vector>

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
  std::function<std::vector<DataProblem>(const DataConfig&)> check_files;
  std::function<SampleShape(const DataConfig&)> shape;
  std::function<Dataset(const DataConfig&, const std::string& split, int64_t limit)> load;
};

const std::vector<DatasetKind>& dataset_kinds();

// The kind data.name names; a UsageError for an unknown name.
const DatasetKind& dataset_kind(const std::string& name);

}  // namespace mpt::data
