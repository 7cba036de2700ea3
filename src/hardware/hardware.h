// What this machine offers mpt: CPU BF16 support, CUDA devices, threads and the BLAS behind FP32 GEMM,
// and the process's peak memory. Read once by resolution, doctor-style logging and summary.json.
#pragma once

#include <cstdint>
#include <string>

namespace mpt::hardware {

// The spec's device section.
struct DeviceConfig {
  std::string type = "cpu";  // cpu | cuda (resolved from auto)
  int64_t threads = 0;       // 0: every available core, shared among this machine's ranks
};

// What resolution asks of the machine (a struct so that tests can ask "what if there is a GPU").
struct Facts {
  bool cuda_available = false;
  int cuda_capability = 0;  // major*10+minor
  bool cpu_native_bf16 = false;
};
Facts probe();

bool cpu_has_native_bf16();  // AVX512-BF16 or AMX-BF16: oneDNN runs BF16 GEMM natively
bool cuda_available();
int cuda_compute_capability();  // major*10+minor of device 0; 0 without CUDA

// The cores this process may run on: its CPU affinity (taskset, Slurm, a container's cpuset), capped by a
// cgroup v2 CPU quota; at least 1.
int available_cores();

// Tasks other than this one that are runnable right now (/proc/stat's procs_running, the least of five samples a
// few milliseconds apart, less this thread): each keeps a core busy, and an OpenMP barrier waits for any of our threads
// the kernel deschedules for it. -1 when unknown.
int other_runnable_tasks();

// Sets LibTorch's intra-op threads and, when OpenBLAS is loaded, its thread count; 0 means every available core,
// divided among `processes_sharing` processes on this machine (the local ranks of a data-parallel job).
int configure_threads(int requested, int processes_sharing = 1, int cpus_per_process = 0);

// Keeps glibc malloc from returning training-step-sized blocks to the OS. Its default dynamic mmap threshold starts
// at 128 KiB, so until some large block happens to be freed, every gradient and optimizer temporary of a few MiB is
// a fresh mmap whose pages fault in each step, which made MLP steps several times slower on synthetic data, where
// nothing large had been freed yet (docs/findings.md). Under tcmalloc it sets the release rate to 0 (unless
// TCMALLOC_RELEASE_RATE is set) for the same reason. Call once at start-up.
void tune_host_allocator();

// LibTorch's BLAS as its build names it: "mkl 2024.2-Product Build ..., oneDNN 3.13.3", or "unknown".
std::string blas_description();

// The malloc in use: "tcmalloc (PATH), release rate 0" when it replaced glibc's (the build links it when
// installed), else "glibc malloc".
std::string allocator_description();

// How many threads an at::parallel_for in mpt's own code runs on (fused optimizers, dropout, the gradient
// check). at::parallel_for is an inline template that uses LibTorch's OpenMP pool only where the caller was
// compiled with OpenMP (CMake option MPT_OPENMP); otherwise it is 1 whatever LibTorch's thread count.
int own_loop_threads();

// CUDA math for a run on the GPU: TF32 in cuBLAS and cuDNN as asked (set both ways, since LibTorch's defaults
// changed across versions), and cuDNN's benchmark mode, which times the convolution algorithms once per shape
// and keeps the fastest (a training step repeats the same shapes). Harmless without CUDA.
void configure_cuda_math(bool tf32);

std::string cpu_model();          // /proc/cpuinfo "model name"
int64_t physical_memory_bytes();  // the machine's RAM (sysconf); 0 when unknown
int nvidia_driver_major();        // 535 from /proc/driver/nvidia/version; 0 when there is no NVIDIA driver

}  // namespace mpt::hardware
