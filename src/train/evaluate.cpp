// Evaluation loop: sums on the device, one host read at the end.
#include "train/evaluate.h"

#include "data/loader.h"
#include "precision/autocast.h"

namespace mpt::train {

EvalMetrics evaluate(models::ModelImpl& model, const data::Dataset& dataset, torch::Device device,
                     torch::ScalarType compute_dtype, int64_t batch_size, dist::Group* group) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const data::Shard shard = group ? data::Shard{group->rank(), group->world_size()} : data::Shard{};
  data::BatchLoader loader(dataset, batch_size, /*shuffle=*/false, /*seed=*/0, /*drop_last=*/false, shard,
                           data::Delivery::to(device));
  auto options = torch::TensorOptions().dtype(torch::kDouble).device(device);
  // loss sum, correct predictions, predictions (samples, or masked tokens under masked-LM)
  torch::Tensor sums = torch::zeros({3}, options);
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    data::Batch batch = loader.next();
    if (batch.targets.size(0) == 0) continue;  // this rank's slice of the ragged last batch is empty
    const torch::Tensor& inputs = batch.inputs;  // on the device
    const torch::Tensor& targets = batch.targets;
    models::Prediction prediction;
    {
      precision::AutocastScope autocast(device.type(), compute_dtype);
      prediction = model.predict(inputs, targets, batch.target_positions);
    }
    const torch::Tensor logits = prediction.logits.to(torch::kFloat);  // (N, K): the loss is always FP32
    sums[0] += torch::nn::functional::cross_entropy(
        logits, prediction.targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    sums[1] += logits.argmax(1).eq(prediction.targets).sum();
    sums[2] += prediction.targets.size(0);
  }
  model.train(was_training);
  if (group) group->all_reduce({sums}, "evaluation all-reduce");
  const torch::Tensor host = sums.cpu();
  const double predictions = host[2].item<double>();
  EvalMetrics metrics;
  metrics.samples = dataset.size();
  metrics.loss = host[0].item<double>() / predictions;
  metrics.accuracy = host[1].item<double>() / predictions;
  return metrics;
}

}  // namespace mpt::train
