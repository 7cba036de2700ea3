// See machine.h.
#include "run/machine.h"

#include "hardware/hardware.h"

namespace mpt::run {
namespace {

// With more threads than idle cores, every OpenMP barrier waits for a thread the kernel gave to other work; the
// slowdown this causes is measured in docs/performance.md.
void warn_if_cores_are_busy(spdlog::logger& logger, int threads) {
  const int cores = hardware::available_cores(), others = hardware::other_runnable_tasks();
  if (others <= 0 || threads <= cores - others) return;
  const int fitting = std::max(1, cores - others);
  logger.warn(
      "{} other task(s) are running on this machine's {} core(s); with {} threads each parallel region waits "
      "for threads the kernel gives to them: device.threads={} may be faster (mpt bench measures it)",
      others, cores, threads, fitting);
}

}  // namespace

Machine set_up_machine(const ExperimentConfig& c, const distributed::LaunchInfo* launch, spdlog::logger& logger) {
  Machine machine;
  machine.threads = hardware::configure_threads(
      static_cast<int>(c.device.threads), launch ? launch->local_world_size : 1, launch ? launch->cpus_per_rank : 0);
  machine.device = c.device.type == "cuda" ? torch::Device(torch::kCUDA, launch ? launch->local_rank : 0)
                                           : torch::Device(torch::kCPU);
  if (machine.device.is_cpu() && machine.threads > 1) warn_if_cores_are_busy(logger, machine.threads);
  machine.blas = hardware::blas_description();
  machine.tf32 = machine.device.is_cuda() && c.precision.tf32;
  hardware::configure_cuda_math(machine.tf32);
  torch::manual_seed(c.experiment.seed);
  logger.info("device {} | {} threads | BLAS {} | precision {} ({}) | loss scale {}", c.device.type, machine.threads,
              machine.blas, precision::mode_name(c.precision.mode), precision::strategy_name(c.precision.strategy),
              precision::loss_scale_mode_name(c.precision.loss_scale.mode));
  return machine;
}

train::RunContext run_context(const ExperimentConfig& c, const Machine& machine, const TrainingStack& stack,
                              const distributed::Group& group) {
  train::RunContext context;
  context.name = c.experiment.name;
  context.precision_mode = precision::mode_name(c.precision.mode);
  context.precision_strategy = precision::strategy_name(c.precision.strategy);
  context.loss_scale_mode = precision::loss_scale_mode_name(c.precision.loss_scale.mode);
  context.device = c.device.type;
  context.threads = machine.threads;
  context.tf32 = machine.tf32;
  context.blas = machine.blas;
  context.global_batch_size = stack.global_batch;
  context.total_steps = c.train.total_steps;
  context.world_size = group.world_size();
  context.distributed_backend = group.distributed() ? group.backend() : "";
  context.fp32_modules = c.precision.fp32_modules;
  return context;
}

}  // namespace mpt::run
