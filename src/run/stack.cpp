// Building the training stack (see stack.h).
#include "run/stack.h"

#include "train/optimizer.h"

namespace mpt::run {

TrainingStack build_training_stack(ExperimentConfig& c, const data::SampleShape& sample, int64_t batches_per_epoch,
                                   torch::Device device, int world_size) {
  TrainingStack stack;
  if (c.debug.check_numerics) stack.numerics = std::make_unique<precision::NumericsMonitor>();
  const precision::ModulePolicy policy(c.precision.fp32_modules, stack.numerics.get());
  stack.model = models::build_model(c.model, sample, policy, c.memory);
  if (!c.model.init_from.empty())
    stack.init = io::init_from_weights(*stack.model, io::read_weights(c.model.init_from), c.model.init_from,
                                       c.model.init_skip, models::model_family(c.model.name).hf_base_prefix);
  stack.model->to(device);
  stack.recipe = std::make_unique<precision::Recipe>(c.precision, *stack.model, policy,
                                                     stack.model->tied_to_fp32_islands(), device);
  stack.optimizer = train::build_optimizer(c.optimizer, stack.recipe->weights().values());

  const int64_t per_epoch = std::max<int64_t>(1, batches_per_epoch / c.train.grad_accum_steps);
  stack.global_batch = c.data.batch_size * c.train.grad_accum_steps * world_size;
  c.train.total_steps = c.train.max_steps > 0 ? c.train.max_steps : c.train.epochs * per_epoch;
  if (c.train.eval_every_steps == 0) c.train.eval_every_steps = per_epoch;
  stack.scaled = train::apply_linear_scaling(c.optimizer.lr, c.schedule.warmup_steps, stack.global_batch,
                                             c.schedule.base_batch_size);
  c.schedule.peak_lr = stack.scaled.lr;
  c.schedule.warmup_steps = stack.scaled.warmup_steps;
  c.schedule.total_steps = c.train.total_steps;
  return stack;
}

train::TrainStep make_train_step(TrainingStack& stack, const ExperimentConfig& c, torch::Device device,
                                 data::BatchLoader& loader, distributed::Group& group) {
  return train::TrainStep(train::TrainStepParts{stack.model, std::move(stack.optimizer), *stack.recipe,
                                                stack.numerics.get(), device, loader, group},
                          c.train, c.schedule, c.debug, c.distributed);
}

}  // namespace mpt::run
