// The pickle machine (see unpickler.h).
#include "io/unpickler.h"

#include <cstring>
#include <map>
#include <variant>

#include "common/error.h"
#include "io/torch_records.h"

namespace mpt::io {
namespace {

// A state dict nests a few levels; a file nesting deeper is refused before anything recurses over it (even
// freeing a chain of shared containers recurses once per level).
constexpr int64_t kMaxDepth = 100;
constexpr size_t kMaxStack = 1 << 20;

ValuePtr make(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

class Unpickler {
 public:
  // `scan_only`: check every storage the pickle declares against its record (prefix + key) and build nothing;
  // objects this reader does not model (LibTorch's modules) pass as opaque values.
  Unpickler(const std::string& pickle, caffe2::serialize::PyTorchStreamReader& zip, size_t archive_bytes,
            std::string source, std::string record_prefix = "data/", bool scan_only = false)
      : pickle_(pickle),
        zip_(zip),
        archive_bytes_(archive_bytes),
        source_(std::move(source)),
        prefix_(std::move(record_prefix)),
        scan_only_(scan_only) {}
  // A crafted pickle can put containers inside each other through the memo; emptying every memoized container
  // breaks such cycles, which shared ownership would otherwise leak.
  ~Unpickler() {
    for (auto& [index, value] : memo_) value->items.clear(), value->pairs.clear();
  }
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;

  ValuePtr run() {
    while (true) {
      if (pos_ >= pickle_.size()) fail("the pickle ends without STOP");
      const size_t at = pos_;
      const auto op = static_cast<uint8_t>(pickle_[pos_++]);
      try {
        if (op == '.') return pop();
        step(op);
      } catch (const Error& e) {
        if (std::string(e.what()).rfind(source_, 0) == 0) throw;
        throw Error(source_ + ": " + prefix_.substr(0, prefix_.size() - 1) + ".pkl byte " + std::to_string(at) + ": " +
                    e.what());
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw Error(why); }

  std::string take(size_t n) {
    if (pos_ + n > pickle_.size()) fail("truncated pickle");
    std::string out = pickle_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  template <typename T>
  T take_le() {
    T value;
    std::string bytes = take(sizeof(T));
    std::memcpy(&value, bytes.data(), sizeof(T));
    return value;
  }
  std::string take_line() {
    const size_t end = pickle_.find('\n', pos_);
    if (end == std::string::npos) fail("truncated GLOBAL");
    std::string out = pickle_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  ValuePtr& top(const char* opcode) {
    if (stack_.empty()) fail(std::string(opcode) + " on an empty stack");
    return stack_.back();
  }
  void push(ValuePtr v) {
    if (stack_.size() >= kMaxStack) fail("more than " + std::to_string(kMaxStack) + " values on the pickle stack");
    stack_.push_back(std::move(v));
  }
  // Puts `child` inside `parent`, refusing nesting past kMaxDepth and a container inside itself.
  void nest(Value& parent, const ValuePtr& child) {
    if (child.get() == &parent) fail("a container that contains itself");
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxDepth) fail("containers nested more than " + std::to_string(kMaxDepth) + " deep");
  }
  void append(const char* opcode, std::vector<ValuePtr> items) {
    ValuePtr& list = top(opcode);
    if (list->kind != Value::Kind::kList) fail(std::string(opcode) + " on something that is not a list");
    for (auto& item : items) {
      nest(*list, item);
      list->items.push_back(std::move(item));
    }
  }
  void set_items(const char* opcode, std::vector<ValuePtr> items) {
    if (items.size() % 2) fail(std::string(opcode) + " with an odd number of items");
    ValuePtr& dict = top(opcode);
    if (dict->kind != Value::Kind::kDict) fail(std::string(opcode) + " on something that is not a dict");
    for (size_t i = 0; i < items.size(); i += 2) {
      nest(*dict, items[i]);
      nest(*dict, items[i + 1]);
      dict->pairs.emplace_back(items[i], items[i + 1]);
    }
  }

  ValuePtr pop() {
    if (stack_.empty()) fail("pickle stack underflow");
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::vector<ValuePtr> pop_to_mark() {
    size_t mark = stack_.size();
    while (mark > 0 && stack_[mark - 1]->kind != Value::Kind::kMark) --mark;
    if (mark == 0) fail("no MARK on the pickle stack");
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark - 1);
    return items;
  }
  ValuePtr tuple(std::vector<ValuePtr> items) {
    ValuePtr t = make(Value::Kind::kTuple);
    for (const auto& item : items) nest(*t, item);
    t->items = std::move(items);
    return t;
  }
  ValuePtr integer(int64_t value) {
    ValuePtr v = make(Value::Kind::kInt);
    v->integer = value;
    return v;
  }
  ValuePtr string(std::string text) {
    ValuePtr v = make(Value::Kind::kString);
    v->text = std::move(text);
    return v;
  }
  void memo_put(size_t index) {
    if (stack_.empty()) fail("memo put on an empty stack");
    if (memo_.size() >= kMaxStack && !memo_.count(index))
      fail("more than " + std::to_string(kMaxStack) + " memo entries");
    memo_[index] = stack_.back();
  }
  void memo_get(size_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo " + std::to_string(index) + " is not set");
    push(it->second);
  }

  static std::vector<int64_t> ints(const ValuePtr& tuple_value) {
    std::vector<int64_t> out;
    for (const auto& item : tuple_value->items) out.push_back(item->integer);
    return out;
  }

  // persistent_load: ('storage', storage type, key, location, numel) -> the storage record as a 1-D tensor.
  ValuePtr load_storage(const ValuePtr& pid) {
    if (pid->kind != Value::Kind::kTuple || pid->items.size() < 5 || pid->items[0]->text != "storage")
      fail("a persistent id that is not a tensor storage");
    const std::string key = pid->items[2]->text;
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    const torch::ScalarType dtype = storage_dtype(pid->items[1]->text);
    const int64_t numel = pid->items[4]->integer;
    if (numel < 0 || static_cast<uint64_t>(numel) > (uint64_t{1} << 40))
      fail("a storage of " + std::to_string(numel) + " elements");
    const std::string record = prefix_ + key;
    if (!zip_.hasRecord(record)) fail("storage " + record + " is missing from the zip");
    const size_t size = record_size(zip_, record, archive_bytes_, source_);
    if (size != static_cast<size_t>(numel) * c10::elementSize(dtype))
      fail("storage " + record + " holds " + std::to_string(size) + " bytes, expected " + std::to_string(numel) +
           " x " + std::to_string(c10::elementSize(dtype)));
    ValuePtr storage = make(Value::Kind::kStorage);
    storage->integer = numel;
    if (!scan_only_) {
      auto [data, read] = zip_.getRecord(record);
      storage->tensor = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
      if (read > 0) std::memcpy(storage->tensor.data_ptr(), data.get(), std::min(read, size));
    }
    storages_[key] = storage;
    return storage;
  }

  // _rebuild_tensor(_v2)(storage, offset, sizes, strides, ...): a view of the storage, checked to stay inside it.
  ValuePtr rebuild_tensor(const std::string& name, const ValuePtr& args) {
    if (args->items.size() < 4 || args->items[0]->kind != Value::Kind::kStorage)
      fail(name + " with unexpected arguments");
    const int64_t offset = args->items[1]->integer;
    const std::vector<int64_t> sizes = ints(args->items[2]), strides = ints(args->items[3]);
    if (sizes.size() != strides.size() || sizes.size() > 64) fail(name + " with sizes and strides that do not match");
    if (const std::string why = tensor_view_problem(sizes, strides, offset, args->items[0]->integer); !why.empty())
      fail(why);
    ValuePtr tensor = make(Value::Kind::kTensor);
    if (!scan_only_) tensor->tensor = args->items[0]->tensor.as_strided(sizes, strides, offset).clone();
    return tensor;
  }

  ValuePtr reduce(const ValuePtr& callable, const ValuePtr& args) {
    if (callable->kind != Value::Kind::kGlobal) fail("REDUCE of something that is not a global");
    const std::string& name = callable->text;
    if (name == "collections.OrderedDict") return make(Value::Kind::kDict);
    if (name == "torch.jit._pickle.restore_type_tag") {  // LibTorch's pickler tags a dict with its static type
      if (args->items.empty()) fail(name + " without a value");
      return args->items[0];
    }
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor")
      return rebuild_tensor(name, args);
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || args->items[0]->kind != Value::Kind::kTensor) fail(name + " without a tensor");
      return args->items[0];
    }
    ValuePtr object = make(Value::Kind::kObject);  // inert: its class is named, never called
    object->text = name;
    return object;
  }

  void step(uint8_t op) {
    if (step_scalar(op) || step_container(op) || step_object(op) || step_memo(op)) return;
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", op);
    fail(std::string("pickle opcode ") + hex + " is not one a state dict uses");
  }

  // Framing and scalar opcodes; false when `op` is none of them.
  bool step_scalar(uint8_t op) {
    switch (op) {
      case 0x80: take(1); return true;  // PROTO
      case 0x95: take(8); return true;  // FRAME
      case '(': push(make(Value::Kind::kMark)); return true;
      case 'N': push(make(Value::Kind::kNone)); return true;
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        ValuePtr v = make(Value::Kind::kBool);
        v->integer = op == 0x88;
        push(v);
        return true;
      }
      case 'K': push(integer(take_le<uint8_t>())); return true;   // BININT1
      case 'M': push(integer(take_le<uint16_t>())); return true;  // BININT2
      case 'J': push(integer(take_le<int32_t>())); return true;   // BININT
      case 0x8a: push(integer(take_long1())); return true;        // LONG1
      case 'G': push(take_binfloat()); return true;               // BINFLOAT, big-endian
      case 'X':
      case 'T':
      case 'B': push(string(take(take_le<uint32_t>()))); return true;  // BINUNICODE, BINSTRING, BINBYTES
      case 0x8c:
      case 'U':
      case 'C': push(string(take(take_le<uint8_t>()))); return true;  // the SHORT_ forms
      default: return false;
    }
  }

  int64_t take_long1() {
    const uint8_t n = take_le<uint8_t>();
    if (n > 8) fail("an integer wider than 64 bits");
    const std::string bytes = take(n);
    int64_t value = 0;
    for (size_t i = 0; i < n; ++i) value |= static_cast<int64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(bytes[n - 1]) & 0x80)) value -= int64_t{1} << (8 * n);
    return value;
  }

