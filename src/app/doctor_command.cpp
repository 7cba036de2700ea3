// `mpt doctor`: the seed's environment check as a command. Facts first, then concrete warnings, then a
// verdict; a smoke test of FP32 and mixed-precision math decides whether mpt can run here.
#include <torch/torch.h>
#include <torch/version.h>

#include <iostream>
#include <thread>

#include "app/commands.h"
#include "data/dataset.h"
#include "hardware/hardware.h"
#include "mpt/version.h"
#include "precision/autocast.h"
#include "precision/mode.h"

namespace mpt::app {
namespace {

void fact(const std::string& name, const std::string& value) {
  std::cout << "  " << name << std::string(name.size() < 22 ? 22 - name.size() : 1, ' ') << value << "\n";
}

// One FP32 GEMM against a reference, and one under autocast; "" when both work, else what failed.
std::string smoke_test(const torch::Device& device, torch::ScalarType mixed_dtype) {
  try {
    auto a = torch::ones({64, 64}, device), b = torch::full({64, 64}, 2.0, device);
    if (torch::mm(a, b).sum().item<double>() != 64.0 * 64 * 128) return "FP32 matrix multiply gave a wrong result";
    if (mixed_dtype != torch::kFloat) {
      precision::AutocastScope autocast(device.type(), mixed_dtype);
      if (torch::mm(a, b).scalar_type() != mixed_dtype) return "autocast did not compute in the mixed dtype";
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

int run_doctor() {
  const hardware::Facts facts = hardware::probe();
  const int driver = hardware::nvidia_driver_major();
  const unsigned cores = static_cast<unsigned>(hardware::available_cores());
  const int default_threads = torch::get_num_threads();
  const std::string blas = hardware::blas_description();
  std::vector<std::string> warnings;

  std::cout << "mpt " << kVersion << " (git " << kGitHash << ")\n";
#ifdef MPT_WITH_CUDA
  const std::string build = torch::cuda::is_available() ? " (CUDA)" : " (built with CUDA; no GPU visible)";
#else
  const std::string build = " (CPU-only build)";
#endif
  fact("LibTorch", std::string(TORCH_VERSION) + build);
  if (*kTorchEnvironment) fact("torch environment", kTorchEnvironment);
  fact("CPU", hardware::cpu_model() + ", " + std::to_string(cores) + " cores");
  fact("CPU BF16", facts.cpu_native_bf16 ? "native (AVX512-BF16/AMX): BF16 autocast is fast" : "not native");
  if (facts.cuda_available) {
    const int cc = facts.cuda_capability;
    fact("GPUs", std::to_string(torch::cuda::device_count()) + ", compute capability " + std::to_string(cc / 10) + "." +
                     std::to_string(cc % 10));
    fact("Tensor Cores", cc >= 70 ? "yes (>= 7.0)" : "no (< 7.0): mixed precision gains little");
    fact("GPU BF16", cc >= 80 ? "yes (>= 8.0)" : "no (< 8.0): FP16 with loss scaling");
    fact("cuDNN", torch::cuda::cudnn_is_available() ? "available" : "missing");
    fact("NVIDIA driver", driver ? "R" + std::to_string(driver) : "unknown");
    if (driver && driver < 450) warnings.push_back("NVIDIA driver R" + std::to_string(driver) + " is below R450");
  } else {
    fact("GPUs", "none visible");
  }
  fact("BLAS", blas);
  const std::string allocator = hardware::allocator_description();
  fact("allocator", allocator);
  // What training sets (device.threads: 0); the loop probe below runs with it, not with LibTorch's default.
  const int train_threads = hardware::configure_threads(0);
  const char* omp = std::getenv("OMP_NUM_THREADS");
  fact("threads", "LibTorch default " + std::to_string(default_threads) +
                      (omp ? std::string(" (OMP_NUM_THREADS=") + omp + ")" : std::string()) + "; mpt uses " +
                      std::to_string(train_threads) + " (device.threads: 0 = every core; set it to use fewer)");
  const int loop_threads = hardware::own_loop_threads();
  fact("mpt's loops", "on " + std::to_string(loop_threads) + " of those " + std::to_string(train_threads) +
                          " threads (fused optimizers, dropout, gradient check)");
  const auto mixed = precision::choose_mixed(facts.cuda_available, facts);
  fact("precision.mode: mixed", std::string("-> ") + precision::mode_name(mixed.value) + " (" + mixed.reason + ")");

  if (allocator == "glibc malloc")
    warnings.push_back(
        "glibc malloc re-faults large activation blocks every step (BERT steps up to 3x slower): "
        "apt-get install libtcmalloc-minimal4 and rebuild");
  if (train_threads > 1 && loop_threads == 1)
    warnings.push_back("mpt was built without OpenMP (MPT_OPENMP=OFF): its own loops run on one thread of " +
                       std::to_string(train_threads));
  if (data::find_idx_file("/usr/share/datasets/fashion-mnist", "train-images-idx3-ubyte").empty())
    warnings.push_back(
        "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist): the shipped configs need it");

  const std::string failure = smoke_test(torch::Device(facts.cuda_available ? torch::kCUDA : torch::kCPU),
                                         precision::compute_dtype(mixed.value));
  for (const auto& w : warnings) std::cout << "warning: " << w << "\n";
  if (!failure.empty()) {
    std::cout << "mpt cannot run here: " << failure << "\n";
    return 1;
  }
  std::cout << "ok: mpt can train here" << (warnings.empty() ? "" : " (see the warnings above)") << "\n";
  return 0;
}

}  // namespace mpt::app
