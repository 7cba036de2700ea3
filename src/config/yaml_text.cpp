// See yaml_text.h. A "billion laughs" spec is a few hundred bytes whose aliases name aliases: counted per event,
// each alias adds the size already measured for its anchor, so the count costs the text's length, not the expansion.
#include "config/yaml_text.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "common/error.h"

namespace mpt::config {
namespace {

struct Extent {
  uint64_t nodes = 1;
  int depth = 0;  // collection levels below and including this node
};

class ExpansionCounter : public YAML::EventHandler {
 public:
  explicit ExpansionCounter(std::string source) : source_(std::move(source)) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { finished(mark, anchor, Extent{}); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    finished(mark, anchor, Extent{});
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto found = anchored_.find(anchor);
    if (found == anchored_.end()) refuse(mark, "an alias names a node that contains it (a cycle)");
    add(mark, found->second);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::Mark mark;
    YAML::anchor_t anchor;
    Extent extent;
  };

  [[noreturn]] void refuse(const YAML::Mark& mark, const std::string& why) const {
    throw UsageError(source_ + ":" + std::to_string(mark.line + 1) + ": " + why);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    open_.push_back({mark, anchor, Extent{1, 0}});
    if (static_cast<int>(open_.size()) > kMaxYamlDepth)
      refuse(mark, "nested more than " + std::to_string(kMaxYamlDepth) + " levels deep");
  }
  void close() {
    const Open done = open_.back();
    open_.pop_back();
    finished(done.mark, done.anchor, Extent{done.extent.nodes, done.extent.depth + 1});
  }
  void finished(const YAML::Mark& mark, YAML::anchor_t anchor, const Extent& extent) {
    if (anchor != YAML::NullAnchor) anchored_[anchor] = extent;
    add(mark, extent);
  }
  // Adds a finished node (or an alias's expansion) to the collection that holds it.
  void add(const YAML::Mark& mark, const Extent& extent) {
    if (static_cast<int>(open_.size()) + extent.depth > kMaxYamlDepth)
      refuse(mark, "nested more than " + std::to_string(kMaxYamlDepth) +
                       " levels deep (counting what its aliases "
                       "name)");
    if (open_.empty()) return;
    Extent& parent = open_.back().extent;
    parent.nodes += extent.nodes;
    parent.depth = std::max(parent.depth, extent.depth);
    if (parent.nodes > kMaxYamlNodes)
      refuse(mark, "its aliases expand it to more than " + std::to_string(kMaxYamlNodes) +
                       " values (a spec holds a few hundred); write the values out, or alias less");
  }

  std::string source_;
  std::vector<Open> open_;
  std::map<YAML::anchor_t, Extent> anchored_;
};

}  // namespace

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  try {
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    ExpansionCounter counter(source);
    parser.HandleNextDocument(counter);  // the first document: the one YAML::Load reads
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    throw UsageError(source + ":" + std::to_string(e.mark.line + 1) + ": nested more than " +
                     std::to_string(kMaxYamlDepth) + " levels deep");
  } catch (const YAML::ParserException& e) {
    throw UsageError(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": not valid YAML: " + e.msg);
  }
}

}  // namespace mpt::config
