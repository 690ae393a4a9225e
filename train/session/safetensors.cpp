// safetensors reading (validated) and atomic writing (see safetensors.h, docs/FORMATS.md).
#include "train/session/safetensors.h"

#include "train/config/files.h"

#include <fcntl.h>
#include <signal.h>
#include <zlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

namespace mnemo {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; mnemo assumes a little-endian host");

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
  }
  return "?";
}

// The other dtypes of the safetensors specification: known, but not tensors mnemo computes with.
bool known_unsupported_dtype(const std::string& s) {
  static const std::set<std::string> other = {"BOOL", "U8",  "I8",      "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4",
                                              "F6_E2M3", "F6_E3M2", "I16", "U16", "F16", "BF16", "U32",
                                              "I64",  "U64", "C64"};
  return other.count(s) > 0;
}

std::string errno_text() { return std::strerror(errno); }

// "safetensors file 'x.safetensors'" prefix of every message.
struct Where {
  const std::string& path;
};
std::ostream& operator<<(std::ostream& os, const Where& w) { return os << "safetensors file '" << w.path << "'"; }

// One tensor's header entry after validation.
struct Entry {
  std::string name;
  TensorType type;
  uint64_t begin = 0, end = 0;
};

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Parses the header, rejecting duplicate keys at any level (nlohmann would keep the last one).
nlohmann::json parse_header(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  bool too_deep = false;
  auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > 8) too_deep = true;  // a header nests 4 levels; deeper input is refused unread
    if (too_deep) return false;
    if (ev == E::object_start) keys.emplace_back();
    else if (ev == E::object_end && !keys.empty()) keys.pop_back();
    else if (ev == E::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, cb);
  } catch (const nlohmann::json::exception& e) {
    MNEMO_FAIL() << Where{path} << ": the header is not valid JSON (" << e.what() << ")";
  }
  MNEMO_CHECK(!too_deep) << Where{path} << ": the header nests deeper than a safetensors header does (8 levels)";
  MNEMO_CHECK(duplicate.empty()) << Where{path} << ": the header names '" << duplicate << "' twice";
  MNEMO_CHECK(j.is_object()) << Where{path} << ": the header must be a JSON object, found " << j.type_name();
  return j;
}

