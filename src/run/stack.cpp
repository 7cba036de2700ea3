// Building the training stack (see stack.h).
#include "run/stack.h"

#include "train/optimizer.h"

namespace mpt::run {

train::PrecisionRuntime TrainingStack::precision_runtime() const {
  // A parameter's layer computes in FP32 when the run does, or when the policy keeps that layer FP32.
  auto computes_in_fp32 = [fp32_run = compute_dtype == torch::kFloat,
                           policy = precision::ModulePolicy(fp32_modules)](const std::string& parameter) {
    const size_t dot = parameter.rfind('.');
    return fp32_run || policy.runs_in_fp32(dot == std::string::npos ? parameter : parameter.substr(0, dot));
  };
  return train::PrecisionRuntime{precision::LossScaler(loss_scale), compute_dtype, master_weights.get(),
                                 numerics.get(), computes_in_fp32, fp8.get()};
}

TrainingStack build_training_stack(ExperimentConfig& c, const data::SampleShape& sample,
                                   int64_t batches_per_epoch, torch::Device device, int world_size) {
  TrainingStack stack;
  if (c.check_numerics) stack.numerics = std::make_unique<precision::NumericsMonitor>();
  const precision::ModulePolicy policy(c.precision.fp32_modules, stack.numerics.get());
  stack.model = models::build_model(c.model, sample, policy);
  if (!c.model.init_from.empty())
    stack.init = io::init_from_weights(*stack.model, io::read_weights(c.model.init_from), c.model.init_from,
                                       c.model.init_skip);
  stack.model->to(device);
  stack.compute_dtype = precision::compute_dtype(c.precision.mode);
  stack.loss_scale = c.precision.loss_scale;
  stack.fp32_modules = c.precision.fp32_modules;
  if (c.precision.strategy == "master_weights")
    stack.master_weights = std::make_unique<precision::MasterWeights>(*stack.model, policy, stack.compute_dtype,
                                                                      stack.model->tied_to_fp32_islands());
  if (c.precision.mode == "fp8")
    stack.fp8 = std::make_unique<precision::Fp8Training>(c.precision.fp8, *stack.model, policy, device);
  const auto fp32_weights = stack.master_weights ? stack.master_weights->masters().values() : stack.model->parameters();
  stack.optimizer = train::build_optimizer(c.optimizer, fp32_weights);

  const int64_t per_epoch = std::max<int64_t>(1, batches_per_epoch / c.train.grad_accum_steps);
  stack.global_batch = c.data.batch_size * c.train.grad_accum_steps * world_size;
  c.train.total_steps = c.max_steps > 0 ? c.max_steps : c.epochs * per_epoch;
  if (c.train.eval_every_steps == 0) c.train.eval_every_steps = per_epoch;
  stack.scaled = train::apply_linear_scaling(c.optimizer.lr, c.schedule.warmup_steps, stack.global_batch, c.base_batch_size);
  c.schedule.peak_lr = stack.scaled.lr;
  c.schedule.warmup_steps = stack.scaled.warmup_steps;
  c.schedule.total_steps = c.train.total_steps;
  return stack;
}

}  // namespace mpt::run
