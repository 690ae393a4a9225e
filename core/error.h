// Exceptions with context. Library code never aborts: it throws mnemo::Error, whose message says
// where (file:line, node, key) and what was expected versus what was found.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mnemo {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace mnemo

// MNEMO_CHECK(cond) << "context " << value;  throws mnemo::Error with the message when cond fails.
#define MNEMO_CHECK(cond) \
  if (cond) {             \
  } else                  \
    ::mnemo::detail::ErrorStream(__FILE__, __LINE__, #cond)
// MNEMO_FAIL() << "message";  always throws.
#define MNEMO_FAIL() ::mnemo::detail::ErrorStream(__FILE__, __LINE__, nullptr)

namespace mnemo::detail {
// Collects a message and throws from its destructor (the check macro's temporary dies at the end
// of the full expression, after every << has run).
class ErrorStream {
 public:
  ErrorStream(const char* file, int line, const char* cond) : file_(file), line_(line) {
    if (cond) os_ << "check failed (" << cond << "): ";
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