uint64_t unsigned_field(const nlohmann::json& v, const std::string& path, const std::string& name, const char* what) {
  MNEMO_CHECK(v.is_number_unsigned()) << Where{path} << ": tensor '" << name << "': " << what
                                      << " must be non-negative integers, found " << v.dump();
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& name, const nlohmann::json& info, const std::string& path) {
  MNEMO_CHECK(!name.empty()) << Where{path} << ": a tensor has an empty name";
  MNEMO_CHECK(info.is_object()) << Where{path} << ": tensor '" << name
                                << "': expected {\"dtype\", \"shape\", \"data_offsets\"}, found " << info.dump();
  for (const auto& [key, value] : info.items())
    MNEMO_CHECK(key == "dtype" || key == "shape" || key == "data_offsets")
        << Where{path} << ": tensor '" << name << "': unexpected field '" << key
        << "' (expected dtype, shape, data_offsets)";
  for (const char* key : {"dtype", "shape", "data_offsets"})
    MNEMO_CHECK(info.contains(key)) << Where{path} << ": tensor '" << name << "': missing field '" << key << "'";

  Entry e;
  e.name = name;
  const nlohmann::json& dt = info["dtype"];
  MNEMO_CHECK(dt.is_string()) << Where{path} << ": tensor '" << name << "': dtype must be a string, found " << dt.dump();
  const std::string s = dt.get<std::string>();
  if (s == "F32") e.type.dtype = DType::f32;
  else if (s == "F64") e.type.dtype = DType::f64;
  else if (s == "I32") e.type.dtype = DType::i32;
  else if (known_unsupported_dtype(s))
    MNEMO_FAIL() << Where{path} << ": tensor '" << name << "': dtype '" << s
                 << "' is not supported (mnemo reads F32, F64 and I32)";
  else
    MNEMO_FAIL() << Where{path} << ": tensor '" << name << "': unknown dtype '" << s << "' (expected F32, F64 or I32)";

  const nlohmann::json& shape = info["shape"];
  MNEMO_CHECK(shape.is_array()) << Where{path} << ": tensor '" << name << "': shape must be an array, found "
                                << shape.dump();
  uint64_t bytes = dtype_size(e.type.dtype);
  bool overflow = false;
  for (const nlohmann::json& d : shape) {
    const uint64_t n = unsigned_field(d, path, name, "shape dimensions");
    MNEMO_CHECK(n <= static_cast<uint64_t>(INT64_MAX)) << Where{path} << ": tensor '" << name << "': dimension " << n
                                                       << " is too large";
    e.type.shape.push_back(static_cast<int64_t>(n));
    overflow = overflow || __builtin_mul_overflow(bytes, n, &bytes);
  }
  if (std::find(e.type.shape.begin(), e.type.shape.end(), 0) != e.type.shape.end()) bytes = 0, overflow = false;
  MNEMO_CHECK(!overflow) << Where{path} << ": tensor '" << name << "': shape " << shape.dump() << " is too large";

  const nlohmann::json& off = info["data_offsets"];
  MNEMO_CHECK(off.is_array() && off.size() == 2)
      << Where{path} << ": tensor '" << name << "': data_offsets must be [begin, end], found " << off.dump();
  e.begin = unsigned_field(off[0], path, name, "data_offsets");
  e.end = unsigned_field(off[1], path, name, "data_offsets");
  MNEMO_CHECK(e.begin <= e.end) << Where{path} << ": tensor '" << name << "': data_offsets [" << e.begin << ", "
                                << e.end << "] end before they begin";
  MNEMO_CHECK(e.end - e.begin == bytes) << Where{path} << ": tensor '" << name << "': " << e.type.str() << " needs "
                                        << bytes << " bytes, but data_offsets [" << e.begin << ", " << e.end
                                        << "] hold " << e.end - e.begin;
  return e;
}

// The tensors must tile [0, data_bytes) exactly.
void check_layout(std::vector<Entry>& entries, uint64_t data_bytes, const std::string& path) {
  for (const Entry& e : entries)
    MNEMO_CHECK(e.end <= data_bytes) << Where{path} << ": tensor '" << e.name << "': data_offsets [" << e.begin << ", "
                                     << e.end << "] extend beyond the data section (" << data_bytes << " bytes)";
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t at = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    MNEMO_CHECK(e.begin >= at) << Where{path} << ": tensor '" << e.name << "': data_offsets [" << e.begin << ", "
                               << e.end << "] overlap tensor '" << prev->name << "' [" << prev->begin << ", "
                               << prev->end << "]";
    MNEMO_CHECK(e.begin == at) << Where{path} << ": tensor '" << e.name << "': data_offsets [" << e.begin << ", "
                               << e.end << "] leave a hole: expected it to begin at byte " << at;
    at = e.end;
    prev = &e;
  }
  MNEMO_CHECK(at == data_bytes) << Where{path} << ": " << data_bytes - at << " trailing bytes after the last tensor"
                                << (prev ? " '" + prev->name + "'" : std::string()) << ": expected a data section of "
                                << at << " bytes, found " << data_bytes;
}

constexpr const char* kChecksumPrefix = "crc32/";

