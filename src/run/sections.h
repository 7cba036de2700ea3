// A resolved spec cut into the config structs its components take. The command wiring is the only code that holds
// all of them; each component receives its own section.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/keys.h"
#include "config/spec.h"
#include "data/dataset.h"
#include "distributed/process_group.h"
#include "hardware/hardware.h"
#include "models/registry.h"
#include "precision/precision_config.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/train_config.h"

namespace mpt::run {

struct ExperimentSection {
  std::string name;
  uint64_t seed = 0;
  std::string output_root = "runs";
};

// One member per section of the spec, each the struct its component takes.
struct ExperimentConfig {
  ExperimentSection experiment;
  models::ModelConfig model;
  data::DataConfig data;
  precision::PrecisionConfig precision;
  train::OptimizerConfig optimizer;
  train::ScheduleConfig schedule;  // peak_lr, warmup and total_steps are completed by the wiring
  train::TrainConfig train;        // total_steps is completed by the wiring
  train::CheckpointConfig checkpoint;
  models::MemoryConfig memory;
  hardware::DeviceConfig device;
  distributed::DistributedConfig distributed;
  train::DebugConfig debug;
  keys::Options tracking;  // the trackers' keys (tools/tracking/tracker.h)
};

ExperimentConfig read_sections(const config::Spec& spec);

// One row of the key table bound to the member that receives it: `read` copies the spec's value in, `show`
// writes the member's value as text (tests compare the structs' own defaults with the table's).
struct KeyBinding {
  std::string key;
  std::function<void(const config::Spec&, ExperimentConfig&)> read;
  std::function<std::string(const ExperimentConfig&)> show;
};

// Every binding of a stack key, in the key table's order (a plug-in's keys go to its section's options). A key is
// declared with its member (run/stack_keys.h), so neither exists without the other; a key declared twice throws.
const std::vector<KeyBinding>& key_bindings();

}  // namespace mpt::run
