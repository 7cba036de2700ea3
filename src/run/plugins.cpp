#include "run/plugins.h"

#include <mutex>
#include <string>

#include "config/schema.h"
#include "data/datasets.h"
#include "models/registry.h"
#include "precision/gemm_formats.h"
#include "run/stack_keys.h"
#include "tools/tracking/tracker.h"

namespace mpt::run {

void install_plugins() {
  static const std::string kDropout = "model.dropout", kCheckpointing = "memory.activation_checkpointing";
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<config::KeySpec> rows;
    for (const StackKey& key : stack_keys()) rows.push_back(key.row);
    config::set_stack_keys(std::move(rows));
    for (const models::ModelFamily& family : models::model_families()) {
      keys::KeyGroup group;
      group.deciding_key = "model.name";
      group.names = family.presets;
      group.keys = family.keys;
      if (family.takes_dropout) group.enables.push_back(kDropout);
      if (family.recomputes.size() > 1) group.enables.push_back(kCheckpointing);
      config::add_plugin_keys(group);
    }
    for (const data::DatasetKind& kind : data::dataset_kinds()) {
      keys::KeyGroup group;
      group.deciding_key = "data.name";
      group.names = {kind.name};
      group.keys = kind.options.keys();
      config::add_plugin_keys(group);
    }
    for (const precision::GemmFormatKind& format : precision::gemm_formats()) {
      keys::KeyGroup group;
      group.deciding_key = "precision.fp8.recipe";
      group.names = format.recipes;
      config::add_plugin_keys(group);
    }
    for (const tracking::TrackerKind& kind : tracking::tracker_kinds()) {
      keys::KeyGroup group;
      group.keys = kind.keys;
      config::add_plugin_keys(group);
    }
  });
}

}  // namespace mpt::run
