// See optimizer_state.h.
#include "ops/optimizer_state.h"

#include "common/error.h"

namespace mpt::ops {

StateFields fields_of(torch::optim::OptimizerParamState& state) {
  if (auto* s = dynamic_cast<torch::optim::AdamWParamState*>(&state))
    return {&s->step(),
            {{"exp_avg", &s->exp_avg()}, {"exp_avg_sq", &s->exp_avg_sq()}, {"max_exp_avg_sq", &s->max_exp_avg_sq()}}};
  if (auto* s = dynamic_cast<torch::optim::AdamParamState*>(&state))
    return {&s->step(),
            {{"exp_avg", &s->exp_avg()}, {"exp_avg_sq", &s->exp_avg_sq()}, {"max_exp_avg_sq", &s->max_exp_avg_sq()}}};
  if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(&state))
    return {nullptr, {{"momentum_buffer", &s->momentum_buffer()}}};
  throw Error("an optimizer state of a kind mpt does not save (not SGD, Adam or AdamW)");
}

std::string optimizer_kind(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer)) return "adamw";
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer)) return "adam";
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer)) return "sgd";
  return "";
}

std::unique_ptr<torch::optim::OptimizerParamState> fresh_state(const torch::optim::Optimizer& optimizer) {
  const std::string kind = optimizer_kind(optimizer);
  if (kind == "adamw") return std::make_unique<torch::optim::AdamWParamState>();
  if (kind == "adam") return std::make_unique<torch::optim::AdamParamState>();
  if (kind == "sgd") return std::make_unique<torch::optim::SGDParamState>();
  throw Error("an optimizer of a kind mpt does not save (not SGD, Adam or AdamW)");
}

}  // namespace mpt::ops
