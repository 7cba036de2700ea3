// Spec loading: every error class is reported with file:line, key, value and what is allowed, all at once.
#include <catch2/catch.hpp>

#include <chrono>

#include "common/error.h"
#include "config/load.h"
#include "config/schema.h"
#include "tests/support/alias_bomb.h"

using mpt::config::parse_spec;

namespace {

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_spec(yaml, "exp.yaml", overrides);
  } catch (const mpt::UsageError& e) {
    REQUIRE(e.exit_code() == 2);
    return e.what();
  }
  FAIL("expected a spec error");
  return "";
}

}  // namespace

TEST_CASE("defaults fill every key the spec leaves out", "[fast][config]") {
  auto spec = parse_spec("optimizer:\n  lr: 0.01\n", "exp.yaml", {});
  CHECK(spec.get_float("optimizer.lr") == Approx(0.01));
  CHECK(spec.origin("optimizer.lr") == "exp.yaml:2");
  CHECK(spec.get_int("precision.loss_scale.growth_interval") == 2000);
  CHECK(spec.get_float("precision.loss_scale.init") == 32768.0);
  CHECK(spec.origin("precision.loss_scale.init") == "default");
  CHECK(spec.get_int_list("model.hidden_sizes") == std::vector<int64_t>{512});
}

TEST_CASE("an unknown key names file:line and suggests the closest key", "[fast][config]") {
  std::string message = error_of("optimizer:\n  lr: 0.01\n  weight_decai: 0.1\n");
  CHECK_THAT(message, Catch::Contains("exp.yaml:3: unknown key 'optimizer.weight_decai'"));
  CHECK_THAT(message, Catch::Contains("did you mean 'optimizer.weight_decay'?"));
}

TEST_CASE("a right key under the wrong section is pointed at the right one", "[fast][config]") {
  CHECK_THAT(error_of("train:\n  lr: 0.01\n"), Catch::Contains("did you mean 'optimizer.lr'?"));
}

TEST_CASE("the names PyTorch and Hugging Face users bring point at mpt's keys", "[fast][config]") {
  CHECK_THAT(error_of("optimizer:\n  learning_rate: 0.01\n"), Catch::Contains("did you mean 'optimizer.lr'?"));
  CHECK_THAT(error_of("train:\n  num_epochs: 3\n"), Catch::Contains("did you mean 'train.epochs'?"));
  CHECK_THAT(error_of("train:\n  max_grad_norm: 1.0\n"), Catch::Contains("did you mean 'train.grad_clip_norm'?"));
  for (const char* name : {"learning_rate", "num_epochs", "num_train_epochs", "max_grad_norm", "clip_grad_norm",
                           "gradient_accumulation_steps", "accumulate_grad_batches", "num_warmup_steps", "lr_scheduler",
                           "per_device_train_batch_size", "num_workers", "amp", "fp16", "bf16", "init_scale"}) {
    const std::string suggestion = mpt::config::closest_key(std::string("x.") + name);
    INFO(name << " -> " << suggestion);
    CHECK(mpt::config::find_key(suggestion) != nullptr);  // every alias names a real key
  }
}

TEST_CASE("wrong types and out-of-range values say what is allowed", "[fast][config]") {
  std::string message = error_of(
      "train:\n  epochs: many\n  grad_accum_steps: 0\nprecision:\n  mode: half\n  loss_scale:\n"
      "    backoff_factor: 1.5\nmodel:\n  hidden_sizes: 512\ndata:\n  shuffle: maybe\n");
  CHECK_THAT(message, Catch::Contains("6 errors"));
  CHECK_THAT(message, Catch::Contains("exp.yaml:2: train.epochs = many: expected an integer >= 0"));
  CHECK_THAT(message, Catch::Contains("exp.yaml:3: train.grad_accum_steps = 0: expected an integer >= 1 and <= 4096"));
  CHECK_THAT(message, Catch::Contains("precision.mode = half: expected one of fp32, mixed, mixed_bf16, mixed_fp16"));
  CHECK_THAT(message, Catch::Contains("backoff_factor = 1.5: expected a number > 0 and < 1"));
  CHECK_THAT(message, Catch::Contains("model.hidden_sizes = 512: expected list of integers"));
  CHECK_THAT(message, Catch::Contains("data.shuffle = maybe: expected true or false"));
}

TEST_CASE("a float where an integer is expected is an error, not a truncation", "[fast][config]") {
  CHECK_THAT(error_of("train:\n  epochs: 1.5\n"), Catch::Contains("train.epochs = 1.5"));
}

