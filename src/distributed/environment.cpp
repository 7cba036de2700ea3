// Launch variables (see environment.h). Slurm sets no master address, so a multi-task srun step needs the
// batch script to export MASTER_ADDR, as PyTorch's Slurm recipes do.
#include "distributed/environment.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"

namespace mpt::distributed {
namespace {

using Getter = std::function<std::optional<std::string>(const std::string&)>;

int read_int(const Getter& get, const std::string& name, int min, int max, const std::string& why) {
  const std::optional<std::string> text = get(name);
  if (!text) throw UsageError(name + " is not set; " + why);
  try {
    size_t used = 0;
    const long value = std::stol(*text, &used);
    if (used == text->size() && value >= min && value <= max) return static_cast<int>(value);
  } catch (const std::exception&) {
  }
  throw UsageError(name + "=" + *text + ": expected an integer in [" + std::to_string(min) + ", " +
                   std::to_string(max) + "]");
}

// A Slurm per-node list such as "2(x3),1" (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE) at this node's index
// SLURM_NODEID, or 0 when either is missing or malformed.
template <typename Get>
int slurm_per_node_value(const Get& get, const std::optional<std::string>& list) {
  const auto node = get("SLURM_NODEID");
  if (!list || !node) return 0;
  std::vector<int> per_node;
  std::stringstream entries(*list);
  for (std::string entry; std::getline(entries, entry, ',');) {
    int value = 0, repeat = 1;
    if (std::sscanf(entry.c_str(), "%d(x%d)", &value, &repeat) < 1 || value < 1 || repeat < 1 || repeat > 100000) break;
    per_node.insert(per_node.end(), static_cast<size_t>(repeat), value);
  }
  const int index = std::atoi(node->c_str());
  return index >= 0 && index < static_cast<int>(per_node.size()) ? per_node[static_cast<size_t>(index)] : 0;
}

// Slurm without --ntasks-per-node: this node's share from SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE),
// else the job's tasks spread evenly over SLURM_NNODES. Counting every rank as alone on its node would give
// each one all the node's cores.
template <typename Get>
int slurm_tasks_on_this_node(const Get& get, int world_size) {
  const auto list = get("SLURM_STEP_TASKS_PER_NODE") ? get("SLURM_STEP_TASKS_PER_NODE") : get("SLURM_TASKS_PER_NODE");
  if (const int tasks = slurm_per_node_value(get, list); tasks > 0) return std::min(tasks, world_size);
  if (const auto nodes = get("SLURM_NNODES")) {
    const int count = std::atoi(nodes->c_str());
    if (count >= 1) return std::max(1, (world_size + count - 1) / count);
  }
  // Nothing says how the tasks spread: take them as sharing this node. Too few threads per rank costs a little;
  // too many (each rank taking every core) made steps many times slower.
  return world_size;
}

// The CPUs Slurm gave each task: --cpus-per-task, else this node's CPUs of the job shared by its tasks; 0 when
// Slurm says neither (the machine's cores are divided among the ranks on it).
template <typename Get>
int slurm_cpus_per_task(const Get& get, int tasks_on_node) {
  if (get("SLURM_CPUS_PER_TASK")) return read_int(get, "SLURM_CPUS_PER_TASK", 1, 1 << 20, "");
  const int node_cpus = slurm_per_node_value(get, get("SLURM_JOB_CPUS_PER_NODE"));
  return node_cpus > 0 ? std::max(1, node_cpus / tasks_on_node) : 0;
}

}  // namespace

std::optional<LaunchInfo> launch_from_environment(const Getter& get) {
  LaunchInfo info;
  if (get("WORLD_SIZE")) {
    info.launcher = "torchrun-style environment";
    info.world_size = read_int(get, "WORLD_SIZE", 1, 1 << 20, "");
    if (info.world_size == 1) return std::nullopt;
    const std::string why = "WORLD_SIZE=" + std::to_string(info.world_size) + " asks for a distributed job";
    info.rank = read_int(get, "RANK", 0, info.world_size - 1, why);
    info.local_rank = get("LOCAL_RANK") ? read_int(get, "LOCAL_RANK", 0, info.world_size - 1, "") : 0;
    info.local_world_size =
        get("LOCAL_WORLD_SIZE") ? read_int(get, "LOCAL_WORLD_SIZE", 1, info.world_size, "") : info.world_size;
  } else if (get("SLURM_NTASKS") && get("SLURM_PROCID")) {
    info.launcher = "Slurm";
    info.world_size = read_int(get, "SLURM_NTASKS", 1, 1 << 20, "");
    if (info.world_size == 1) return std::nullopt;
    info.rank = read_int(get, "SLURM_PROCID", 0, info.world_size - 1, "");
    info.local_rank = get("SLURM_LOCALID") ? read_int(get, "SLURM_LOCALID", 0, info.world_size - 1, "") : 0;
    info.local_world_size = get("SLURM_NTASKS_PER_NODE")
                                ? read_int(get, "SLURM_NTASKS_PER_NODE", 1, info.world_size, "")
                                : slurm_tasks_on_this_node(get, info.world_size);
    info.cpus_per_rank = slurm_cpus_per_task(get, info.local_world_size);
  } else {
    return std::nullopt;
  }
  if (info.local_rank >= info.local_world_size)
    throw UsageError(fmt::format(
        "{}: local rank {} of {} processes on this machine; a local rank must be below that "
        "count (check {})",
        info.launcher, info.local_rank, info.local_world_size,
        info.launcher == "Slurm" ? "SLURM_LOCALID and SLURM_NTASKS_PER_NODE" : "LOCAL_RANK and LOCAL_WORLD_SIZE"));
  const std::optional<std::string> addr = get("MASTER_ADDR");
  if (!addr || addr->empty())
    throw UsageError("MASTER_ADDR is not set: rank " + std::to_string(info.rank) + " of " +
                     std::to_string(info.world_size) + " (" + info.launcher + ") needs the address of rank 0's host" +
                     (info.launcher == "Slurm" ? " (in the batch script: export MASTER_ADDR=$(scontrol show hostnames "
                                                 "\"$SLURM_JOB_NODELIST\" | head -n 1))"
                                               : ""));
  info.master_addr = *addr;
  if (get("MASTER_PORT")) info.master_port = read_int(get, "MASTER_PORT", 1, 65535, "");
  const std::optional<std::string> agent_store = get("TORCHELASTIC_USE_AGENT_STORE");
  info.launcher_hosts_store = agent_store && (*agent_store == "True" || *agent_store == "true" || *agent_store == "1");
  if (info.launcher_hosts_store) info.launcher = "torchrun";
  return info;
}

std::optional<LaunchInfo> launch_from_environment() {
  return launch_from_environment([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value ? std::optional<std::string>(value) : std::nullopt;
  });
}

}  // namespace mpt::distributed
