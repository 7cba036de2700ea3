// The spec table before step 0 lists the keys that apply to the spec, and says how many it left out.
#include <catch2/catch.hpp>

#include "config/load.h"
#include "config/relevance.h"
#include "config/schema.h"

using namespace mpt::config;

namespace {

bool listed(const std::string& table, const std::string& key) {
  return table.find("\n" + key + " ") != std::string::npos;
}

}  // namespace

TEST_CASE("the spec table leaves out the defaults of other model families, data, optimizers and modes",
          "[fast][config]") {
  const Spec mlp = parse_spec("model:\n  name: mlp\noptimizer:\n  name: adam\n", "mlp.yaml", {"debug.slow_down=0.5"});
  const std::string table = mlp.to_table();
  for (const char* key : {"model.hidden_sizes", "model.activation", "optimizer.beta1", "data.image_size",
                          "precision.loss_scale.init", "debug.slow_down"})
    CHECK(listed(table, key));
  for (const char* key :
       {"model.head", "model.heads", "model.small_input", "data.vocab", "data.mask_prob", "precision.fp8.recipe",
        "optimizer.momentum", "schedule.gamma", "debug.check_numerics", "tracking.mlflow.uri"})
    CHECK_FALSE(listed(table, key));
  CHECK_THAT(table, Catch::Contains("left out: --all-keys shows every key"));
  const std::string all = mlp.to_table(/*all=*/true);
  for (const auto& key : schema()) CHECK(listed(all, key.key));
  CHECK_THAT(all, !Catch::Contains("left out"));
}

TEST_CASE("a key set in the spec or an override is always listed, whatever the family", "[fast][config]") {
  const Spec bert = parse_spec("model:\n  name: bert-tiny\ndata:\n  name: text_corpus\n", "bert.yaml",
                               {"model.hidden_sizes=[64]", "precision.mode=fp8"});
  CHECK(applies("model.hidden_sizes", bert));  // set by an override: the user wants to see it
  CHECK(applies("model.head", bert));
  CHECK(applies("data.mask_prob", bert));
  CHECK(applies("precision.fp8.recipe", bert));
  CHECK_FALSE(applies("model.activation", bert));
  CHECK_FALSE(applies("data.augment", bert));
}

TEST_CASE("a key given a value that nothing reads under the other keys is found, with what would make it apply",
          "[fast][config]") {
  const Spec mixed = parse_spec("precision:\n  mode: mixed_bf16\n  fp8:\n    recipe: mxfp8\n", "mx.yaml",
                                {"optimizer.name=adamw", "optimizer.momentum=0.5", "model.heads=4"});
  const std::vector<InertKey> inert = inert_keys(mixed);
  REQUIRE(inert.size() == 3u);  // key-table order
  CHECK(inert[0].key == "model.heads");
  CHECK(inert[0].deciding_value == "mlp");
  CHECK(inert[1].key == "precision.fp8.recipe");
  CHECK(inert[1].deciding_key == "precision.mode");
  CHECK(inert[1].deciding_value == "mixed_bf16");
  CHECK(inert[1].applies_under == "fp8");
  CHECK(inert[2].key == "optimizer.momentum");
  // The same keys where they apply, and any key at its default (config.yaml writes every key), are not inert.
  CHECK(inert_keys(parse_spec("precision:\n  mode: fp8\n  fp8:\n    recipe: mxfp8\n", "fp8.yaml", {})).empty());
  CHECK(inert_keys(parse_spec("optimizer:\n  name: adam\n  momentum: 0.9\n", "adam.yaml", {})).empty());
  CHECK(inert_keys(parse_spec(parse_spec("", "all.yaml", {}).to_yaml(), "config.yaml", {})).empty());
}
