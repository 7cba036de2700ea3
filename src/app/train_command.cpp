// `mpt train`: spec -> resolve -> run directory -> data -> model -> precision/trainer -> summary.
// This file only wires components together; each decision lives in the component that owns it.
#include <chrono>
#include <csignal>
#include <exception>
#include <filesystem>
#include <optional>

#include "app/commands.h"
#include "common/dir_lock.h"
#include "common/error.h"
#include "common/files.h"
#include "common/json.h"
#include "common/process.h"
#include "config/load.h"
#include "device/hardware.h"
#include "device/memory_peak.h"
#include "dist/environment.h"
#include "dist/local_launcher.h"
#include "dist/process_group.h"
#include "models/tensor_core_shapes.h"
#include "run/resolve.h"
#include "run/run_dir.h"
#include "run/sections.h"
#include "run/stack.h"
#include "train/summary.h"

namespace mpt::app {
namespace {

std::atomic<bool> g_stop_requested{false};

void request_stop(int signal) {
  g_stop_requested = true;
  std::signal(signal, SIG_DFL);  // a second Ctrl-C stops at once
}

}  // namespace

namespace {

// After --nproc's ranks ended: a rank killed by a signal could not leave its own trace (a rank that exited by itself
// did: its events, and rank 0's summary), so the launcher writes a "rank_exit" event for each, and marks the
// summary "failed" with the first one's rank.
void record_rank_exits(const std::string& run_dir, std::vector<dist::RankExit> failures) {
  std::erase_if(failures, [](const dist::RankExit& exit) { return !exit.signalled; });
  if (failures.empty() || !std::filesystem::is_directory(run_dir)) return;
  JsonlWriter events(run_dir + "/events.jsonl");
  for (const dist::RankExit& exit : failures)
    events.write({{"kind", "rank_exit"}, {"rank", exit.rank}, {"exit_code", exit.exit_code}, {"how", exit.how},
                  {"time", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()}});
  // Rank 0 may have written its own summary: "failed" when a collective broke, or "interrupted" when the launcher's
  // SIGTERM (sent to the survivors after the first failure) stopped it first. Either way the run failed here.
  const std::string path = run_dir + "/summary.json";
  nlohmann::json summary = std::filesystem::exists(path) ? parse_json(read_file(path)) : nlohmann::json::object();
  if (!summary.is_object()) summary = nlohmann::json::object();
  const dist::RankExit& first = failures.front();
  const std::string how = fmt::format("rank {} {}", first.rank, first.how);
  const nlohmann::json earlier = summary.value("diagnosis", nlohmann::json());
  summary["status"] = "failed";
  summary["diagnosis"] = earlier.is_string() ? how + "; then " + earlier.get<std::string>() : how;
  summary["failed_rank"] = first.rank;
  write_file_atomically(path, summary.dump(2) + "\n");
}

// --nproc N: start N ranks of this same command (the spec is checked once here, so errors print once).
int launch_ranks(const TrainOptions& options) {
  if (dist::launch_from_environment())
    throw UsageError("--nproc " + std::to_string(options.nproc) +
                     ": WORLD_SIZE/RANK are already set by a launcher (torchrun, srun); drop --nproc under it");
  const config::Spec spec = run::load_resolved_spec(options.spec_path, options.overrides);
  const std::string run_dir = options.run_dir.empty() ? spec.get_string("experiment.output_root") + "/" +
                                                            spec.get_string("experiment.name")
                                                      : options.run_dir;
  std::vector<std::string> args = {process::self_executable(), "train", options.spec_path};
  args.insert(args.end(), options.overrides.begin(), options.overrides.end());
  if (!options.run_dir.empty()) args.insert(args.end(), {"--run-dir", options.run_dir});
  args.insert(args.end(), {"--resume", options.resume});
  const dist::LaunchOutcome outcome = dist::launch_local_workers(options.nproc, args);
  if (outcome.failures.empty()) return kExitOk;
  if (!outcome.stop_requested) record_rank_exits(run_dir, outcome.failures);
  // mpt's own codes pass through (a spec error is 2 on every rank); a rank killed by a signal is a failed run.
  const int code = outcome.failures.front().exit_code;
  return code == kExitUsage || code == kExitVerdictFailed || code == kExitLocked ? code : kExitRunFailed;
}

// Removes a run directory this invocation created when a usage error stops it before training starts.
class FreshRunDirectory {
 public:
  explicit FreshRunDirectory(std::string dir) : dir_(std::move(dir)), exceptions_(std::uncaught_exceptions()) {}
  ~FreshRunDirectory() {
    if (dir_.empty() || std::uncaught_exceptions() == exceptions_) return;
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  void keep() { dir_.clear(); }

 private:
  std::string dir_;
  int exceptions_;
};

// An error that stops training (a collective failing because a peer died, a disk error) leaves its trace in the
// run directory, which outlives the terminal: a "failed" event from every rank that gets here, and rank 0's
// summary.json with status "failed", the step and the reason.
void record_failure(const std::string& run_dir, int rank, int64_t step, const std::exception& error,
                    train::RunContext context, train::EventLog& events, const std::shared_ptr<spdlog::logger>& logger) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
  const std::string reason = torch_error ? torch_error->what_without_backtrace() : error.what();
  try {
    if (rank != 0) {  // only rank 0's log writes the run directory's events.jsonl; others append their line
      train::EventLog(run_dir + "/events.jsonl", logger).failed(step, rank, reason);
      return;
    }
    events.failed(step, rank, reason);
    train::TrainResult failed;
    failed.status = "failed";
    failed.diagnosis = fmt::format("rank {} stopped at step {}: {}", rank, step, reason);
    failed.steps = step;
    write_file_atomically(run_dir + "/summary.json", train::make_summary(failed, context).dump(2) + "\n");
  } catch (const std::exception& also) {  // the original error matters more than this one
    logger->error("could not record the failure in {}: {}", run_dir, also.what());
  }
}

// With more threads than idle cores, every OpenMP barrier waits for a thread the kernel gave to other work: an MLP
// step went from 1.2 to 144 ms with 2 threads on 2 cores, one busy (docs/performance.md).
void warn_if_cores_are_busy(spdlog::logger& logger, int threads) {
  const int cores = hardware::available_cores(), others = hardware::other_runnable_tasks();
  if (others <= 0 || threads <= cores - others) return;
  const int fitting = std::max(1, cores - others);
  logger.warn("{} other task(s) are running on this machine's {} core(s); with {} threads each parallel region waits "
              "for threads the kernel gives to them: device.threads={} may be faster (mpt bench measures it)",
              others, cores, threads, fitting);
}

}  // namespace

int run_train(const TrainOptions& options) {
  if (options.nproc > 1) return launch_ranks(options);
  const auto started = std::chrono::steady_clock::now();
  config::Spec spec = run::load_resolved_spec(options.spec_path, options.overrides);
  run::ExperimentConfig c = run::read_sections(spec);

  // Data parallelism when a launcher (or --nproc) set the job up: join before touching the run directory.
  const std::optional<dist::LaunchInfo> launch = dist::launch_from_environment();
  dist::Group group = launch ? dist::Group::join(*launch, c.distributed) : dist::Group();
  const bool main_rank = group.is_main();

  // Every rank plans from the same directory state; only rank 0 writes to it, after all have planned, and holds
  // its lock for the whole run: a second `mpt train` on it exits 75 naming this one.
  const std::string run_dir = options.run_dir.empty() ? c.output_root + "/" + c.name : options.run_dir;
  const bool fresh = !std::filesystem::exists(run_dir);
  std::optional<DirectoryLock> lock;
  if (main_rank) {
    std::filesystem::create_directories(run_dir);
    lock.emplace(run_dir, "mpt train");
  }
  // A run refused before its first step (a different spec in the directory, a bad --resume, data or a debug key
  // that does not fit the model) leaves no directory behind when it made it.
  FreshRunDirectory cleanup(main_rank && fresh ? run_dir : "");
  const run::RunPlan plan = run::plan_run(run_dir, options.resume, spec);
  group.barrier("start-up barrier");
  if (main_rank) write_file_atomically(run_dir + "/config.yaml", spec.to_yaml());

  std::vector<std::pair<std::string, int64_t>> torn;  // JSONL files a crash left mid-line, cut before appending
  if (main_rank)
    for (const char* name : {"/metrics.jsonl", "/events.jsonl"})
      if (const int64_t cut = cut_torn_tail(run_dir + name)) torn.emplace_back(run_dir + name, cut);
  auto logger = io::make_logger(main_rank ? run_dir + "/train.log" : "");
  if (!main_rank) logger->set_level(spdlog::level::err);  // rank 0 reports; the others only their errors
  train::EventLog events(main_rank ? run_dir + "/events.jsonl" : "", logger);
  for (const auto& [path, why] : plan.rejected) events.checkpoint_rejected(path, why);
  for (const auto& [path, bytes] : torn) events.torn_tail_cut(path, bytes);
  logger->info("mpt train {} -> {}\n{}", options.spec_path, run_dir, spec.to_table());
  if (group.distributed())
    logger->info("data parallel: {} ranks ({}), {} backend, rendezvous {}:{}", group.world_size(), launch->launcher,
                 group.backend(), launch->master_addr, launch->master_port);

  // Ranks on one machine share its cores unless device.threads says otherwise.
  const int threads = hardware::configure_threads(static_cast<int>(c.threads), launch ? launch->local_world_size : 1);
  const torch::Device device = c.device == "cuda" ? torch::Device(torch::kCUDA, launch ? launch->local_rank : 0)
                                                  : torch::Device(torch::kCPU);
  if (device.is_cpu() && threads > 1) warn_if_cores_are_busy(*logger, threads);
  const std::string blas = hardware::blas_description();
  logger->info("device {} | {} threads | BLAS {} | precision {} ({}) | loss scale {}", c.device, threads, blas,
               c.precision.mode, c.precision.strategy, precision::loss_scale_mode_name(c.precision.loss_scale.mode));
  const bool tf32 = device.is_cuda() && c.precision.tf32;
  hardware::configure_cuda_math(tf32);
  torch::manual_seed(c.seed);

  const data::Dataset train_set = data::load_dataset(c.data, "train");
  const data::Dataset test_set = data::load_dataset(c.data, "test");
  data::BatchLoader train_loader(train_set, c.data.batch_size, c.data.shuffle, c.seed, /*drop_last=*/true,
                                 data::Shard{group.rank(), group.world_size()}, data::Delivery::to(device));
  logger->info("data {}: {} train / {} test samples, {} batches of {} per epoch", c.data.name, train_set.size(),
               test_set.size(), train_loader.batches_per_epoch(),
               group.distributed() ? fmt::format("{} x {} ranks", c.data.batch_size, group.world_size())
                                   : std::to_string(c.data.batch_size));

  const data::SampleShape sample = data::sample_shape(c.data);
  // Memory from here: weights, optimizer state and the steps' activations, not the datasets loaded above.
  hardware::MemoryPeaks memory(device);
  run::TrainingStack stack =
      run::build_training_stack(c, sample, train_loader.batches_per_epoch(), device, group.world_size());
  if (stack.init) logger->info("model.init_from {}: {}", c.model.init_from, io::describe(*stack.init));
  if (stack.init)
    for (const std::string& glob : stack.init->unmatched_skips)
      logger->warn("model.init_skip '{}' matches no tensor of {} (a typo?); `mpt inspect` lists the model's names",
                   glob, c.model.name);
  if (c.sync_batchnorm && group.distributed()) stack.model->synchronise_batch_norm(&group);
  if (device.is_cuda()) {  // a width of 1000 instead of 1024 can leave a CUDA run off the Tensor Cores
    const models::TensorCoreShapes shapes =
        models::tensor_core_shapes(*stack.model, c.precision, sample, c.data.batch_size);
    if (!shapes.misfits.empty()) logger->warn("{}", models::describe(shapes));
  }
  if (c.base_batch_size > 0)
    logger->info("linear scaling rule: global batch {} / base {} -> lr {:g}, warmup {} steps", stack.global_batch,
                 c.base_batch_size, stack.scaled.lr, stack.scaled.warmup_steps);

  JsonlWriter metrics(main_rank ? run_dir + "/metrics.jsonl" : "");
  io::TensorBoardWriter tensorboard(main_rank ? run_dir : "");  // a new file per invocation: TensorBoard merges them
  std::optional<io::CheckpointStore> checkpoints;
  if (main_rank) checkpoints.emplace(run_dir + "/checkpoints", c.checkpoint_keep_last);
  io::Progress progress(main_rank &&
                        (c.progress == "bar" || (c.progress == "auto" && io::stderr_is_live_terminal())));
  train::Trainer trainer(c.train, c.schedule, stack.model, std::move(stack.optimizer), stack.precision_runtime(),
                         device, train_loader, test_set,
                         train::RunSinks{metrics, events, logger, checkpoints ? &*checkpoints : nullptr, progress,
                                         tensorboard},
                         &group);
  trainer.attach_memory(&memory);
  run::resume_from_plan(trainer, plan, events);
  if (trainer.step() >= c.train.total_steps && std::filesystem::exists(run_dir + "/summary.json")) {
    // Re-running a finished spec must not replace its summary with an empty one: report and keep it.
    logger->info("{} already completed {} of {} steps; kept its summary.json (raise train.epochs or "
                 "train.max_steps to train further, or use another --run-dir)",
                 run_dir, trainer.step(), c.train.total_steps);
    return kExitOk;
  }

  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  cleanup.keep();
  train::RunContext context;
  context.name = c.name;
  context.precision_mode = c.precision.mode;
  context.precision_strategy = c.precision.strategy;
  context.loss_scale_mode = precision::loss_scale_mode_name(c.precision.loss_scale.mode);
  context.device = c.device;
  context.threads = threads;
  context.tf32 = tf32;
  context.blas = blas;
  context.global_batch_size = stack.global_batch;
  context.total_steps = c.train.total_steps;
  context.world_size = group.world_size();
  context.distributed_backend = group.distributed() ? group.backend() : "";
  train::TrainResult result;
  try {
    result = trainer.run(g_stop_requested);
  } catch (const std::exception& e) {
    record_failure(run_dir, group.rank(), trainer.step(), e, context, events, logger);
    throw;
  }
  using hardware::MemoryPhase;
  context.memory = {memory.kind(), memory.bytes(MemoryPhase::kTraining), memory.bytes(MemoryPhase::kEvaluation),
                    memory.bytes(MemoryPhase::kCheckpoint), memory.process_bytes()};
  context.wall_time_sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const nlohmann::json summary = train::make_summary(result, context);
  if (!result.ranks_agree) logger->error("ranks disagree at the end of training: {}", result.ranks_disagreement);
  if (!main_rank) return result.status == "completed" && result.ranks_agree ? kExitOk : kExitRunFailed;
  write_file_atomically(run_dir + "/summary.json", summary.dump(2) + "\n");

  const std::string accuracy = result.eval ? fmt::format("{:.4f}", result.eval->accuracy) : "not evaluated";
  logger->info("{}: {} after {} steps ({} skipped); test accuracy {}; {:.0f} samples/s; summary {}/summary.json",
               c.name, result.status, result.steps, result.skipped_steps, accuracy,
               summary["samples_per_sec"].get<double>(), run_dir);
  if (result.status != "completed") logger->error("{}", result.diagnosis);
  return result.status == "completed" && result.ranks_agree ? kExitOk : kExitRunFailed;
}

}  // namespace mpt::app
