// The metrics file (see metrics.h).
#include "train/session/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "train/config/files.h"

namespace mnemo {
namespace {

// The complete records of `path` with "step" <= `step` (a torn or foreign line ends the kept part).
std::string records_up_to(const std::string& path, int64_t step) {
  std::ifstream in(path, std::ios::binary);
  MNEMO_CHECK(in) << "cannot read the metrics file '" << path << "' to cut it back to step " << step << ": "
                  << std::strerror(errno);
  std::string kept, line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: the record being written when the run was killed
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) break;
    if (j["step"].get<int64_t>() > step) break;
    kept += line + "\n";
  }
  MNEMO_CHECK(!in.bad()) << "reading the metrics file '" << path << "' failed: " << std::strerror(errno);
  return kept;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& requested, int64_t resume_step) {
  namespace fs = std::filesystem;
  // Through a symlink to its target (the cut-back's rename must replace the target, not the link).
  const std::string path = writable_target(requested, "metrics file '" + requested + "'");
  const fs::path p(path);
  std::error_code ec;
  path_ = path;
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  const fs::file_status st = fs::status(p, ec);
  if (resume_step > 0 && fs::exists(st)) {
    // Cut back atomically: the kept records go to a temporary file renamed over the old one.
    const std::string kept = records_up_to(path, resume_step), tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    MNEMO_CHECK(fd >= 0) << "cannot rewrite metrics file '" << path << "' (via '" << tmp << "'): " << std::strerror(errno);
    size_t done = 0;
    bool ok = true;
    while (ok && done < kept.size()) {
      const ssize_t n = ::write(fd, kept.data() + done, kept.size() - done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) done += static_cast<size_t>(n);
    }
    ok = ok && ::fsync(fd) == 0;  // durable before it replaces the old file
    const int err = errno;
    ::close(fd);
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
      const int e = ok ? errno : err;
      std::remove(tmp.c_str());
      MNEMO_FAIL() << "cannot rewrite metrics file '" << path << "': " << std::strerror(e);
    }
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (resume_step > 0 ? 0 : O_TRUNC), 0666);
  MNEMO_CHECK(fd_ >= 0) << "cannot write the metrics file '" << path << "': " << std::strerror(errno);
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  // A write cut short (the file-size limit, a full disk) left part of the line: the file is cut
  // back to where the line began, so no torn record stays in it.
  const off_t begin = ::lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      if (done > 0 && begin >= 0 && ::ftruncate(fd_, begin) != 0) {
        MNEMO_FAIL() << "writing the metrics file '" << path_ << "' failed: " << std::strerror(err)
                     << " (a full disk or the file-size limit?), and cutting off the part of its last line written failed: "
                     << std::strerror(errno);
      }
      MNEMO_FAIL() << "writing the metrics file '" << path_ << "' failed: " << std::strerror(err) << " (a full disk or the file-size limit?)";
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace mnemo
