// The three update paths (see update_path.h).
#include "train/update_path.h"

#include "common/error.h"
#include "ops/fused_optimizers.h"
#include "train/optimizer_shards.h"

namespace mpt::train {
namespace {

std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& holders) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : holders)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

class OnePass : public UpdatePath {
 public:
  OnePass(std::unique_ptr<ops::MasterStepper> stepper, precision::Recipe& recipe, torch::nn::Module& model,
          double max_norm)
      : stepper_(std::move(stepper)),
        recipe_(recipe),
        holders_(model.named_parameters()),
        parameters_(holders_.values()),
        max_norm_(max_norm) {}
  const char* name() const override { return "one pass"; }
  NamedTensors gradient_holders() const override { return holders_; }
  precision::FinishedBackward finish(bool) override {
    return precision::finish_for_one_pass(gradients_of(parameters_), recipe_.scaler(), max_norm_);
  }
  void apply(const precision::FinishedBackward& finished) override {
    stepper_->step(recipe_.pairs(), finished.grad_factor);
  }

 private:
  std::unique_ptr<ops::MasterStepper> stepper_;
  precision::Recipe& recipe_;
  NamedTensors holders_;
  std::vector<torch::Tensor> parameters_;
  double max_norm_;
};

class InPlace : public UpdatePath {
 public:
  InPlace(torch::optim::Optimizer& optimizer, precision::Recipe& recipe, double max_norm)
      : optimizer_(optimizer), recipe_(recipe), weights_(recipe.weights().values()), max_norm_(max_norm) {}
  const char* name() const override { return "in place"; }
  void gather() override { recipe_.grads_to_masters(); }
  NamedTensors gradient_holders() const override { return recipe_.weights(); }
  precision::FinishedBackward finish(bool) override {
    return precision::finish_in_place(gradients_of(weights_), recipe_.scaler(), max_norm_);
  }
  void apply(const precision::FinishedBackward&) override {
    optimizer_.step();
    recipe_.masters_to_model();
  }

 protected:
  torch::optim::Optimizer& optimizer_;
  precision::Recipe& recipe_;
  std::vector<torch::Tensor> weights_;
  double max_norm_;
};

class AcrossRanks : public InPlace {
 public:
  AcrossRanks(torch::optim::Optimizer& optimizer, precision::Recipe& recipe, double max_norm, distributed::Group& group,
              double bucket_mb)
      : InPlace(optimizer, recipe, max_norm), group_(group), averager_(group, weights_, bucket_mb) {}
  const char* name() const override { return "across ranks"; }
  void gather() override {
    recipe_.grads_to_masters();
    averager_.average();  // every rank now holds the same mean gradients
  }
  precision::FinishedBackward finish(bool stop_requested) override {
    return precision::finish_across_ranks(
        gradients_of(weights_), recipe_.scaler(), max_norm_,
        [this](torch::Tensor& flags) { group_.all_reduce_max(flags, "overflow-flag all-reduce"); }, stop_requested);
  }

 private:
  distributed::Group& group_;
  distributed::GradientAverager averager_;
};

class Sharded : public AcrossRanks {
 public:
  Sharded(torch::optim::Optimizer& optimizer, precision::Recipe& recipe, double max_norm, distributed::Group& group,
          double bucket_mb)
      : AcrossRanks(optimizer, recipe, max_norm, group, bucket_mb), shards_(optimizer, recipe, group) {}
  const char* name() const override { return "sharded"; }
  void gather() override {
    shards_.take_pieces();  // before the masters get gradients: the whole masters go first
    AcrossRanks::gather();
  }
  void apply(const precision::FinishedBackward&) override { shards_.step(); }
  std::optional<io::ShardedMasters> write_pieces(const std::string& main_path,
                                                 const std::vector<std::string>& names) override {
    return shards_.write_pieces(main_path, names);
  }
  void after_load() override { shards_.loaded(); }

 private:
  OptimizerShards shards_;
};

}  // namespace

std::unique_ptr<UpdatePath> choose_update_path(torch::optim::Optimizer& optimizer, precision::Recipe& recipe,
                                               torch::nn::Module& model, double max_norm, distributed::Group& group,
                                               const distributed::DistributedConfig& config) {
  if (group.distributed() && config.shard_optimizer)
    return std::make_unique<Sharded>(optimizer, recipe, max_norm, group, config.bucket_mb);
  if (group.distributed()) return std::make_unique<AcrossRanks>(optimizer, recipe, max_norm, group, config.bucket_mb);
  if (auto stepper = ops::master_stepper(optimizer, recipe.pairs()))
    return std::make_unique<OnePass>(std::move(stepper), recipe, model, max_norm);
  return std::make_unique<InPlace>(optimizer, recipe, max_norm);
}

}  // namespace mpt::train
