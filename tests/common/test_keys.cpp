// A plug-in's keys: each row takes its type and default from the member it binds, values reach the member, and
// the key table refuses a key two plug-ins declare differently.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "common/keys.h"
#include "config/schema.h"

namespace {

struct Options {
  int64_t width = 64;
  double rate = 0.5;
  bool wide = false;
  std::string kind;
  std::vector<int64_t> sizes{2, 3};
};

}  // namespace

TEST_CASE("a plug-in's key row takes its type and default from its member", "[fast][config]") {
  mpt::keys::OptionTable<Options> table;
  table.add("model.width", &Options::width, "Width.").between(1, 1024);
  table.add("model.rate", &Options::rate, "Rate.");
  table.add("model.wide", &Options::wide, "Wide.");
  table.add("model.kind", &Options::kind, "Kind.").one_of({"a", "b"});
  table.add("model.sizes", &Options::sizes, "Sizes.");
  const auto& keys = table.keys();
  REQUIRE(keys.size() == 5);
  CHECK(keys[0].type == mpt::keys::KeyType::kInt);
  CHECK(keys[0].default_yaml == "64");
  CHECK(keys[0].max == 1024);
  CHECK(keys[1].default_yaml == "0.5");
  CHECK(keys[2].default_yaml == "false");
  CHECK(keys[3].default_yaml == "\"\"");
  CHECK(keys[3].choices == std::vector<std::string>{"a", "b"});
  CHECK(keys[4].default_yaml == "[2, 3]");
  CHECK(keys[4].type == mpt::keys::KeyType::kIntList);

  mpt::keys::Options values;
  values.set("model.width", int64_t{8});
  values.set("model.kind", std::string("b"));
  const Options read = table.read(values);
  CHECK(read.width == 8);
  CHECK(read.kind == "b");
  CHECK(read.rate == 0.5);                       // not given: the member's default
  CHECK(mpt::keys::default_text(1.0) == "1.0");  // YAML reads it back as a number
}

TEST_CASE("the key table holds every model family's keys, and a late plug-in is refused", "[fast][config]") {
  REQUIRE(mpt::config::find_key("model.small_input") != nullptr);
  REQUIRE(mpt::config::find_key("model.patch_size") != nullptr);
  const auto& names = mpt::config::find_key("model.name")->choices;
  CHECK(std::find(names.begin(), names.end(), "vit-b16") != names.end());
  CHECK(std::find(names.begin(), names.end(), "resnet50") != names.end());
  mpt::keys::KeyGroup late;
  late.deciding_key = "model.name";
  late.names = {"late"};
  CHECK_THROWS_AS(mpt::config::add_plugin_keys(late), mpt::Error);  // the table has been read
}
