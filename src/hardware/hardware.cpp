// Hardware probes: CPU features, CUDA devices, threads, the BLAS LibTorch names in its build line, and the
// allocator (tcmalloc is reached through dlsym, as the binary may run without it).
#include "hardware/hardware.h"

#include <unistd.h>

#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>
#ifdef MPT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

#include "common/cpu_features.h"

namespace mpt::hardware {

bool cpu_has_native_bf16() { return cpu_features().avx512_bf16 || cpu_features().amx_bf16; }

bool cuda_available() { return torch::cuda::is_available(); }

int cuda_compute_capability() {
#ifdef MPT_WITH_CUDA
  if (!cuda_available()) return 0;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major * 10 + minor;
#else
  return 0;
#endif
}

int available_cores() {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t allowed;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) cores = std::max(1, CPU_COUNT(&allowed));
  // cgroup v2 quota ("200000 100000": two cores' worth of time per period; "max": none).
  std::ifstream quota_file("/sys/fs/cgroup/cpu.max");
  std::string quota;
  long long period = 0;
  if (quota_file >> quota >> period && quota != "max" && period > 0) {
    const long long microseconds = std::atoll(quota.c_str());
    if (microseconds > 0)
      cores = std::min(cores, static_cast<int>(std::max(1LL, (microseconds + period - 1) / period)));
  }
  return cores;
}

int other_runnable_tasks() {
  int fewest = -1;
  for (int sample = 0; sample < 5; ++sample) {
    if (sample > 0) std::this_thread::sleep_for(std::chrono::milliseconds(4));
    std::ifstream stat("/proc/stat");
    for (std::string line; std::getline(stat, line);)
      if (line.rfind("procs_running ", 0) == 0) {
        const int running = std::atoi(line.c_str() + 14) - 1;
        fewest = fewest < 0 ? running : std::min(fewest, running);
      }
  }
  return fewest < 0 ? -1 : std::max(0, fewest);
}

int configure_threads(int requested, int processes_sharing, int cpus_per_process) {
  const int cores = available_cores();
  const int threads = requested > 0          ? requested
                      : cpus_per_process > 0 ? std::min(cpus_per_process, cores)
                                             : std::max(1, cores / std::max(1, processes_sharing));
  torch::set_num_threads(threads);
  return threads;
}

std::string blas_description() {
  // LibTorch's build line names its BLAS (the wheel links MKL statically; BF16 GEMMs go through oneDNN).
  const std::string config = at::show_config();
  auto value_after = [&](const std::string& key) {
    const size_t at = config.find(key);
    if (at == std::string::npos) return std::string();
    const size_t begin = at + key.size();
    return config.substr(begin, config.find_first_of(",\n", begin) - begin);
  };
  std::string blas = value_after("BLAS_INFO=");
  if (blas.empty()) return "unknown";
  if (const std::string mkl = value_after("Math Kernel Library Version "); !mkl.empty()) blas += " " + mkl;
  if (const std::string dnn = value_after("MKL-DNN v"); !dnn.empty()) blas += ", oneDNN " + dnn;
  return blas;
}

namespace {

// tcmalloc returns free spans to the kernel at TCMALLOC_RELEASE_RATE (default 1), read when the library loads. A
// training step frees and reallocates the same large blocks (gradients, activations), so released spans are
// page-faulted back in the next step, which made BERT-base step times uneven, with a tail of slow steps
// (docs/findings.md). Rate 0 keeps them. The setting has no C entry point;
// TCMallocImplementation::SetMemoryReleaseRate only stores the rate (it does not touch its object), and is called
// on MallocExtension::instance(), which is that object.
bool keep_tcmalloc_spans() {
  if (std::getenv("TCMALLOC_RELEASE_RATE")) return false;  // the user's choice stands
  using Instance = void* (*)();
  using SetRate = void (*)(void*, double);
  auto instance = reinterpret_cast<Instance>(dlsym(RTLD_DEFAULT, "_ZN15MallocExtension8instanceEv"));
  auto set_rate = reinterpret_cast<SetRate>(dlsym(RTLD_DEFAULT, "_ZN22TCMallocImplementation20SetMemoryReleaseRateEd"));
  if (!instance || !set_rate || !dlsym(RTLD_DEFAULT, "tc_malloc")) return false;
  set_rate(instance(), 0.0);
  return true;
}

bool tcmalloc_keeps_spans = false;

}  // namespace

std::string allocator_description() {
  void* tcmalloc = dlsym(RTLD_DEFAULT, "tc_malloc");
  if (!tcmalloc) return "glibc malloc";
  Dl_info library{};
  const std::string rate = tcmalloc_keeps_spans ? ", release rate 0"
                           : std::getenv("TCMALLOC_RELEASE_RATE")
                               ? std::string(", TCMALLOC_RELEASE_RATE=") + std::getenv("TCMALLOC_RELEASE_RATE")
                               : "";
  if (dladdr(tcmalloc, &library) && library.dli_fname)
    return "tcmalloc (" + std::string(library.dli_fname) + ")" + rate;
  return "tcmalloc" + rate;
}

int own_loop_threads() {
  const int threads = at::get_num_threads();
  std::vector<char> ran(threads, 0);
  // A grain of 1 gives every thread of the pool one task; each marks the slot of the thread it ran on.
  at::parallel_for(0, threads, 1, [&](int64_t, int64_t) { ran[at::get_thread_num()] = 1; });
  return static_cast<int>(std::count(ran.begin(), ran.end(), 1));
}

void configure_cuda_math(bool tf32) {
  at::globalContext().setAllowTF32CuBLAS(tf32);
  at::globalContext().setAllowTF32CuDNN(tf32);
  at::globalContext().setBenchmarkCuDNN(true);
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

Facts probe() { return {cuda_available(), cuda_compute_capability(), cpu_has_native_bf16()}; }

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

int nvidia_driver_major() {
  std::ifstream version("/proc/driver/nvidia/version");
  std::string text((std::istreambuf_iterator<char>(version)), {});
  const auto at = text.find("Kernel Module");
  if (at == std::string::npos) return 0;
  return std::atoi(text.c_str() + text.find_first_of("0123456789", at));
}

void tune_host_allocator() {
  // Blocks up to 32 MiB (glibc's largest allowed threshold) come from the heap and are reused; the heap top is
  // trimmed only beyond 512 MiB of free space. An explicit setting also stops the dynamic adjustment.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 512 * 1024 * 1024);
  tcmalloc_keeps_spans = keep_tcmalloc_spans();
}

}  // namespace mpt::hardware
