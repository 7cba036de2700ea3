// Words for a user's slip in a spec key: the closest known key ("did you mean") and what a value must be.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "common/edit_distance.h"
#include "config/schema.h"

namespace mpt::config {
namespace {

constexpr double kFp32Max = std::numeric_limits<float>::max();

std::string last_segment(const std::string& key) { return key.substr(key.rfind('.') + 1); }

}  // namespace

std::string closest_key(const std::string& unknown) {
  // The names PyTorch, Hugging Face and Keras users bring, too far from mpt's in spelling to be found by distance.
  static const std::map<std::string, std::string> kForeignNames = {
      {"learning_rate", "optimizer.lr"},
      {"num_epochs", "train.epochs"},
      {"num_train_epochs", "train.epochs"},
      {"max_grad_norm", "train.grad_clip_norm"},
      {"clip_grad_norm", "train.grad_clip_norm"},
      {"gradient_accumulation_steps", "train.grad_accum_steps"},
      {"accumulate_grad_batches", "train.grad_accum_steps"},
      {"num_warmup_steps", "schedule.warmup_steps"},
      {"lr_scheduler", "schedule.name"},
      {"per_device_train_batch_size", "data.batch_size"},
      {"num_workers", "data.workers"},
      {"amp", "precision.mode"},
      {"fp16", "precision.mode"},
      {"bf16", "precision.mode"},
      {"init_scale", "precision.loss_scale.init"}};
  const std::string leaf = last_segment(unknown);
  if (auto it = kForeignNames.find(leaf); it != kForeignNames.end()) return it->second;
  const size_t tolerance = std::max<size_t>(2, leaf.size() / 3);
  // The length gap bounds a distance from below, and a comparison stops once it cannot beat the best so far: an
  // unknown key of megabytes costs no more than a short one.
  auto gap = [](const std::string& a, const std::string& b) {
    return a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  };
  std::string best;
  size_t best_distance = tolerance + 1;
  for (const auto& spec : schema()) {
    // A right leaf under the wrong section ("train.lr") is the commonest slip: compare leaves too.
    const std::string spec_leaf = last_segment(spec.key);
    size_t distance = best_distance;
    if (gap(unknown, spec.key) < distance) distance = edit_distance(unknown, spec.key, distance);
    if (gap(leaf, spec_leaf) + 1 < distance) distance = edit_distance(leaf, spec_leaf, distance - 1) + 1;
    if (distance < best_distance) best_distance = distance, best = spec.key;
  }
  return best;
}

std::string describe_allowed(const KeySpec& spec) {
  std::ostringstream out;
  if (!spec.choices.empty()) {
    out << "one of ";
    for (size_t i = 0; i < spec.choices.size(); ++i) out << (i ? ", " : "") << spec.choices[i];
    return out.str();
  }
  out << (spec.type == KeyType::kInt     ? "an integer"
          : spec.type == KeyType::kFloat ? "a number"
                                         : key_type_name(spec.type));
  auto bound = [](double v) {
    std::ostringstream s;
    s << v << (v == kFp32Max ? " (FP32's largest finite value)" : "");
    return s.str();
  };
  bool has_min = std::isfinite(spec.min), has_max = std::isfinite(spec.max);
  if (spec.type == KeyType::kIntList || spec.type == KeyType::kStringList) {
    if (has_min && spec.type == KeyType::kIntList) out << " (each >= " << bound(spec.min) << ")";
    return out.str();
  }
  if (has_min) out << (spec.min_exclusive ? " > " : " >= ") << bound(spec.min);
  if (has_min && has_max) out << " and";
  if (has_max) out << (spec.max_exclusive ? " < " : " <= ") << bound(spec.max);
  return out.str();
}

}  // namespace mpt::config