std::string crc32_hex(const void* data, uint64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<uint64_t>(n, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08lx", static_cast<unsigned long>(crc));
  return buf;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

TensorFile read_safetensors(const std::string& path) {
  // Opened without blocking (a FIFO would wait for a writer for ever), checked to be a regular
  // file, then read normally.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  MNEMO_CHECK(fd >= 0) << Where{path} << ": cannot open: " << errno_text();
  struct stat st{};
  const bool stat_ok = fstat(fd, &st) == 0;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    const std::string why = stat_ok ? "not a regular file" : "cannot stat: " + errno_text();
    ::close(fd);
    MNEMO_FAIL() << Where{path} << ": " << why;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::unique_ptr<std::FILE, FileCloser> f(::fdopen(fd, "rb"));
  if (!f) ::close(fd);
  MNEMO_CHECK(f) << Where{path} << ": cannot open: " << errno_text();
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  MNEMO_CHECK(file_bytes >= 8) << Where{path} << ": file too short: expected at least 8 bytes (the header size), found "
                               << file_bytes;
  unsigned char size_bytes[8];
  MNEMO_CHECK(std::fread(size_bytes, 1, 8, f.get()) == 8) << Where{path} << ": read error: " << errno_text();
  const uint64_t header_bytes = read_u64_le(size_bytes);
  MNEMO_CHECK(header_bytes <= file_bytes - 8) << Where{path} << ": header size " << header_bytes
                                              << " is larger than the rest of the file (" << file_bytes - 8
                                              << " bytes)";
  std::string text(header_bytes, '\0');
  MNEMO_CHECK(std::fread(text.data(), 1, header_bytes, f.get()) == header_bytes)
      << Where{path} << ": read error in the header: " << errno_text();
  const nlohmann::json header = parse_header(text, path);

  TensorFile out;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      MNEMO_CHECK(info.is_object()) << Where{path} << ": __metadata__ must be an object of strings, found "
                                    << info.dump();
      for (const auto& [key, value] : info.items()) {
        MNEMO_CHECK(value.is_string()) << Where{path} << ": __metadata__ '" << key
                                       << "' must be a string, found " << value.dump();
        out.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    entries.push_back(parse_entry(name, info, path));
  }
  const uint64_t data_start = 8 + header_bytes;
  check_layout(entries, file_bytes - data_start, path);

  // Entries are in file order now: read them front to back. A tensor with a checksum (every file
  // mnemo writes has one per tensor) must match it.
  for (const Entry& e : entries) {
    Tensor t(e.type);
    const uint64_t n = e.end - e.begin;
    if (n > 0) {
      MNEMO_CHECK(fseeko(f.get(), static_cast<off_t>(data_start + e.begin), SEEK_SET) == 0)
          << Where{path} << ": tensor '" << e.name << "': seek failed: " << errno_text();
      MNEMO_CHECK(std::fread(t.data(), 1, n, f.get()) == n)
          << Where{path} << ": tensor '" << e.name << "': read error: " << errno_text();
    }
    if (auto it = out.metadata.find(kChecksumPrefix + e.name); it != out.metadata.end()) {
      const std::string got = crc32_hex(t.data(), n);
      MNEMO_CHECK(got == it->second) << Where{path} << ": tensor '" << e.name << "' does not match its checksum (crc32 "
                                     << got << ", recorded " << it->second << "): the file is damaged";
      out.checksummed.insert(e.name);
    }
    out.tensors.emplace(e.name, std::move(t));
  }
  for (auto it = out.metadata.begin(); it != out.metadata.end();) {  // checksums are not metadata for callers
    if (it->first.rfind(kChecksumPrefix, 0) == 0) {
      MNEMO_CHECK(out.tensors.count(it->first.substr(std::strlen(kChecksumPrefix))))
          << Where{path} << ": a checksum for a tensor the file does not hold ('" << it->first << "')";
      it = out.metadata.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

namespace {

// The temporary file of one save: closed and removed unless committed.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (f_) std::fclose(f_);
    if (!committed_) std::remove(path_.c_str());
  }
  std::FILE*& file() { return f_; }
  const std::string& path() const { return path_; }
  void committed() { committed_ = true; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

std::string header_text(const std::vector<std::pair<std::string, TensorView>>& tensors,
                        const std::map<std::string, std::string>& metadata, const std::string& path) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = std::move(m);
  }
  std::set<std::string> seen;
  uint64_t at = 0;
  for (const auto& [name, v] : tensors) {
    MNEMO_CHECK(!name.empty() && name != "__metadata__")
        << Where{path} << ": cannot save a tensor named '" << name << "'";
    MNEMO_CHECK(seen.insert(name).second) << Where{path} << ": tensor '" << name << "' is given twice";
    for (int64_t d : v.shape()) MNEMO_CHECK(d >= 0) << Where{path} << ": tensor '" << name << "' has shape " << v.type.str();
    MNEMO_CHECK(v.data || v.bytes() == 0) << Where{path} << ": tensor '" << name << "' (" << v.type.str()
                                          << ") has no data";
    const uint64_t end = at + v.bytes();
    h[name] = {{"dtype", st_dtype_name(v.dtype())}, {"shape", v.shape()}, {"data_offsets", {at, end}}};
    at = end;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned (as the Python package does)
  return text;
}

}  // namespace

// Removes `<name>.tmp.<pid>` files next to `path` left by processes that no longer exist (a save
// killed between creating and renaming its temporary file).
void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    if (!(::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH)) continue;
    // Its process is gone here; a writer elsewhere (another PID namespace, another host) holds its
    // lock: remove only what nobody holds.
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) fs::remove(it->path(), ec);
    ::close(fd);
  }
}

void write_safetensors(const std::string& requested, const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& user_metadata) {
  std::ostringstream what;
  what << Where{requested};
  const std::string path = writable_target(requested, what.str());
  std::map<std::string, std::string> metadata = user_metadata;
  for (const auto& [name, v] : tensors) metadata[kChecksumPrefix + name] = crc32_hex(v.data, v.bytes());
  const std::string header = header_text(tensors, metadata, path);
  remove_stale_temporaries(path);
  TempFile tmp(path + ".tmp." + std::to_string(getpid()));
  std::FILE*& f = tmp.file();
  // Created exclusively, never through a symlink, and locked while written: the stale-file sweep
  // of another process (another PID namespace or host) skips a file someone holds locked.
  std::remove(tmp.path().c_str());  // a leftover with this process's number is stale
  const int fd = ::open(tmp.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  MNEMO_CHECK(fd >= 0) << Where{path} << ": cannot create the temporary file '" << tmp.path() << "': " << errno_text();
  ::flock(fd, LOCK_EX | LOCK_NB);
  f = ::fdopen(fd, "wb");
  if (!f) ::close(fd);
  MNEMO_CHECK(f) << Where{path} << ": cannot create the temporary file '" << tmp.path() << "': " << errno_text();

  auto put = [&](const void* p, size_t n, const std::string& what) {
    MNEMO_CHECK(n == 0 || std::fwrite(p, 1, n, f) == n)
        << Where{path} << ": writing " << what << " to '" << tmp.path() << "' failed: " << errno_text();
  };
  unsigned char size_bytes[8];
  for (int i = 0; i < 8; ++i) size_bytes[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  put(size_bytes, 8, "the header size");
  put(header.data(), header.size(), "the header");
  for (const auto& [name, v] : tensors) put(v.data, v.bytes(), "tensor '" + name + "'");
  MNEMO_CHECK(std::fflush(f) == 0) << Where{path} << ": flushing '" << tmp.path() << "' failed: " << errno_text();
  MNEMO_CHECK(fsync(fileno(f)) == 0) << Where{path} << ": fsync of '" << tmp.path() << "' failed: " << errno_text();
  std::FILE* closing = f;
  f = nullptr;
  MNEMO_CHECK(std::fclose(closing) == 0) << Where{path} << ": closing '" << tmp.path() << "' failed: " << errno_text();
  MNEMO_CHECK(std::rename(tmp.path().c_str(), path.c_str()) == 0)
      << Where{path} << ": renaming '" << tmp.path() << "' over it failed: " << errno_text();
  tmp.committed();

  // Make the rename itself durable.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  MNEMO_CHECK(dfd >= 0) << Where{path} << ": saved, but opening directory '" << dir << "' to fsync it failed: " << errno_text();
  const int rc = fsync(dfd);
  const int err = errno;
  MNEMO_CHECK(close(dfd) == 0 && rc == 0) << Where{path} << ": saved, but fsync of directory '" << dir
                                         << "' failed: " << std::strerror(rc ? err : errno);
}

}  // namespace mnemo
