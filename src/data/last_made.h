// One pass of work shared by the calls that ask for the same thing: a corpus is tokenized and packed once for its
// train and test splits, the second call taking what the first made.
#pragma once

#include <memory>
#include <mutex>
#include <string>

namespace mpt::data {

// make() when `key` differs from the last call's (for this T), else what that call made.
template <typename T, typename Make>
std::shared_ptr<const T> last_made(const std::string& key, Make&& make) {
  static std::mutex mutex;
  static std::string last_key;
  static std::shared_ptr<const T> last;
  std::lock_guard<std::mutex> lock(mutex);
  if (!last || last_key != key) {
    last = std::make_shared<const T>(make());
    last_key = key;
  }
  return last;
}

}  // namespace mpt::data
