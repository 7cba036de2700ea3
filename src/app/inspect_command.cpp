// `mpt inspect`: builds the spec's model (on the CPU, without data) and reports its size and cost.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "app/commands.h"
#include "config/load.h"
#include "models/tensor_core_shapes.h"
#include "precision/recipe.h"
#include "run/resolve.h"
#include "run/sections.h"
#include "train/optimizer_shards.h"

namespace mpt::app {
namespace {

// Bytes per parameter of each part of the training state on each rank, from the recipe's weights as it casts them.
nlohmann::ordered_json state_per_rank(const run::ExperimentConfig& c, models::ModelImpl& model, int ranks) {
  const precision::ModulePolicy policy(c.precision.fp32_modules);
  const precision::Recipe recipe(c.precision, model, policy, model.tied_to_fp32_islands(), torch::kCPU);
  int64_t parameters = 0;
  for (const auto& pair : recipe.pairs()) parameters += pair.master.numel();
  const bool sharded = c.distributed.shard_optimizer && ranks > 1;
  const auto per_param = [&](int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(parameters); };
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const train::RankState& rank :
       train::state_per_rank(recipe.pairs(), c.optimizer.name, c.optimizer.momentum, ranks, sharded))
    out.push_back({{"weights", per_param(rank.weights)},
                   {"gradients", per_param(rank.gradients)},
                   {"masters", per_param(rank.masters)},
                   {"optimizer_state", per_param(rank.optimizer_state)},
                   {"total_bytes", rank.weights + rank.gradients + rank.masters + rank.optimizer_state}});
  return out;
}

void print_state_per_rank(const nlohmann::ordered_json& ranks, bool sharded) {
  std::printf("training state per rank, bytes per parameter (%s):\n",
              sharded ? "masters and optimizer state sharded" : "replicated on every rank");
  std::printf("  %-6s %8s %10s %8s %10s %12s\n", "rank", "weights", "gradients", "masters", "optimizer", "total MiB");
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto& rank = ranks[r];
    std::printf("  %-6zu %8.2f %10.2f %8.2f %10.2f %12.1f\n", r, rank["weights"].get<double>(),
                rank["gradients"].get<double>(), rank["masters"].get<double>(), rank["optimizer_state"].get<double>(),
                rank["total_bytes"].get<double>() / (1 << 20));
  }
}

}  // namespace

int run_inspect(const std::string& spec_path, const std::vector<std::string>& overrides, bool json, int ranks) {
  const run::ExperimentConfig c = run::read_sections(run::load_resolved_spec(spec_path, overrides));
  const data::SampleShape sample = data::sample_shape(c.data);
  models::Model model = models::build_model(c.model, sample, precision::ModulePolicy(c.precision.fp32_modules));

  nlohmann::ordered_json modules = nlohmann::ordered_json::object();  // in the model's order
  int64_t total = 0;
  for (const auto& child : model->named_children()) {
    int64_t count = 0;
    for (const auto& p : child.value()->parameters()) count += p.numel();
    modules[child.key()] = count;
    total += count;
  }
  const int64_t macs = model->forward_macs(sample);
  const std::vector<int64_t> input = sample.seq_len > 0
                                         ? std::vector<int64_t>{sample.seq_len}
                                         : std::vector<int64_t>{sample.channels, sample.height, sample.width};
  const int64_t train_flops = 6 * macs;  // 2 FLOPs per MAC; backward costs twice the forward
  // What a CUDA run of this spec would give the Tensor Cores (mpt inspect itself builds on the CPU).
  const models::TensorCoreShapes tensor_cores =
      models::tensor_core_shapes(*model, c.precision, sample, c.data.batch_size);
  const precision::GemmPlan fp8 =
      precision::gemm_plan(c.precision, *model, precision::ModulePolicy(c.precision.fp32_modules));
  nlohmann::ordered_json fp8_json = nlohmann::ordered_json::array();
  for (const auto& layer : fp8.layers)
    fp8_json.push_back({{"layer", layer.name},
                        {"in_features", layer.in_features},
                        {"out_features", layer.out_features},
                        {"format", layer.low_precision ? fp8.format : ""},
                        {"fp8", layer.low_precision},
                        {"why_not", layer.why_not}});
  const nlohmann::ordered_json per_rank = state_per_rank(c, *model, ranks);  // casts the model: after the plans
  if (json) {
    std::cout << nlohmann::ordered_json{{"model", c.model.name},
                                        {"input", input},
                                        {"modules", modules},
                                        {"total_parameters", total},
                                        {"forward_macs_per_sample", macs},
                                        {"train_flops_per_sample", train_flops},
                                        {"tensor_cores", models::to_json(tensor_cores)},
                                        {"fp8_layers", fp8_json},
                                        {"state_per_rank", per_rank}}
                     .dump(2)
              << "\n";
    return 0;
  }
  if (sample.seq_len > 0)
    std::printf("%s on %lld-token sequences, vocabulary %lld, %s\n", c.model.name.c_str(), (long long)sample.seq_len,
                (long long)sample.vocab_size,
                sample.num_classes > 0
                    ? fmt::format("{} classes", sample.num_classes).c_str()
                    : fmt::format("masked-LM predicting {:g}% of tokens", 100 * sample.masked_fraction).c_str());
  else
    std::printf("%s on %lldx%lldx%lld inputs, %lld classes\n", c.model.name.c_str(), (long long)sample.channels,
                (long long)sample.height, (long long)sample.width, (long long)sample.num_classes);
  for (const auto& [name, count] : modules.items())
    std::printf("  %-12s %14lld\n", name.c_str(), count.get<long long>());
  std::printf("  %-12s %14lld parameters\n", "total", (long long)total);
  std::printf("forward: %.4g GMACs per sample; training: ~%.4g GFLOPs per sample\n", macs / 1e9, train_flops / 1e9);
  if (tensor_cores.multiple > 0)
    std::printf("on CUDA (%s): %s\n", precision::mode_name(c.precision.mode), models::describe(tensor_cores).c_str());
  else
    std::printf("on CUDA: plain FP32 does not use Tensor Cores (precision.tf32: true would)\n");
  if (!fp8.layers.empty()) {
    int64_t in_fp8 = 0;
    for (const auto& layer : fp8.layers) in_fp8 += layer.low_precision;
    std::printf("%s (precision.mode fp8): %lld of %zu Linear layers\n", fp8.format.c_str(), (long long)in_fp8,
                fp8.layers.size());
    for (const auto& layer : fp8.layers)
      std::printf("  %-44s %5lld -> %-5lld %s\n", layer.name.c_str(), (long long)layer.in_features,
                  (long long)layer.out_features, layer.low_precision ? fp8.format.c_str() : layer.why_not.c_str());
  }
  print_state_per_rank(per_rank, c.distributed.shard_optimizer && ranks > 1);
  return 0;
}

}  // namespace mpt::app
