// The host settings mpt makes at start-up, and the thread pool its own loops run on.
#include <catch2/catch.hpp>

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>

#include <cstdlib>

#include "hardware/hardware.h"
#include "tests/support/helpers.h"

TEST_CASE("under tcmalloc, start-up sets the release rate to 0 unless TCMALLOC_RELEASE_RATE is set", "[fast]") {
  // The test binary links tcmalloc as mpt does (setup installs it); without it there is nothing to check.
  mpt::hardware::tune_host_allocator();
  if (mpt::hardware::allocator_description().rfind("tcmalloc", 0) != 0) {
    CHECK_THAT(mpt::hardware::allocator_description(), !Catch::Contains("release rate"));
    return;
  }
  using GetRate = double (*)(void*);
  using Instance = void* (*)();
  auto instance = reinterpret_cast<Instance>(dlsym(RTLD_DEFAULT, "_ZN15MallocExtension8instanceEv"));
  auto get_rate = reinterpret_cast<GetRate>(dlsym(RTLD_DEFAULT, "_ZN22TCMallocImplementation20GetMemoryReleaseRateEv"));
  REQUIRE(instance);  // the symbols the setting reaches through (gperftools' libtcmalloc_minimal.so.4)
  REQUIRE(get_rate);
  const char* from_environment = std::getenv("TCMALLOC_RELEASE_RATE");
  if (from_environment) {
    CHECK(get_rate(instance()) == Approx(std::atof(from_environment)));
    CHECK_THAT(mpt::hardware::allocator_description(), Catch::Contains("TCMALLOC_RELEASE_RATE="));
  } else {
    CHECK(get_rate(instance()) == 0.0);
    CHECK_THAT(mpt::hardware::allocator_description(), Catch::Contains("release rate 0"));
  }
}

TEST_CASE("mpt's own parallel loops run on every thread of LibTorch's pool", "[fast]") {
  // at::parallel_for is inline: compiled without OpenMP, mpt's fused optimizers, dropout and gradient check ran
  // on one thread whatever LibTorch's thread count (docs/performance.md, finding 26).
#ifndef _OPENMP
  WARN("built with MPT_OPENMP=OFF (the GPU check's build): mpt's loops run on one thread by design");
  return;
#endif
  mpt::testing::with_threads(2, [] { CHECK(mpt::hardware::own_loop_threads() == 2); });
}

TEST_CASE("available cores follow the CPU affinity mask", "[fast][common]") {
  cpu_set_t original;
  REQUIRE(sched_getaffinity(0, sizeof original, &original) == 0);
  const int all = mpt::hardware::available_cores();
  CHECK(all >= 1);
  CHECK(all <= CPU_COUNT(&original));
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &original)) {
      CPU_SET(cpu, &one);
      break;
    }
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const int pinned = mpt::hardware::available_cores();
  sched_setaffinity(0, sizeof original, &original);
  CHECK(pinned == 1);
}
