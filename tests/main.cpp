// The Catch2 runner for mpt_tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
