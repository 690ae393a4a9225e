// The metrics file (JSON lines: one record per step, evaluation and so on). Crash-safe: each
// record is one line written with a single write(2) on an O_APPEND descriptor (no buffering: a
// kill loses at most the record being written, never tears two into one line); write errors
// (a full disk, the file-size limit) stop the run with a message, the part of the line written
// cut off again (a kill mid-write can still leave one torn last line: a resume drops it). On --resume the file is cut
// back to the records of the steps already done, so a resumed run does not duplicate them.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mnemo {

class MetricsLog {
 public:
  // `resume_step` 0: a fresh file; > 0: keeps the complete records whose "step" is at most it.
  MetricsLog(const std::string& path, int64_t resume_step);  // a symlink is written through
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace mnemo
