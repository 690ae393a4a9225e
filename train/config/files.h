// Opening files a user names (configs, data, checkpoints, weights) safely: only regular files (a
// FIFO, a device such as /dev/zero or /dev/urandom, a directory or a /proc entry is refused up
// front instead of blocking or reading for ever), and only up to a stated size.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mnemo {

// The size of the regular file at `path` (symlinks followed); throws naming `what` and the path
// when it is missing, unreadable or not a regular file.
int64_t regular_file_size(const std::string& path, const std::string& what);
// Its whole contents, refusing files larger than `max_bytes`.
std::string read_small_file(const std::string& path, const std::string& what, int64_t max_bytes);

// Where a file about to be (re)written at `path` goes: through symlinks to their target (only links
// owned by us or root are followed: another user's link in a shared directory must not redirect
// the write into our files); a target that exists must be a regular file (a device, FIFO or
// directory is refused, never replaced). Errors start with `what`.
std::string writable_target(const std::string& path, const std::string& what);

// Throws when `out` (a file about to be written, named by `out_what`, e.g. "--save-init") is the
// same file as one of `others` ((what, path) pairs: the config read, the weights read, the other
// outputs; empty paths skipped): writing it would destroy that file, or one output would overwrite
// another. Files that exist are compared as files (links, `./` and `..` see through); others by
// their absolute normal form.
void check_not_the_same_file(const std::string& out, const std::string& out_what,
                             const std::vector<std::pair<std::string, std::string>>& others);

// Writes `bytes` to `path` (its writable_target) atomically: a temporary file beside it, fsynced,
// then renamed over it; on failure the file that was there is unchanged and the error starts with
// `what`.
void write_file_atomically(const std::string& path, const std::string& bytes, const std::string& what);

}  // namespace mnemo
