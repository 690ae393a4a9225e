// Out-of-line throw for MNEMO_CHECK / MNEMO_FAIL.
#include "core/error.h"

#include <cstring>

namespace mnemo::detail {

[[noreturn]] void throw_error(const char* file, int line, const std::string& msg) {
  if (!file) throw Error(msg);
  // Keep the project-relative path only: messages stay readable and stable across machines.
  const char* rel = file;
  for (const char* dir : {"/core/", "/ops/", "/autograd/", "/memory/", "/models/", "/train/", "/tools/"}) {
    if (const char* p = std::strstr(file, dir)) { rel = p + 1; break; }
  }
  throw Error(msg + " [" + rel + ":" + std::to_string(line) + "]");
}

}  // namespace mnemo::detail
