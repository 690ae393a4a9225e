// Exceptions with context. Library code never aborts: it throws mnemo::Error.
//   MNEMO_CHECK(cond) << ...   an error a user can cause (bad config, file, flag, shape): the message
//                              is a sentence naming the file, key, node or flag and what was expected;
//                              it carries no source location.
//   MNEMO_FAIL() << ...        the same, unconditionally.
//   MNEMO_ASSERT(cond) << ...  a broken invariant of mnemo itself (a bug): "internal error: check
//                              failed (cond) [file.cpp:line]: ..." so a report can be traced.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace mnemo {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An Error about one node of a graph, carrying its name, so that a caller who knows where the node
// was written (a graph config's file and line) can say so without parsing the message.
class NodeError : public Error {
 public:
  NodeError(std::string node, const std::string& what) : Error(what), node_(std::move(node)) {}
  const std::string& node() const { return node_; }

 private:
  std::string node_;
};

namespace detail {
// file null: a user error (the message alone); else an internal one (message + [file:line]).
[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace mnemo

// MNEMO_CHECK(cond) << "context " << value;  throws mnemo::Error with the message when cond fails.
#define MNEMO_CHECK(cond) \
  if (cond) {             \
  } else                  \
    ::mnemo::detail::ErrorStream(nullptr, 0, nullptr)
// MNEMO_FAIL() << "message";  always throws.
#define MNEMO_FAIL() ::mnemo::detail::ErrorStream(nullptr, 0, nullptr)
// MNEMO_ASSERT(cond) << "context";  an internal invariant (see above).
#define MNEMO_ASSERT(cond) \
  if (cond) {              \
  } else                   \
    ::mnemo::detail::ErrorStream(__FILE__, __LINE__, #cond)

namespace mnemo::detail {
// Collects a message and throws from its destructor (the check macro's temporary dies at the end
// of the full expression, after every << has run).
class ErrorStream {
 public:
  ErrorStream(const char* file, int line, const char* cond) : file_(file), line_(line) {
    if (cond) os_ << "internal error: check failed (" << cond << "): ";
  }
  template <class T>
  ErrorStream& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  [[noreturn]] ~ErrorStream() noexcept(false) { throw_error(file_, line_, os_.str()); }

 private:
  const char* file_;
  int line_;
  std::ostringstream os_;
};
}  // namespace mnemo::detail
