// The one table of every spec key: its type, default, allowed values and meaning, assembled from the keys of the
// stack (run/stack_keys.h: each row declared with the member that receives it) and those each plug-in declares
// (common/keys.h). Loading, validation, resume checks, `mpt keys` and docs/spec.md all read this table.
#pragma once

#include <string>
#include <vector>

#include "common/keys.h"

namespace mpt::config {

using keys::key_type_name;
using keys::KeySpec;
using keys::KeyType;

// The stack's keys, in order, before the table is first read (run/plugins.h does it for every command).
void set_stack_keys(std::vector<KeySpec> rows);

// The plug-ins' keys (model families, ...), added once before the table is first read (run/plugins.h does it for
// every command): the keys join their section, the plug-in's names the deciding key's choices. Throws mpt::Error
// when the table has been read already or a key is declared twice with different rows.
void add_plugin_keys(const keys::KeyGroup& group);
const std::vector<keys::KeyGroup>& plugin_key_groups();

const std::vector<KeySpec>& schema();
const KeySpec* find_key(const std::string& key);

// Whether `key` may change between a run and its resumption (an unknown key may not).
bool may_differ_on_resume(const std::string& key);

// "did you mean" for an unknown key: the closest known key, or "" when nothing is close.
std::string closest_key(const std::string& unknown);

// What a value must be, in words: "an integer >= 1", "one of fp32, mixed, ...".
std::string describe_allowed(const KeySpec& spec);

}  // namespace mpt::config
