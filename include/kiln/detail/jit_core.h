// Internals of kiln::jit (kiln/jit.h): call signatures (pytree structures, leaf types and
// static values) and JitCore, the untyped cache of executables behind every Jitted. Not
// part of the public API; names and signatures may change.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "kiln/detail/pytree.h"
#include "kiln/jit_types.h"

namespace kiln::detail {

// A static argument's value, type-erased: its text (for recompilation reasons), its hash
// and an equality test against a value of the same type.
struct StaticValue {
  std::string type_name;
  std::string text;
  size_t hash = 0;
  std::shared_ptr<const void> value;
  bool (*equals)(const void* a, const void* b) = nullptr;
};

struct ArgSignature {
  bool is_static = false;
  std::string type_name;  // the C++ type, so different pytree types never share an entry
  std::string structure;  // pytree structure
  std::vector<AbstractValue> leaves;
  StaticValue static_value;
};

struct CallSignature {
  std::vector<ArgSignature> args;
};

template <typename T>
concept HashableStatic = requires(const T& value) {
  { std::hash<T>{}(value) } -> std::convertible_to<size_t>;
  { value == value } -> std::convertible_to<bool>;
};

template <typename T>
std::string static_text(const T& value) {
  if constexpr (requires(std::ostream & out) { out << value; }) {
    std::ostringstream out;
    out << value;
    return out.str();
  } else {
    std::ostringstream out;
    out << "<" << typeid(T).name() << " with hash " << std::hash<T>{}(value) << ">";
    return out.str();
  }
}

template <typename T>
ArgSignature signature_of_arg(const T& value) {
  ArgSignature arg;
  arg.type_name = typeid(T).name();
  if constexpr (kIsPytree<T>) {
    arg.structure = PytreeAdapter<T>::structure(value);
    for (const Array& leaf : flatten(value)) arg.leaves.push_back(leaf.aval());
  } else {
    static_assert(HashableStatic<T>,
                  "kiln::jit: an argument that is not an Array or pytree is static, so its value "
                  "is part of the cache key and must be hashable: give its type a std::hash "
                  "specialisation and operator==, or pass it as an Array");
    arg.is_static = true;
    arg.static_value.type_name = arg.type_name;
    arg.static_value.text = static_text(value);
    arg.static_value.hash = std::hash<T>{}(value);
    arg.static_value.value = std::make_shared<const T>(value);
    arg.static_value.equals = [](const void* a, const void* b) {
      return static_cast<bool>(*static_cast<const T*>(a) == *static_cast<const T*>(b));
    };
  }
  return arg;
}

// The untyped part of jit: the cache of executables, compilation, running, statistics.
class JitCore {
 public:
  explicit JitCore(JitOptions options);

  struct Entry {
    CallSignature signature;
    std::shared_ptr<const Executable> executable;
    std::shared_ptr<void> result_template;  // the traced result, for its pytree structure
  };

  // True when binds on this thread are being traced (jit then inlines the function).
  static bool tracing();

  // Checks static_argnums/donate_argnums against the call's arguments.
  void check_argnums(const CallSignature& signature, CallSite site) const;
  // Which flat leaves the call donates.
  std::vector<bool> donated_leaves(const CallSignature& signature) const;
  // The cached entry for `signature`, or null. Counts the call.
  std::shared_ptr<const Entry> find(const CallSignature& signature);
  // Traces `fn` on the signature's leaf types, compiles, caches and returns the entry;
  // records (and with KILN_LOG_RECOMPILES prints) why.
  std::shared_ptr<const Entry> compile(CallSignature signature, const FlatFunction& fn,
                                       std::shared_ptr<void> result_template, CallSite site);
  std::vector<Array> run(const Entry& entry, std::span<const Array> leaves, CallSite site);
  JitStats stats() const;
  const JitOptions& options() const { return options_; }

 private:
  JitOptions options_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const Entry>> entries_;  // in compilation order
  JitStats stats_;
};

}  // namespace kiln::detail