TEST_CASE("YAML syntax errors give line and column", "[fast][config]") {
  CHECK_THAT(error_of("optimizer:\n  lr: [0.1\n"), Catch::Contains("exp.yaml:"));
  CHECK_THAT(error_of("- a\n- b\n"), Catch::Contains("expected a mapping of sections"));
  CHECK_THAT(error_of("train: 3\n"), Catch::Contains("'train' is a section"));
}

TEST_CASE("overrides set typed values and are checked like the file", "[fast][config]") {
  auto spec = parse_spec(
      "optimizer:\n  lr: 0.01\n", "exp.yaml",
      {"optimizer.lr=3e-4", "train.epochs=1", "debug.inject_nonfinite_grad_at=[5, 10]", "precision.mode=mixed"});
  CHECK(spec.get_float("optimizer.lr") == Approx(3e-4));
  CHECK(spec.origin("optimizer.lr") == "override");
  CHECK(spec.get_int("train.epochs") == 1);
  CHECK(spec.get_int_list("debug.inject_nonfinite_grad_at") == std::vector<int64_t>{5, 10});
  CHECK(spec.get_string("precision.mode") == "mixed");

  std::string message = error_of("", {"optimizer.lr=fast", "optimiser.lr=1", "nonsense"});
  CHECK_THAT(message, Catch::Contains("3 errors"));
  CHECK_THAT(message, Catch::Contains("override 'optimizer.lr=fast': optimizer.lr = fast: expected a number > 0"));
  CHECK_THAT(message, Catch::Contains("did you mean 'optimizer.lr'?"));
  CHECK_THAT(message, Catch::Contains("override 'nonsense': expected key=value"));
}

TEST_CASE("Hydra's +key, ++key and ~key overrides add, add-or-set and delete", "[fast][config]") {
  const std::string file = "optimizer:\n  lr: 0.01\n";
  auto spec = parse_spec(file, "exp.yaml", {"+train.epochs=2", "++optimizer.lr=0.5", "++train.max_steps=7"});
  CHECK(spec.get_int("train.epochs") == 2);
  CHECK(spec.get_float("optimizer.lr") == 0.5);
  CHECK(spec.get_int("train.max_steps") == 7);
  auto deleted = parse_spec(file, "exp.yaml", {"~optimizer.lr"});
  CHECK(deleted.get_float("optimizer.lr") == 0.001);  // the schema's default
  CHECK(deleted.origin("optimizer.lr") == "default");
  CHECK(parse_spec(file, "exp.yaml", {"~optimizer.lr=0.01"}).origin("optimizer.lr") == "default");

  const std::string message = error_of(file, {"+optimizer.lr=0.1", "~train.epochs", "~optimizer.lr=0.2", "+nope=1"});
  CHECK_THAT(message, Catch::Contains("4 errors"));
  CHECK_THAT(message, Catch::Contains("optimizer.lr is already set (exp.yaml:2); use ++optimizer.lr=0.1"));
  CHECK_THAT(message, Catch::Contains("train.epochs is not set in the spec; nothing to delete"));
  CHECK_THAT(message, Catch::Contains("optimizer.lr is 0.01 (exp.yaml:2), not 0.2"));
  CHECK_THAT(message, Catch::Contains("unknown key 'nope'"));
}

TEST_CASE("the resolved spec round-trips through its YAML", "[fast][config]") {
  auto spec = parse_spec("model:\n  hidden_sizes: [256, 128]\nexperiment:\n  name: \"\"\n", "exp.yaml",
                         {"optimizer.lr=0.0003", "precision.fp32_modules=[head, 'hidden.*']"});
  auto again = parse_spec(spec.to_yaml(), "config.yaml", {});
  for (const auto& key : mpt::config::schema()) CHECK(again.value_text(key.key) == spec.value_text(key.key));
  CHECK(again.origin("optimizer.lr") != "default");  // written out, not left to defaults
}

TEST_CASE("every default in the schema passes its own validation", "[fast][config]") {
  auto spec = parse_spec("", "empty.yaml", {});
  for (const auto& key : mpt::config::schema()) CHECK(spec.origin(key.key) == "default");
}

TEST_CASE("a missing spec file is a usage error naming the file", "[fast][config]") {
  try {
    mpt::config::load_spec("/nonexistent/exp.yaml", {});
    FAIL("expected an error");
  } catch (const mpt::UsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("/nonexistent/exp.yaml: cannot open"));
  }
}

TEST_CASE("an override's error escapes control characters and echoes a huge value once, cut short", "[fast][config]") {
  const std::string title = error_of("", {"optimizer.lr=\x1b]0;owned\x07\x1b[2J"});
  CHECK(title.find('\x1b') == std::string::npos);
  CHECK(title.find('\x07') == std::string::npos);
  CHECK_THAT(title, Catch::Contains("override 'optimizer.lr=\\x1b]0;owned\\x07\\x1b[2J'"));
  const std::string huge = error_of("", {"optimizer.lr=" + std::string(127000, '7') + "x"});
  CHECK(huge.size() < 400);
  CHECK_THAT(huge, Catch::Contains("(127001 bytes)"));
  const std::string unknown_key = error_of("", {std::string(100000, 'k') + "=1"});
  CHECK(unknown_key.size() < 600);
}

