// The training step's host syncs: on a GPU a step may make the host wait for the device once, for the overflow
// flag. debug.forbid_host_syncs turns any other sync into an error naming the operation, so these runs fail on a
// GPU if a data, model, precision or optimizer path syncs. The GPU check (scripts/device_check.sh) runs them with
// CUDA; on a CPU they show that the same runs complete with the key set, which has nothing to refuse there.
#include <catch2/catch.hpp>

#include <torch/cuda.h>

#include <filesystem>
#include <fstream>

#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

struct Case {
  std::string name;
  std::vector<std::string> args;
};

// A corpus and vocabulary of its own: the GPU machine has the repository's data/ but not the Debian corpora.
std::vector<std::string> write_corpus(const std::string& dir) {
  std::filesystem::create_directories(dir + "/corpus");
  std::ofstream vocab(dir + "/vocab.txt");
  for (const char* token : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e", "."})
    vocab << token << "\n";
  std::ofstream text(dir + "/corpus/letters.txt");
  for (int line = 0; line < 3000; ++line)
    text << "a b c d e "
         << "edcba"[line % 5] << " .\n";
  return {"data.root=" + dir + "/corpus", "data.vocab=" + dir + "/vocab.txt"};
}

std::vector<Case> cases(bool gpu) {
  const std::string mlp = source_path("configs/mlp_fmnist_mixed.yaml");
  const std::string resnet = source_path("configs/resnet18_fmnist_mixed.yaml");
  const std::string bert = source_path("configs/bert_tiny_mlm.yaml");
  // Epochs of 4 batches, so that the runs cross epoch ends (a deliberate sync) and an injected overflow makes a
  // skipped step (its diagnosis reads the gradients: another); clipping is on everywhere.
  const std::vector<std::string> small = {"data.train_limit=256",     "data.test_limit=128",
                                          "train.max_steps=10",       "train.log_every_steps=5",
                                          "train.grad_clip_norm=1.0", "debug.inject_nonfinite_grad_at=[3]"};
  std::vector<Case> all = {
      {"MLP, FP32", {"train", mlp, "precision.mode=fp32", "data.batch_size=64"}},
      {"MLP, mixed", {"train", mlp, "data.batch_size=64"}},
      // RGB, so that the stem's channels-last gradient has no flat view (where the overflow is injected).
      {"ResNet-18, mixed, augmented, RGB",
       {"train", resnet, "data.batch_size=64", "data.augment=true", "data.channels=3"}},
      {"BERT-tiny masked-LM, mixed", {"train", bert, "data.seq_len=32", "data.batch_size=64"}},
  };
  for (const auto& o : write_corpus(scratch_dir("cli-host-syncs-text"))) all.back().args.push_back(o);
  if (gpu) {
    all.push_back(
        {"MLP, FP16 with dynamic loss scaling", {"train", mlp, "precision.mode=mixed_fp16", "data.batch_size=64"}});
    all.push_back({"ResNet-18, FP16, master weights",
                   {"train", resnet, "precision.mode=mixed_fp16", "precision.strategy=master_weights",
                    "data.batch_size=64", "data.channels=3"}});
  }
  for (auto& c : all) {
    c.args.insert(c.args.end(), small.begin(), small.end());
    c.args.insert(c.args.end(), {"device.type=auto", "debug.forbid_host_syncs=true"});
  }
  return all;
}

}  // namespace

TEST_CASE("a training step syncs the host only for the overflow flag (debug.forbid_host_syncs)", "[fast][cli]") {
  const bool gpu = torch::cuda::is_available();
  for (const Case& c : cases(gpu)) {
    INFO(c.name);
    std::vector<std::string> args = c.args;
    const std::string dir = scratch_dir("cli-host-syncs");
    args.insert(args.end(), {"--run-dir", dir});
    const CommandResult run = run_mpt(args);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    const nlohmann::json summary = read_json(dir + "/summary.json");
    CHECK(summary["status"] == "completed");
    CHECK(summary["device"] == (gpu ? "cuda" : "cpu"));
    // The injected overflow (FP16's first steps at a scale of 2^15 may add one of their own).
    CHECK(summary["skipped_steps"].get<int64_t>() >= 1);
    CHECK_FALSE(metric_series(dir, "grad_norm").empty());
  }
}
