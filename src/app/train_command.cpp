// `mpt train`: spec -> resolve -> run directory -> machine -> data -> stack (model, recipe, optimizer) -> the step
// and the loop's components -> summary. This file only wires components together; each decision lives in the
// component that owns it.
#include <chrono>
#include <csignal>
#include <exception>
#include <optional>

#include "app/commands.h"
#include "common/error.h"
#include "common/process.h"
#include "distributed/environment.h"
#include "distributed/local_launcher.h"
#include "distributed/process_group.h"
#include "hardware/memory_peak.h"
#include "models/tensor_core_shapes.h"
#include "run/machine.h"
#include "run/resolve.h"
#include "run/run_dir.h"
#include "run/run_trace.h"
#include "run/sections.h"
#include "run/stack.h"
#include "tools/tracking/tracker.h"
#include "train/trainer.h"

namespace mpt::app {
namespace {

std::atomic<bool> g_stop_requested{false};

void request_stop(int signal) {
  g_stop_requested = true;
  std::signal(signal, SIG_DFL);  // a second Ctrl-C stops at once
}

// --nproc N: start N ranks of this same command (the spec is checked once here, so errors print once).
int launch_ranks(const TrainOptions& options) {
  if (distributed::launch_from_environment())
    throw UsageError("--nproc " + std::to_string(options.nproc) +
                     ": WORLD_SIZE/RANK are already set by a launcher (torchrun, srun); drop --nproc under it");
  const config::Spec spec = run::load_resolved_spec(options.spec_path, options.overrides);
  const std::string run_dir = options.run_dir.empty()
                                  ? spec.get_string("experiment.output_root") + "/" + spec.get_string("experiment.name")
                                  : options.run_dir;
  std::vector<std::string> args = {process::self_executable(), "train", options.spec_path};
  args.insert(args.end(), options.overrides.begin(), options.overrides.end());
  if (!options.run_dir.empty()) args.insert(args.end(), {"--run-dir", options.run_dir});
  args.insert(args.end(), {"--resume", options.resume});
  if (options.all_keys) args.push_back("--all-keys");
  const distributed::LaunchOutcome outcome = distributed::launch_local_workers(options.nproc, args);
  if (outcome.failures.empty()) return kExitOk;
  if (!outcome.stop_requested) run::record_rank_exits(run_dir, outcome.failures);
  // mpt's own codes pass through (a spec error is 2 on every rank); a rank killed by a signal is a failed run.
  const int code = outcome.failures.front().exit_code;
  return code == kExitUsage || code == kExitVerdictFailed || code == kExitLocked ? code : kExitRunFailed;
}

struct Data {
  data::Dataset train, test;
  std::unique_ptr<data::BatchLoader> loader;  // the training split, this rank's shard
};

Data load_data(const run::ExperimentConfig& c, const distributed::Group& group, torch::Device device,
               spdlog::logger& logger) {
  Data data{data::load_dataset(c.data, "train"), data::load_dataset(c.data, "test"), nullptr};
  data.loader = std::make_unique<data::BatchLoader>(data.train, c.data.batch_size, c.data.shuffle, c.experiment.seed,
                                                    /*drop_last=*/true, data::Shard{group.rank(), group.world_size()},
                                                    data::Delivery::to(device));
  logger.info("data {}: {} train / {} test samples, {} batches of {} per epoch", c.data.name, data.train.size(),
              data.test.size(), data.loader->batches_per_epoch(),
              group.distributed() ? fmt::format("{} x {} ranks", c.data.batch_size, group.world_size())
                                  : std::to_string(c.data.batch_size));
  return data;
}

// What the log says of the stack before the first step: the weights loaded, the Tensor Core misfits a CUDA run would
// have, the linear scaling rule.
void describe_stack(const run::TrainingStack& stack, const run::ExperimentConfig& c, torch::Device device,
                    spdlog::logger& logger) {
  if (stack.init) {
    logger.info("model.init_from {}: {}", c.model.init_from, io::describe(*stack.init));
    for (const std::string& glob : stack.init->unmatched_skips)
      logger.warn("model.init_skip '{}' matches no tensor of {} (a typo?); `mpt inspect` lists the model's names", glob,
                  c.model.name);
  }
  if (device.is_cuda()) {  // a width of 1000 instead of 1024 can leave a CUDA run off the Tensor Cores
    const models::TensorCoreShapes shapes =
        models::tensor_core_shapes(*stack.model, c.precision, data::sample_shape(c.data), c.data.batch_size);
    if (!shapes.misfits.empty()) logger.warn("{}", models::describe(shapes));
  }
  if (c.schedule.base_batch_size > 0)
    logger.info("linear scaling rule: global batch {} / base {} -> lr {:g}, warmup {} steps", stack.global_batch,
                c.schedule.base_batch_size, stack.scaled.lr, stack.scaled.warmup_steps);
}

// summary.json (rank 0), the closing log line, and the exit code.
int finish_run(const train::TrainResult& result, train::RunContext context, const hardware::MemoryPeaks& memory,
               run::RunDirectory& dir, bool main_rank) {
  using hardware::MemoryPhase;
  context.memory = {memory.kind(),
                    memory.bytes(MemoryPhase::kTraining),
                    memory.bytes(MemoryPhase::kEvaluation),
                    memory.bytes(MemoryPhase::kCheckpoint),
                    memory.process_bytes(),
                    memory.resident_bytes(MemoryPhase::kTraining),
                    memory.resident_bytes(MemoryPhase::kEvaluation),
                    memory.resident_bytes(MemoryPhase::kCheckpoint)};
  const nlohmann::json summary = train::make_summary(result, context);
  spdlog::logger& logger = *dir.logger();
  const int code = result.status == "completed" && result.ranks_agree ? kExitOk : kExitRunFailed;
  if (!main_rank) return code;
  write_file_atomically(dir.dir() + "/summary.json", summary.dump(2) + "\n");
  const std::string accuracy = result.eval ? fmt::format("{:.4f}", result.eval->accuracy) : "not evaluated";
  logger.info("{}: {} after {} steps ({} skipped); test accuracy {}; {:.0f} samples/s; summary {}/summary.json",
              context.name, result.status, result.steps, result.skipped_steps, accuracy,
              summary["samples_per_sec"].get<double>(), dir.dir());
  if (result.status != "completed") logger.error("{}", result.diagnosis);
  return code;
}

using Followers = std::vector<std::unique_ptr<tracking::RunFollower>>;

// What follows this run (rank 0 only): every tracker the spec, or a tracker's own environment variables, turn on.
Followers start_tracking(const std::vector<std::unique_ptr<tracking::Tracker>>& trackers, const run::RunDirectory& dir,
                         bool main_rank) {
  Followers followers;
  if (!main_rank) return followers;
  std::shared_ptr<spdlog::logger> logger = dir.logger();
  for (const auto& tracker : trackers)
    followers.push_back(tracker->follow_run(
        dir.dir(), [logger](const std::string& line) { logger->info("{}", line); },
        [logger](const std::string& line) { logger->warn("{}", line); }));
  return followers;
}

void finish_tracking(const Followers& followers) {
  for (const auto& follower : followers) follower->finish();
}

std::string command_line(const TrainOptions& options) {
  std::string line = "mpt train " + options.spec_path;
  for (const auto& item : options.overrides) line += " " + item;
  return line;
}

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

int run_train(const TrainOptions& options) {
  if (options.nproc > 1) return launch_ranks(options);
  const auto started = std::chrono::steady_clock::now();
  const double started_at = seconds_since_epoch();
  const config::Spec spec = run::load_resolved_spec(options.spec_path, options.overrides);
  run::ExperimentConfig c = run::read_sections(spec);
  const auto trackers = tracking::open_trackers(c.tracking, {command_line(options)});
  // Data parallelism when a launcher (or --nproc) set the job up: join before touching the run directory.
  const std::optional<distributed::LaunchInfo> launch = distributed::launch_from_environment();
  distributed::Group group = launch ? distributed::Group::join(*launch, c.distributed) : distributed::Group();
  run::RunDirectory dir(options.run_dir.empty() ? c.experiment.output_root + "/" + c.experiment.name : options.run_dir,
                        options.resume, spec, group,
                        c.train.progress == "bar" || (c.train.progress == "auto" && io::stderr_is_live_terminal()));
  spdlog::logger& logger = *dir.logger();
  logger.info("mpt train {} -> {}\n{}", options.spec_path, dir.dir(), spec.to_table(options.all_keys));
  if (group.distributed())
    logger.info("data parallel: {} ranks ({}), {} backend, rendezvous {}:{}", group.world_size(), launch->launcher,
                group.backend(), launch->master_addr, launch->master_port);
  const run::Machine machine = run::set_up_machine(c, launch ? &*launch : nullptr, logger);
  Data data = load_data(c, group, machine.device, logger);

  hardware::MemoryPeaks memory(machine.device);  // from here: the stack and its steps, not the datasets
  run::TrainingStack stack = run::build_training_stack(c, data::sample_shape(c.data), data.loader->batches_per_epoch(),
                                                       machine.device, group.world_size());
  describe_stack(stack, c, machine.device, logger);
  if (c.distributed.sync_batchnorm && group.distributed()) stack.model->synchronise_batch_norm(&group);
  train::TrainStep step = run::make_train_step(stack, c, machine.device, *data.loader, group);
  if (group.distributed()) logger.info("update path: {}", step.update_path().name());
  train::MetricsWindow metrics(c.train, dir.sinks(), group, machine.device);
  train::Evaluator evaluator(c.train, data.test, machine.device, group, &memory);
  train::Checkpointer checkpointer(c.checkpoint, dir.checkpoints(), dir.dir() + "/checkpoints", dir.events(), &memory,
                                   &metrics);
  run::resume_from_plan(checkpointer, step, dir.plan(), dir.events());
  if (step.state().step >= c.train.total_steps && std::filesystem::exists(dir.dir() + "/summary.json")) {
    // Re-running a finished spec must not replace its summary with an empty one: report and keep it.
    logger.info(
        "{} already completed {} of {} steps; kept its summary.json (raise train.epochs or train.max_steps "
        "to train further, or use another --run-dir)",
        dir.dir(), step.state().step, c.train.total_steps);
    return kExitOk;
  }

  dir.rewind_logs(step.state().step);
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  dir.keep();
  const Followers followers = start_tracking(trackers, dir, group.is_main());
  train::RunContext context = run::run_context(c, machine, stack, group);
  context.started_at = started_at;
  context.fp32_modules_origin = spec.origin("precision.fp32_modules");
  train::TrainResult result;
  try {
    result =
        train::Trainer(c.train, step, {metrics, evaluator, checkpointer, dir.sinks()}, group).run(g_stop_requested);
  } catch (const std::exception& e) {
    context.ended_at = seconds_since_epoch();
    run::record_failure(dir.dir(), group.rank(), step.state().step, e, context, dir.events(), dir.logger());
    finish_tracking(followers);
    throw;
  }
  context.wall_time_sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  context.ended_at = seconds_since_epoch();
  const int code = finish_run(result, context, memory, dir, group.is_main());
  finish_tracking(followers);
  return code;
}

}  // namespace mpt::app
