// The key table bound to the config structs: every key has exactly one member, and the structs' own defaults are
// the table's (a component built from a default struct behaves as a spec that sets nothing).
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "config/load.h"
#include "config/schema.h"
#include "run/resolve.h"
#include "run/sections.h"

TEST_CASE("every spec key binds to one member and the structs default to the key table", "[fast][config]") {
  const auto& bindings = mpt::run::key_bindings();  // throws when the table and the bindings disagree
  // The plug-ins' own keys (model families, datasets, trackers), each read by its plug-in; two datasets may declare
  // one key (data.image_size), which the table holds once.
  std::set<std::string> plugin_keys;
  for (const auto& group : mpt::config::plugin_key_groups())
    for (const auto& key : group.keys) plugin_keys.insert(key.key);
  for (const auto& key : plugin_keys) CHECK(mpt::config::find_key(key) != nullptr);
  CHECK(plugin_keys.size() >= 23);
  REQUIRE(bindings.size() + plugin_keys.size() == mpt::config::schema().size());
  // Resolution decides the "auto" keys for the machine; every key it leaves at its default is compared.
  mpt::config::Spec spec = mpt::config::parse_spec("", "/specs/empty.yaml", {});
  mpt::run::resolve_spec(spec, mpt::hardware::Facts{false, 0, false});
  const mpt::run::ExperimentConfig from_table = mpt::run::read_sections(spec);
  const mpt::run::ExperimentConfig constructed;
  size_t compared = 0;
  for (const auto& binding : bindings) {
    if (spec.origin(binding.key) != "default") continue;
    INFO(binding.key);
    CHECK(binding.show(constructed) == binding.show(from_table));
    ++compared;
  }
  CHECK(compared + 8 >= bindings.size());  // resolution owns only a handful of keys
}

TEST_CASE("a spec value reaches its member", "[fast][config]") {
  const auto c = mpt::run::read_sections(mpt::config::parse_spec(
      "model:\n  dropout: 0.25\nprecision:\n  loss_scale:\n    mode: static\n    init: 1024\ndebug:\n"
      "  inject_nonfinite_grad_at: [3, 5]\n",
      "exp.yaml", {"data.batch_size=32", "distributed.bucket_mb=4"}));
  CHECK(c.model.dropout == 0.25);
  CHECK(c.precision.loss_scale.mode == mpt::precision::LossScaleMode::kStatic);
  CHECK(c.precision.loss_scale.init == 1024.0);
  CHECK(c.debug.inject_nonfinite_grad_at == std::vector<int64_t>{3, 5});
  CHECK(c.data.batch_size == 32);
  CHECK(c.distributed.bucket_mb == 4.0);
  CHECK(c.schedule.peak_lr == c.optimizer.lr);
}

TEST_CASE("a model family's own key reaches the family's options", "[fast][config]") {
  mpt::config::Spec spec = mpt::config::parse_spec("model:\n  name: resnet18\n  small_input: true\n", "exp.yaml", {});
  mpt::run::resolve_spec(spec, mpt::hardware::Facts{false, 0, false});
  const auto c = mpt::run::read_sections(spec);
  const mpt::keys::Value* small_input = c.model.options.find("model.small_input");
  REQUIRE(small_input != nullptr);
  CHECK(std::get<bool>(*small_input));
}

TEST_CASE("the key table says which keys may change when a run resumes", "[fast][config]") {
  CHECK(mpt::config::may_differ_on_resume("train.epochs"));
  CHECK(mpt::config::may_differ_on_resume("debug.stop_after_steps"));
  CHECK_FALSE(mpt::config::may_differ_on_resume("optimizer.lr"));
  CHECK_FALSE(mpt::config::may_differ_on_resume("precision.mode"));
  CHECK_FALSE(mpt::config::may_differ_on_resume("no.such.key"));
}
