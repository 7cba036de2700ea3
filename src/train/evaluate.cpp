// Evaluation loop: sums on the device, one host read at the end.
#include "train/evaluate.h"

#include <cmath>

#include "data/loader.h"
#include "precision/autocast.h"

namespace mpt::train {

EvalMetrics evaluate(models::ModelImpl& model, const data::Dataset& dataset, torch::Device device,
                     torch::ScalarType compute_dtype, int64_t batch_size, distributed::Group* group) {
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
    if (batch.targets.size(0) == 0) continue;    // this rank's slice of the ragged last batch is empty
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

Evaluator::Evaluator(const TrainConfig& config, const data::Dataset& test_set, torch::Device device,
                     distributed::Group& group, hardware::MemoryPeaks* memory)
    : config_(config), test_set_(test_set), device_(device), group_(group), memory_(memory) {}

void Evaluator::maybe_evaluate(models::ModelImpl& model, torch::ScalarType dtype, int64_t step, JsonlWriter& metrics,
                               io::TensorBoardWriter& tensorboard, spdlog::logger& logger) {
  if ((config_.eval_every_steps > 0 && step % config_.eval_every_steps == 0) || step == config_.total_steps)
    evaluate_now(model, dtype, step, metrics, tensorboard, logger);
}

void Evaluator::evaluate_now(models::ModelImpl& model, torch::ScalarType dtype, int64_t step, JsonlWriter& metrics,
                             io::TensorBoardWriter& tensorboard, spdlog::logger& logger) {
  const hardware::MemoryPhaseScope phase(memory_, hardware::MemoryPhase::kEvaluation);
  // Batch-norm statistics are per rank (local batch norm): evaluate every shard with rank 0's, which the
  // checkpoint holds too.
  group_.broadcast(model.buffers(), "buffer broadcast");
  last_ = evaluate(model, test_set_, device_, dtype, config_.eval_batch_size, &group_);
  nlohmann::json eval = {{"loss", last_->loss}, {"accuracy", last_->accuracy}, {"samples", last_->samples}};
  // A language model's loss is per token: its exponential, the perplexity, is what LM papers compare.
  const bool language_model = test_set_.causal_lm.has_value();
  if (language_model) eval["perplexity"] = std::exp(last_->loss);
  metrics.write({{"kind", "eval"}, {"step", step}, {"eval", eval}});
  tensorboard.scalar("eval/loss", step, last_->loss);
  tensorboard.scalar("eval/accuracy", step, last_->accuracy);
  if (language_model) tensorboard.scalar("eval/perplexity", step, std::exp(last_->loss));
  logger.info("step {}: eval loss {:.4f} {} {:.4f} ({} samples)", step, last_->loss,
              language_model ? "perplexity" : "accuracy", language_model ? std::exp(last_->loss) : last_->accuracy,
              last_->samples);
}

}  // namespace mpt::train
