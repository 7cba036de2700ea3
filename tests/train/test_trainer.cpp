// The trainer built in-process on a tiny MLP over synthetic batches, as `mpt train` wires it: the update path chosen
// once, an injected overflow skipped without an optimizer or schedule step, and a resume from a checkpoint that
// continues bit for bit where an uninterrupted run goes.
#include <catch2/catch.hpp>

#include <atomic>

#include "config/load.h"
#include "ops/dispatch.h"
#include "run/resolve.h"
#include "run/sections.h"
#include "run/stack.h"
#include "tests/support/helpers.h"
#include "train/trainer.h"

using namespace mpt;

namespace {

// Everything a run directory would hold, in a scratch folder.
struct Harness {
  explicit Harness(const std::string& name, std::vector<std::string> overrides)
      : dir(testing::scratch_dir(name)),
        c(read(overrides)),
        dataset(data::synthetic_dataset(c.data, 512)),
        test_set(data::synthetic_dataset(c.data, 64)),
        loader(dataset, c.data.batch_size, /*shuffle=*/true, c.experiment.seed, /*drop_last=*/true, data::Shard{},
               data::Delivery::to(torch::kCPU)),
        logger(io::make_logger(dir + "/train.log")),
        events(dir + "/events.jsonl", logger),
        metrics_file(dir + "/metrics.jsonl"),
        progress(false),
        tensorboard(dir),
        store(dir + "/checkpoints", 3) {
    torch::manual_seed(c.experiment.seed);
    stack = run::build_training_stack(c, data::sample_shape(c.data), loader.batches_per_epoch(), torch::kCPU);
    step = std::make_unique<train::TrainStep>(run::make_train_step(stack, c, torch::kCPU, loader, group));
    window = std::make_unique<train::MetricsWindow>(c.train, sinks(), group, torch::kCPU);
    evaluator = std::make_unique<train::Evaluator>(c.train, test_set, torch::kCPU, group, nullptr);
    checkpointer = std::make_unique<train::Checkpointer>(c.checkpoint, &store, dir + "/checkpoints", events, nullptr,
                                                         window.get());
  }

  static run::ExperimentConfig read(const std::vector<std::string>& overrides) {
    std::vector<std::string> all = {"model.hidden_sizes=[32]",
                                    "data.batch_size=16",
                                    "train.log_every_steps=2",
                                    "checkpoint.every_steps=4",
                                    "train.max_steps=8",
                                    "precision.mode=mixed_bf16",
                                    "precision.strategy=master_weights",
                                    "precision.loss_scale.mode=dynamic"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    config::Spec spec =
        config::parse_spec("data:\n  root: " + testing::kFashionMnistRoot + "\n", "/specs/tiny.yaml", all);
    run::resolve_spec(spec, hardware::Facts{false, 0, false});
    return run::read_sections(spec);
  }

  train::RunSinks sinks() { return {metrics_file, events, logger, progress, tensorboard}; }

  train::TrainResult run() {
    const std::atomic<bool> no_stop{false};
    return train::Trainer(c.train, *step, {*window, *evaluator, *checkpointer, sinks()}, group).run(no_stop);
  }

  std::string dir;
  run::ExperimentConfig c;
  data::Dataset dataset, test_set;
  data::BatchLoader loader;
  distributed::Group group;
  std::shared_ptr<spdlog::logger> logger;
  train::EventLog events;
  JsonlWriter metrics_file;
  io::Progress progress;
  io::TensorBoardWriter tensorboard;
  io::CheckpointStore store;
  run::TrainingStack stack;
  std::unique_ptr<train::TrainStep> step;
  std::unique_ptr<train::MetricsWindow> window;
  std::unique_ptr<train::Evaluator> evaluator;
  std::unique_ptr<train::Checkpointer> checkpointer;
};

std::vector<torch::Tensor> weights_of(const Harness& h) {
  std::vector<torch::Tensor> copies;
  for (const auto& item : h.stack.recipe->weights()) copies.push_back(item.value().detach().clone());
  return copies;
}

}  // namespace

TEST_CASE("the trainer chooses its update path once: one pass for a fused optimizer on the CPU, in place otherwise",
          "[fast][train]") {
  Harness fused("trainer-path-fused", {});
  CHECK(std::string(fused.step->update_path().name()) == "one pass");
  ops::force_portable_kernels(true);  // LibTorch's own optimizer steps: the copies around them
  Harness portable("trainer-path-portable", {});
  ops::force_portable_kernels(false);
  CHECK(std::string(portable.step->update_path().name()) == "in place");
  // Both reach the same weights (the one-pass step is the in-place one's arithmetic in one loop).
  const train::TrainResult a = fused.run(), b = portable.run();
  CHECK(a.steps == 8);
  CHECK(b.steps == 8);
  const auto wa = weights_of(fused), wb = weights_of(portable);
  for (size_t i = 0; i < wa.size(); ++i) CHECK(torch::allclose(wa[i], wb[i], 1e-5, 1e-6));
}

TEST_CASE("an injected overflow is skipped in-process: no optimizer step, no schedule step, a backoff and an event",
          "[fast][train]") {
  Harness h("trainer-skip", {"debug.inject_nonfinite_grad_at=[3]"});
  const train::TrainResult result = h.run();
  CHECK(result.status == "completed");
  CHECK(result.steps == 8);
  CHECK(result.skipped_steps == 1);
  CHECK(h.step->state().applied_steps == 7);  // the schedule's clock did not move on step 3
  CHECK(result.scaler.backoffs == 1);
  CHECK(result.scaler.scale == 32768.0 / 2);
  bool skip_event = false;
  for (const auto& event : testing::read_jsonl(h.dir + "/events.jsonl"))
    if (event["kind"] == "skip") skip_event = event["step"] == 3;
  CHECK(skip_event);
}

TEST_CASE("a resume in-process continues bit for bit where the uninterrupted run goes", "[fast][train]") {
  Harness whole("trainer-whole", {});
  whole.run();
  Harness first("trainer-first", {"train.max_steps=4"});  // the checkpoint at step 4
  first.run();
  Harness resumed("trainer-resumed", {});
  resumed.checkpointer->resume(*resumed.step, first.dir + "/checkpoints/step-000000004.mpt");
  CHECK(resumed.step->state().step == 4);
  const train::TrainResult result = resumed.run();
  CHECK(result.steps == 8);
  CHECK(result.resumed_from == first.dir + "/checkpoints/step-000000004.mpt");
  const auto expected = weights_of(whole), actual = weights_of(resumed);
  REQUIRE(expected.size() == actual.size());
  for (size_t i = 0; i < expected.size(); ++i) CHECK(torch::equal(expected[i], actual[i]));
}
