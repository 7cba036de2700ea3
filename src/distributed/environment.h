// Where this process sits in a distributed job, read from the environment the standard launchers set:
// torchrun / Kubernetes PyTorchJob (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and Slurm's srun
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, with MASTER_ADDR exported by the batch script).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace mpt::distributed {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;  // processes on this machine: threads are shared among them
  int cpus_per_rank = 0;     // Slurm's CPUs for each task (SLURM_CPUS_PER_TASK); 0: divide the machine's cores
  std::string master_addr;
  int master_port = 29500;  // torchrun's default
  std::string launcher;     // "torchrun-style environment" or "Slurm"
  // torchrun's agent already serves the TCP store at MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE):
  // rank 0 joins it as a client instead of binding the port itself.
  bool launcher_hosts_store = false;
};

// Reads the launch variables through `get` (getenv in production, a map in tests). nullopt when the process
// was not launched as part of a job of two or more (no WORLD_SIZE, or a one-task Slurm step). Throws
// mpt::UsageError naming the variable when the set is incomplete or inconsistent.
std::optional<LaunchInfo> launch_from_environment(
    const std::function<std::optional<std::string>(const std::string&)>& get);
std::optional<LaunchInfo> launch_from_environment();

}  // namespace mpt::distributed
