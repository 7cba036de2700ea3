// The Catch2 runner for mpt_tests. The plug-ins' keys join the key table first, as in every mpt command.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "run/plugins.h"

int main(int argc, char* argv[]) {
  mpt::run::install_plugins();
  return Catch::Session().run(argc, argv);
}