  ValuePtr take_binfloat() {
    std::string bytes = take(8);
    std::reverse(bytes.begin(), bytes.end());
    ValuePtr v = make(Value::Kind::kFloat);
    std::memcpy(&v->real, bytes.data(), 8);
    return v;
  }

  // Tuples, lists and dicts; false when `op` is none of their opcodes.
  bool step_container(uint8_t op) {
    switch (op) {
      case ')': push(tuple({})); return true;
      case 0x85: push(tuple(pop_last(1))); return true;  // TUPLE1
      case 0x86: push(tuple(pop_last(2))); return true;  // TUPLE2
      case 0x87: push(tuple(pop_last(3))); return true;  // TUPLE3
      case 't': push(tuple(pop_to_mark())); return true;
      case ']': push(make(Value::Kind::kList)); return true;
      case 'l': {
        std::vector<ValuePtr> items = pop_to_mark();
        push(make(Value::Kind::kList));
        append("LIST", std::move(items));
        return true;
      }
      case '}': push(make(Value::Kind::kDict)); return true;
      case 'a': append("APPEND", pop_last(1)); return true;
      case 'e': append("APPENDS", pop_to_mark()); return true;
      case 's': set_items("SETITEM", pop_last(2)); return true;
      case 'u': set_items("SETITEMS", pop_to_mark()); return true;
      default: return false;
    }
  }

