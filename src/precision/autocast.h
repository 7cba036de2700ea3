// Autocast scopes: AutocastScope turns mixed precision on for a forward pass; Fp32Scope turns it off for a
// region the policy keeps in FP32 (the output layer, norms). Both restore the previous state on exit.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <vector>

namespace mpt::precision {

// The autocast state of `device`: whether it is on, and the dtype it computes in.
inline bool autocast_enabled(torch::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
inline torch::ScalarType autocast_dtype(torch::DeviceType device) { return at::autocast::get_autocast_dtype(device); }

class AutocastScope {
 public:
  // `compute_dtype` kFloat means "no autocast": the scope then does nothing.
  AutocastScope(torch::DeviceType device, torch::ScalarType compute_dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  torch::DeviceType device_;
  bool active_ = false;
  bool was_enabled_ = false;
};

class Fp32Scope {
 public:
  explicit Fp32Scope(torch::DeviceType device);
  ~Fp32Scope();
  Fp32Scope(const Fp32Scope&) = delete;
  Fp32Scope& operator=(const Fp32Scope&) = delete;

 private:
  torch::DeviceType device_;
  bool was_enabled_;
  torch::ScalarType dtype_;
};

// Runs `module_forward(x_fp32)` with autocast off and a floating input promoted to FP32 when `keep_fp32`;
// otherwise runs it as is. Models call this for the modules the policy names.
template <typename Forward>
torch::Tensor forward_maybe_fp32(bool keep_fp32, const torch::Tensor& x, Forward&& module_forward) {
  if (!keep_fp32) return module_forward(x);
  Fp32Scope scope(x.device().type());
  return module_forward(x.is_floating_point() ? x.to(torch::kFloat) : x);
}

// The same for a module of several inputs, each floating one promoted.
template <typename Forward>
torch::Tensor forward_maybe_fp32(bool keep_fp32, const std::vector<torch::Tensor>& inputs, Forward&& module_forward) {
  if (!keep_fp32) return module_forward(inputs);
  Fp32Scope scope(inputs.front().device().type());
  std::vector<torch::Tensor> wide;
  for (const torch::Tensor& x : inputs) wide.push_back(x.is_floating_point() ? x.to(torch::kFloat) : x);
  return module_forward(wide);
}

}  // namespace mpt::precision
