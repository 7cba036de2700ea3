// The stack's own spec keys (every key that is no plug-in's), each declared once with the member that receives it:
// run/plugins.cpp puts their rows into the key table, run/sections.cpp reads a spec through their bindings.
#pragma once

#include <vector>

#include "config/schema.h"
#include "run/sections.h"

namespace mpt::run {

struct StackKey {
  config::KeySpec row;
  KeyBinding binding;
};

// In the key table's order: experiment, model, data, precision, optimizer, schedule, train, checkpoint, memory,
// device, distributed, debug.
std::vector<StackKey> stack_keys();

namespace stack {
std::vector<StackKey> experiment_and_model_keys();
std::vector<StackKey> data_keys();
std::vector<StackKey> precision_keys();
std::vector<StackKey> training_keys();
std::vector<StackKey> system_keys();
}  // namespace stack

}  // namespace mpt::run
