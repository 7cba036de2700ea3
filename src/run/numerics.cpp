// The numerics measurement (see numerics.h).
#include "run/numerics.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "common/error.h"
#include "data/loader.h"
#include "hardware/memory_peak.h"
#include "io/weights.h"
#include "models/registry.h"

namespace mpt::run {
namespace {

constexpr const char* kLoss = "loss";  // the loss's row

struct Pass {
  torch::Tensor logits, loss;  // (N, K) and the mean cross-entropy, FP32 as training computes them
};

// The loss reaches the probe as a module of its own: in a candidate format it computes in that dtype, autocast off
// (autocast would widen it to FP32, as every recipe keeps it), so its row says what the FP32 loss saves.
Pass forward(models::ModelImpl& model, precision::LayerProbe& probe, const data::Batch& batch) {
  const models::Prediction prediction = model.predict(batch.inputs, batch.targets, batch.target_positions);
  const torch::Tensor logits = prediction.logits.to(torch::kFloat);
  const torch::Tensor losses = probe.run(kLoss, "loss", {logits}, [&](const precision::Tensors& in) {
    precision::Fp32Scope no_autocast(in[0].device().type());
    namespace F = torch::nn::functional;
    return F::cross_entropy(in[0], prediction.targets, F::CrossEntropyFuncOptions().reduction(torch::kNone))
        .to(torch::kFloat);
  });
  return {logits, losses.mean()};
}

double loss_delta(const Pass& reference, const Pass& candidate) {
  return std::abs(candidate.loss.item<double>() - reference.loss.item<double>());
}

// Each layer's weight gradient after the last backward, divided by `scale` (undefined where it has none).
std::vector<torch::Tensor> weight_grads(precision::LayerProbe& probe, double scale) {
  std::vector<torch::Tensor> grads(probe.layers().size());
  for (size_t i = 0; i < grads.size(); ++i)
    if (probe.weight(i).defined() && probe.weight(i).grad().defined())
      grads[i] = probe.weight(i).grad().detach() / scale;
  return grads;
}

// One batch: the reference forward and backward, then each format with every layer it takes (forward and
// backward), then, with options.alone, each layer alone in each format (forward only).
void measure_batch(models::ModelImpl& model, precision::LayerProbe& probe, const data::Batch& batch,
                   const NumericsOptions& options, NumericsReport& report) {
  model.zero_grad();
  probe.reference(/*measure=*/true);
  const Pass reference = forward(model, probe, batch);
  reference.loss.backward();
  report.reference_loss += reference.loss.item<double>();
  const std::vector<torch::Tensor> reference_grads = weight_grads(probe, 1.0);
  for (size_t f = 0; f < options.formats.size(); ++f) {
    const double scale = options.formats[f] == precision::NumericFormat::kFp16 ? report.loss_scale : 1.0;
    model.zero_grad();
    probe.candidate(f, probe.eligible(f), scale);
    const Pass all = forward(model, probe, batch);
    (all.loss * scale).backward();
    report.all[f].logits.add(reference.logits, all.logits);
    report.all[f].loss_delta += loss_delta(reference, all);
    const std::vector<torch::Tensor> grads = weight_grads(probe, scale);
    for (size_t i = 0; i < grads.size(); ++i)
      if (grads[i].defined() && i < reference_grads.size() && reference_grads[i].defined())
        probe.layers()[i].formats[f].weight_grad.add(reference_grads[i], grads[i]);
  }
  if (!options.alone) return;
  torch::NoGradGuard no_grad;
  for (size_t f = 0; f < options.formats.size(); ++f)
    for (size_t i = 0; i < probe.layers().size(); ++i) {
      if (!probe.layers()[i].formats[f].why_not.empty()) continue;
      probe.candidate(f, {probe.layers()[i].name}, 1.0);
      const Pass alone = forward(model, probe, batch);
      precision::LayerInFormat& in = probe.layers()[i].formats[f];
      in.alone_logits.add(reference.logits, alone.logits);
      in.alone_loss_delta += loss_delta(reference, alone);
    }
}

// A Linear module the model runs by itself, outside its policy's GEMM route (no format reaches it in training either).
void mark_unreached(precision::LayerNumerics& layer) {
  for (const precision::LayerInFormat& in : layer.formats)
    if (in.local.tensors > 0) return;
  for (precision::LayerInFormat& in : layer.formats)
    if (in.why_not.empty()) in.why_not = "not measured: the model runs it outside its GEMM route, in FP32";
}

}  // namespace

NumericsReport measure_numerics(const ExperimentConfig& c, const NumericsOptions& options, torch::Device device) {
  const auto start = std::chrono::steady_clock::now();
  torch::manual_seed(c.experiment.seed);
  const data::Dataset train_set = data::load_dataset(c.data, "train");
  hardware::MemoryPeaks memory(device);
  const precision::ModulePolicy policy;  // the probe picks every layer's format
  models::ModelConfig model_config = c.model;
  model_config.dropout = 0.0;  // every pass of a batch sees the same network
  models::Model model = models::build_model(model_config, data::sample_shape(c.data), policy);
  if (!c.model.init_from.empty())
    io::init_from_weights(*model, io::read_weights(c.model.init_from), c.model.init_from, c.model.init_skip,
                          models::model_family(c.model.name).hf_base_prefix);
  model->to(device);
  model->train();  // batch norms normalise by the batch, as in training

  NumericsReport report;
  report.model = c.model.name, report.data = c.data.name, report.weights = c.model.init_from;
  report.batch_size = c.data.batch_size;
  report.formats = options.formats;
  report.all.resize(options.formats.size());
  report.loss_scale = c.precision.loss_scale.init;  // where an FP16 run's dynamic scale starts
  precision::LayerProbe probe(*model, options.formats, c.precision.fp8, report.loss_scale, device);
  policy.router().attach(&probe);
  policy.attach_probe(&probe);

  data::BatchLoader loader(train_set, c.data.batch_size, /*shuffle=*/false, c.experiment.seed, /*drop_last=*/true,
                           data::Shard{}, data::Delivery::to(device));
  report.batches = std::min(options.batches, loader.batches_per_epoch());
  if (report.batches == 0)
    throw UsageError(fmt::format("data.batch_size {}: the {} training split holds no full batch to measure on",
                                 c.data.batch_size, c.data.name));
  for (int64_t b = 0; b < report.batches; ++b) measure_batch(*model, probe, loader.next(), options, report);

  policy.router().attach(nullptr);
  policy.attach_probe(nullptr);
  report.layers = probe.layers();
  for (precision::LayerNumerics& layer : report.layers) mark_unreached(layer);
  const precision::ModulePolicy islands(c.precision.fp32_modules);
  for (const auto& layer : report.layers)  // every recipe keeps the loss in FP32
    report.islands.push_back(layer.name == kLoss || islands.runs_in_fp32(layer.name));
  memory.enter(hardware::MemoryPhase::kEvaluation);
  report.peak_tensor_bytes = memory.bytes(hardware::MemoryPhase::kTraining);
  report.peak_process_bytes = memory.process_bytes();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace mpt::run
