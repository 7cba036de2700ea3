// Relative paths in a spec: the working directory's first, else found next to the spec or in a folder above it;
// a path found nowhere names every place looked.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "run/resolve.h"
#include "tests/support/helpers.h"

using namespace mpt;
namespace fs = std::filesystem;

TEST_CASE("a spec's relative paths resolve from the spec's folder upwards when the working directory lacks them",
          "[fast][config]") {
  if (!fs::is_directory("/usr/share/datasets/fashion-mnist")) MPT_SKIP("Fashion-MNIST is not installed");
  const std::string project = testing::scratch_dir("spec-paths") + "/project";
  fs::create_directories(project + "/configs");
  fs::create_directories(project + "/weights");
  std::ofstream(project + "/weights/start.safetensors") << "x";
  std::ofstream(project + "/configs/run.yaml") << "model:\n  name: mlp\n  init_from: weights/start.safetensors\n";
  REQUIRE_FALSE(fs::exists("weights/start.safetensors"));  // not in the working directory

  const config::Spec spec = run::load_resolved_spec(project + "/configs/run.yaml", {});
  CHECK(spec.get_string("model.init_from") == project + "/weights/start.safetensors");
  CHECK_THAT(spec.origin("model.init_from"), Catch::Contains("found under " + project));

  const std::string error = testing::error_of([&] {
    (void)run::load_resolved_spec(project + "/configs/run.yaml", {"model.init_from=nowhere/start.safetensors"});
  });
  CHECK_THAT(error, Catch::Contains("model.init_from = nowhere/start.safetensors") &&
                        Catch::Contains("looked in the working directory " + fs::current_path().string()) &&
                        Catch::Contains(project + "/configs, " + project + ", "));
}
