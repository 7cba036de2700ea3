// Synthetic data in the spec's batch shape.
#include "data/dataset.h"

#include <algorithm>

#include "data/tokenizer.h"

namespace mpt::data {

Dataset synthetic_dataset(const DataConfig& config, int64_t samples) {
  const SampleShape shape = sample_shape(config);
  torch::Generator generator = at::detail::createCPUGenerator(/*seed_in=*/1234);
  Dataset dataset;
  if (shape.seq_len > 0) {  // random ids above the special tokens (BERT's first 1,000 ids are [PAD], [unused...])
    const int64_t first_word = std::min<int64_t>(1000, shape.vocab_size - 1);
    const int64_t window = shape.seq_len + (shape.causal ? 1 : 0);  // causal: inputs and their next tokens
    dataset.tokens = torch::randint(first_word, shape.vocab_size, {samples, window}, generator,
                                    torch::TensorOptions().dtype(torch::kInt));
    if (shape.causal) {
      dataset.causal_lm = CausalLmConfig{shape.eot_id};
    } else if (shape.num_classes > 0) {  // labelled text (text_classification)
      dataset.labels =
          torch::randint(0, shape.num_classes, {samples}, generator, torch::TensorOptions().dtype(torch::kLong));
      dataset.num_classes = shape.num_classes;
    } else {  // masked-LM: masking as the real corpus does it
      dataset.masked_lm = masked_lm_config(wordpiece_tokenizer(config).vocab(), config.mask_prob);
    }
    return dataset;
  }
  dataset.images = torch::randint(0, 256, {samples, shape.channels, shape.height, shape.width}, generator,
                                  torch::TensorOptions().dtype(torch::kUInt8));
  dataset.labels =
      torch::randint(0, shape.num_classes, {samples}, generator, torch::TensorOptions().dtype(torch::kLong));
  dataset.num_classes = shape.num_classes;
  dataset.mean = {0.5f};
  dataset.std = {0.29f};
  return dataset;
}

}  // namespace mpt::data
