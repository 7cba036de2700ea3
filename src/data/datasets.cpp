// The dataset registry: data.name -> sample shape and loader.
#include "common/error.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "data/wordpiece.h"

namespace mpt::data {

SampleShape sample_shape(const DataConfig& config) {
  SampleShape shape;
  if (config.name == "fashion_mnist") {
    const int64_t size = config.image_size > 0 ? config.image_size : 28;
    shape.channels = config.channels > 0 ? config.channels : 1;
    shape.height = shape.width = size;
    shape.num_classes = 10;
    return shape;
  }
  if (config.name == "cifar10" || config.name == "image_folder") {
    shape.channels = 3;
    shape.height = shape.width = config.image_size > 0 ? config.image_size : config.name == "cifar10" ? 32 : 224;
    shape.num_classes = config.name == "cifar10" ? 10 : static_cast<int64_t>(image_folder_classes(config.root).size());
    return shape;
  }
  if (config.name == "text_classification") {
    shape.seq_len = config.seq_len;
    shape.vocab_size = Vocabulary::load(config.vocab).size();
    shape.num_classes = static_cast<int64_t>(text_classification_labels(config.root).size());
    return shape;
  }
  if (config.name == "text_corpus") {
    shape.seq_len = config.seq_len;
    shape.vocab_size = Vocabulary::load(config.vocab).size();
    shape.masked_fraction = config.mask_prob;
    return shape;
  }
  throw UsageError("data.name: unknown dataset '" + config.name + "'");
}

Dataset load_dataset(const DataConfig& config, const std::string& split) {
  const int64_t limit = split == "train" ? config.train_limit : config.test_limit;
  if (config.name == "fashion_mnist") return load_fashion_mnist(config, split == "train" ? "train" : "t10k", limit);
  if (config.name == "cifar10") return load_cifar10(config, split, limit);
  if (config.name == "image_folder") return load_image_folder(config, split, limit);
  if (config.name == "text_corpus") return load_text_corpus(config, split, limit);
  if (config.name == "text_classification") return load_text_classification(config, split, limit);
  throw UsageError("data.name: unknown dataset '" + config.name + "'");
}

}  // namespace mpt::data
