// Evaluation loop: sums on the device, one host read at the end.
#include "core/train/evaluate.h"

#include "core/data/loader.h"
#include "core/precision/autocast.h"

namespace mpt::train {

EvalMetrics evaluate(models::ModelImpl& model, const data::Dataset& dataset, torch::Device device,
                     torch::ScalarType compute_dtype, int64_t batch_size) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  data::BatchLoader loader(dataset, batch_size, /*shuffle=*/false, /*seed=*/0, /*drop_last=*/false);
  auto options = torch::TensorOptions().dtype(torch::kDouble).device(device);
  torch::Tensor loss_sum = torch::zeros({}, options), correct = torch::zeros({}, options);
  int64_t predictions = 0;  // samples, or masked tokens under masked-LM
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    data::Batch batch = loader.next();
    torch::Tensor inputs = batch.inputs.to(device), targets = batch.targets.to(device);
    models::Prediction prediction;
    {
      precision::AutocastScope autocast(device.type(), compute_dtype);
      prediction = model.predict(inputs, targets);
    }
    const torch::Tensor logits = prediction.logits.to(torch::kFloat);  // (N, K): the loss is always FP32
    loss_sum += torch::nn::functional::cross_entropy(
        logits, prediction.targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    correct += logits.argmax(1).eq(prediction.targets).sum();
    predictions += prediction.targets.size(0);
  }
  model.train(was_training);
  EvalMetrics metrics;
  metrics.samples = dataset.size();
  metrics.loss = loss_sum.item<double>() / static_cast<double>(predictions);
  metrics.accuracy = correct.item<double>() / static_cast<double>(predictions);
  return metrics;
}

}  // namespace mpt::train