  // The top `n` values, in stack order (the deepest first).
  std::vector<ValuePtr> pop_last(size_t n) {
    std::vector<ValuePtr> items(n);
    for (size_t i = n; i > 0; --i) items[i - 1] = pop();
    return items;
  }

  // Globals, storages, calls and objects; false when `op` is none of their opcodes.
  bool step_object(uint8_t op) {
    switch (op) {
      case 'c': {  // GLOBAL
        const std::string module = take_line();
        ValuePtr v = make(Value::Kind::kGlobal);
        v->text = module + "." + take_line();
        push(v);
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        ValuePtr name = pop(), module = pop();
        ValuePtr v = make(Value::Kind::kGlobal);
        v->text = module->text + "." + name->text;
        push(v);
        return true;
      }
      case 'Q': push(load_storage(pop())); return true;  // BINPERSID
      case 'R': {
        ValuePtr args = pop(), callable = pop();
        push(reduce(callable, args));
        return true;
      }
      case 0x81: {  // NEWOBJ: an instance of a class (LibTorch's modules, argparse.Namespace), kept inert
        pop();
        ValuePtr object = make(Value::Kind::kObject);
        object->text = pop()->text;
        push(object);
        return true;
      }
      case 'b':
        pop();
        top("BUILD");
        return true;  // BUILD: the state of an OrderedDict (state_dict's _metadata) is not needed
      default: return false;
    }
  }

  bool step_memo(uint8_t op) {
    switch (op) {
      case 'q': memo_put(take_le<uint8_t>()); return true;
      case 'r': memo_put(take_le<uint32_t>()); return true;
      case 0x94: memo_put(memo_.size()); return true;  // MEMOIZE
      case 'h': memo_get(take_le<uint8_t>()); return true;
      case 'j': memo_get(take_le<uint32_t>()); return true;
      default: return false;
    }
  }

  const std::string& pickle_;
  size_t pos_ = 0;
  caffe2::serialize::PyTorchStreamReader& zip_;
  size_t archive_bytes_;
  std::string source_;
  std::string prefix_;  // where the storages' records are: "data/" (or "constants/")
  bool scan_only_;
  std::vector<ValuePtr> stack_;
  std::map<size_t, ValuePtr> memo_;
  std::map<std::string, ValuePtr> storages_;
};

}  // namespace

void unpickle(const std::string& pickle, caffe2::serialize::PyTorchStreamReader& zip, size_t archive_bytes,
              const std::string& source, const std::string& record_prefix, bool scan_only,
              const std::function<void(const ValuePtr&)>& use) {
  Unpickler machine(pickle, zip, archive_bytes, source, record_prefix, scan_only);
  use(machine.run());
}

}  // namespace mpt::io
