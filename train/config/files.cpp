// Safe opening of user-named files (see files.h).
#include "train/config/files.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace mnemo {

int64_t regular_file_size(const std::string& path, const std::string& what) {
  struct stat st {};
  MNEMO_CHECK(::stat(path.c_str(), &st) == 0) << "cannot open " << what << " '" << path << "': " << std::strerror(errno);
  MNEMO_CHECK(S_ISREG(st.st_mode)) << what << " '" << path << "' is not a regular file ("
                                   << (S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)            ? "a device"
                                       : S_ISSOCK(st.st_mode)                                  ? "a socket"
                                                                                               : "not a file")
                                   << ")";
  // /proc and /sys files report size 0 (or 4096) but produce other contents: refuse them.
  MNEMO_CHECK(path.rfind("/proc/", 0) != 0 && path.rfind("/sys/", 0) != 0)
      << what << " '" << path << "' is a kernel interface file, not a " << what;
  return static_cast<int64_t>(st.st_size);
}

std::string read_small_file(const std::string& path, const std::string& what, int64_t max_bytes) {
  const int64_t size = regular_file_size(path, what);
  MNEMO_CHECK(size <= max_bytes) << what << " '" << path << "' is " << size << " bytes; the limit is " << max_bytes
                                 << " bytes";
  std::ifstream in(path, std::ios::binary);
  MNEMO_CHECK(in) << "cannot open " << what << " '" << path << "': " << std::strerror(errno);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), size);
  MNEMO_CHECK(in.gcount() == size) << "reading " << what << " '" << path << "' failed after " << in.gcount() << " of " << size
                                   << " bytes";
  return text;
}

std::string writable_target(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target = path;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {  // the link's target, even dangling
    MNEMO_CHECK(hops < 40) << what << ": too many levels of symbolic links";
    struct stat lst {};
    MNEMO_CHECK(::lstat(target.c_str(), &lst) == 0 && (lst.st_uid == ::geteuid() || lst.st_uid == 0))
        << what << ": '" << target.string() << "' is a symlink owned by another user; refusing to follow it";
    const fs::path next = fs::read_symlink(target, ec);
    MNEMO_CHECK(!ec) << what << ": cannot read the symlink '" << target.string() << "': " << ec.message();
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const fs::file_status st = fs::status(target, ec);
  MNEMO_CHECK(!fs::exists(st) || fs::is_regular_file(st))
      << what << ": " << (target.string() == path ? "it" : "its target '" + target.string() + "'")
      << " exists and is not a regular file; refusing to replace it";
  return target.string();
}

void check_not_the_same_file(const std::string& out, const std::string& out_what,
                             const std::vector<std::pair<std::string, std::string>>& others) {
  namespace fs = std::filesystem;
  if (out.empty()) return;
  for (const auto& [what, path] : others) {
    if (path.empty()) continue;
    std::error_code ec;
    bool same = fs::exists(out, ec) && fs::exists(path, ec) && fs::equivalent(out, path, ec);
    if (!same && !ec) same = fs::weakly_canonical(fs::absolute(out), ec) == fs::weakly_canonical(fs::absolute(path), ec);
    MNEMO_CHECK(!same) << out_what << " '" << out << "' is the same file as " << what << " '" << path
                       << "': writing it would replace that file; give another path";
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes, const std::string& what) {
  const std::string target = writable_target(path, what);
  const std::string tmp = target + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  MNEMO_CHECK(fd >= 0) << what << ": cannot create '" << tmp << "': " << std::strerror(errno);
  size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::rename(tmp.c_str(), target.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    MNEMO_FAIL() << what << ": writing '" << target << "' failed: " << std::strerror(err) << " (the file there, if any, is unchanged)";
  }
}

}  // namespace mnemo
