// Launch variables (see environment.h). Slurm sets no master address, so a multi-task srun step needs the
// batch script to export MASTER_ADDR, as PyTorch's Slurm recipes do.
#include "dist/environment.h"

#include <cstdlib>

#include "common/error.h"

namespace mpt::dist {
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
                                : 1;
  } else {
    return std::nullopt;
  }
  const std::optional<std::string> addr = get("MASTER_ADDR");
  if (!addr || addr->empty())
    throw UsageError("MASTER_ADDR is not set: rank " + std::to_string(info.rank) + " of " +
                     std::to_string(info.world_size) + " (" + info.launcher +
                     ") needs the address of rank 0's host" +
                     (info.launcher == "Slurm"
                          ? " (in the batch script: export MASTER_ADDR=$(scontrol show hostnames "
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

}  // namespace mpt::dist