TEST_CASE("a bare +, ++ or ~ is refused, not ignored", "[fast][config]") {
  for (const char* bare : {"+", "++", "~", "="}) {
    INFO(bare);
    CHECK_THAT(error_of("", {bare}), Catch::Contains("expected key=value"));
  }
}

TEST_CASE("YAML nested deeper than any spec says so, with the file and line", "[fast][config]") {
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "[";
  CHECK_THAT(error_of("experiment:\n  name: " + deep + std::string(40, ']') + "\n"),
             Catch::Contains("exp.yaml:2: nested more than 32 levels deep"));
  std::string very_deep(100000, '[');  // past yaml-cpp's own recursion guard
  CHECK_THAT(error_of("a: " + very_deep), Catch::Contains("nested more than 32 levels deep"));
}

TEST_CASE("loss scales beyond FP32's range are refused up front, as GradScaler refuses them", "[fast][config]") {
  for (const char* key : {"precision.loss_scale.init", "precision.loss_scale.max_scale",
                          "precision.loss_scale.min_scale", "precision.loss_scale.growth_factor"}) {
    INFO(key);
    const std::string message = error_of("", {std::string(key) + "=1e40"});
    CHECK_THAT(message, Catch::Contains(key));
    CHECK_THAT(message, Catch::Contains("<= 3.40282e+38 (FP32's largest finite value)"));
  }
  CHECK(parse_spec("", "exp.yaml", {"precision.loss_scale.max_scale=3.4e38"})
            .get_float("precision.loss_scale.max_scale") == 3.4e38);
}

TEST_CASE("aliases are counted as the nodes they name: a billion laughs is refused at once, naming the line",
          "[fast][config]") {
  const std::string bomb = mpt::testing::alias_bomb("a");  // 10^10 values from 800 bytes
  const auto start = std::chrono::steady_clock::now();
  CHECK_THAT(error_of(bomb + "optimizer:\n  lr: *a9\n"),
             Catch::Contains("exp.yaml:5: its aliases expand it to more than 100000 values"));
  CHECK_THAT(error_of("", {"optimizer.lr=" + bomb.substr(0, bomb.find("a6:")) + "x: *a5"}),
             Catch::Contains("its aliases expand it"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));  // a bound, not a benchmark
  // Aliases that nest past the depth bound only through what they name, and an alias inside its own anchor.
  std::string deep = "d0: &d0 [1]\n";
  for (int level = 1; level < 40; ++level)
    deep += "d" + std::to_string(level) + ": &d" + std::to_string(level) + " [*d" + std::to_string(level - 1) + "]\n";
  CHECK_THAT(error_of(deep), Catch::Contains("nested more than 32 levels deep (counting what its aliases name)"));
  CHECK_THAT(error_of("a: &loop [1, *loop]\n"), Catch::Contains("exp.yaml:1: an alias names a node that contains it"));
  // A spec that uses aliases as YAML meant them still loads.
  const auto spec = parse_spec("model:\n  hidden_sizes: &sizes [64, 32]\noptimizer:\n  lr: &lr 0.01\n", "ok.yaml", {});
  CHECK(spec.get_int_list("model.hidden_sizes") == std::vector<int64_t>{64, 32});
}

TEST_CASE("credentials in a URI never reach config.yaml or the spec table, and a long value is cut in the table",
          "[fast][config]") {
  const auto spec =
      parse_spec("tracking:\n  mlflow:\n    uri: http://alice:S3cret@h:5000\n", "exp.yaml",
                 {"experiment.name=" + std::string(10000, 'n'), "tracking.mlflow.tags=[\"url=https://t:k@x\"]"});
  const std::string yaml = spec.to_yaml(), table = spec.to_table();
  for (const std::string& text : {yaml, table}) {
    CHECK(text.find("S3cret") == std::string::npos);
    CHECK(text.find("t:k@") == std::string::npos);
  }
  CHECK_THAT(yaml, Catch::Contains("uri: http://***@h:5000"));
  CHECK(table.size() < 40000);  // the 10 kB name once, cut: not padded into every row (0.5 MB before)
  CHECK_THAT(table, Catch::Contains("(10000 bytes)"));
  // A masked URI read back (a config.yaml re-run) is refused where tracking starts, not sent as "***".
  CHECK(parse_spec(yaml, "config.yaml", {}).get_string("tracking.mlflow.uri") == "http://***@h:5000");
}
