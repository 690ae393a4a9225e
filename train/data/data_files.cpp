// Data sources read from files (see data.h): Fashion-MNIST idx files (gzip'd, read with zlib) and
// CIFAR-10 binary batches. Everything is read and validated in the constructor; get() only
// normalises bytes through a lookup table, so it is cheap and thread-safe.
#include <zlib.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "train/config/files.h"
#include "train/data/data.h"

namespace mnemo {

namespace fs = std::filesystem;

Split parse_split(const std::string& name) {
  if (name == "train") return Split::train;
  if (name == "test") return Split::test;
  MNEMO_FAIL() << "unknown data split '" << name << "' (expected train or test)";
}

const char* split_name(Split s) { return s == Split::train ? "train" : "test"; }

namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// A gzip file read with zlib; plain (uncompressed) files are read as they are. Every failure
// throws naming the file and what was being read.
class GzFile {
 public:
  explicit GzFile(std::string path) : path_(std::move(path)) {
    f_ = gzopen(path_.c_str(), "rb");
    MNEMO_CHECK(f_) << "cannot open '" << path_ << "' for reading";
  }
  ~GzFile() { gzclose(f_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads exactly n bytes of `what`.
  void read(void* dst, size_t n, const std::string& what) {
    size_t got = 0;
    auto* p = static_cast<unsigned char*>(dst);
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
      const int r = gzread(f_, p + got, chunk);
      if (r < 0) fail_corrupt(what);
      MNEMO_CHECK(r > 0) << "'" << path_ << "' is truncated" << (stream_error() ? " (the gzip stream ends early)" : "")
                         << ": expected " << n << " bytes of " << what << ", found only " << got;
      got += static_cast<size_t>(r);
    }
  }
  uint32_t read_be32(const std::string& what) {
    unsigned char b[4];
    read(b, 4, what);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
  }
  // Checks that nothing follows `claim` (what the header says the file holds), and for gzip that
  // the stream ends with a valid trailer.
  void expect_end(const std::string& claim) {
    unsigned char c;
    const int r = gzread(f_, &c, 1);
    if (r < 0) fail_corrupt("the end of the stream");
    MNEMO_CHECK(r == 0) << "'" << path_ << "': the header claims " << claim << " but the file holds more: corrupt";
    // A stream cut inside its trailer delivers all the data, then reports "unexpected end of file".
    if (stream_error()) fail_corrupt("the end of the stream");
  }

 private:
  // zlib reports a stream cut short as Z_BUF_ERROR with a 0-byte read, not as a failed read.
  bool stream_error() {
    int code = Z_OK;
    gzerror(f_, &code);
    return code != Z_OK;
  }
  [[noreturn]] void fail_corrupt(const std::string& what) {
    int code = 0;
    std::string msg = gzerror(f_, &code);
    if (msg.starts_with(path_ + ": ")) msg = msg.substr(path_.size() + 2);  // zlib prefixes the path
    MNEMO_FAIL() << "'" << path_ << "' is not a valid gzip file (reading " << what << "): " << msg;
  }

  std::string path_;
  gzFile f_;
};

// The bytes the stream of `path` holds once decompressed: the file size of a plain file; for a
// gzip file only a bound, from its size (deflate expands at most ~1032x), so a header claiming
// more than the file can hold is refused before anything is allocated. (The last trailer's ISIZE
// is not the length of a gzip file of several members, which zlib reads as one stream: a valid
// file was refused. A gzip file shorter than its header says fails while it is read.)
struct StreamSize {
  uint64_t file_bytes = 0;  // the file's size: what a plain file holds, what a gzip file compresses to
  bool gzip = false;
};
StreamSize stream_size(const std::string& path, const std::string& what) {
  const int64_t size = regular_file_size(path, what);
  std::ifstream in(path, std::ios::binary);
  unsigned char head[2] = {0, 0};
  in.read(reinterpret_cast<char*>(head), 2);
  return {static_cast<uint64_t>(size), size >= 18 && head[0] == 0x1f && head[1] == 0x8b};
}

// Throws unless a stream of `s` bytes holds exactly `expected` (the header's claim).
void expect_stream_size(const StreamSize& s, uint64_t expected, const std::string& path, const std::string& claim) {
  if (s.gzip) {
    const uint64_t most = 1032 * s.file_bytes + 1024;
    MNEMO_CHECK(expected <= most) << "'" << path << "': the header claims " << claim << " (" << expected << " bytes) but a gzip file of "
                                  << s.file_bytes << " bytes decompresses to at most " << most << ": truncated or corrupt";
    return;
  }
  MNEMO_CHECK(expected == s.file_bytes) << "'" << path << "': the header claims " << claim << " (" << expected
                                        << " bytes) but the file holds " << s.file_bytes << " bytes: truncated or corrupt";
}

// dir/name.gz, or the uncompressed dir/name when only that exists.
std::string find_idx_file(const std::string& dir, const std::string& name) {
  const fs::path gz = fs::path(dir) / (name + ".gz"), plain = fs::path(dir) / name;
  if (fs::exists(gz)) return gz.string();
  if (fs::exists(plain)) return plain.string();
  MNEMO_FAIL() << "Fashion-MNIST file '" << gz.string() << "' not found (nor uncompressed '" << plain.string()
               << "'); install the Debian package dataset-fashion-mnist or pass the directory holding the idx files";
}

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr uint32_t kMaxExamples = 10'000'000;     // a sanity bound against corrupt headers

void expect_magic(GzFile& f, const std::string& path, uint32_t want, const char* what) {
  const uint32_t magic = f.read_be32("the magic number");
  MNEMO_CHECK(magic == want) << "'" << path << "': wrong magic number " << hex32(magic) << ", expected " << hex32(want)
                             << " (" << what << ")";
}

}  // namespace

FashionMnist::FashionMnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::string image_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");

  const StreamSize image_bytes = stream_size(image_path, "Fashion-MNIST file");
  GzFile images(image_path);
  expect_magic(images, image_path, kIdxImagesMagic, "idx3 unsigned-byte images");
  const uint32_t n = images.read_be32("the image count");
  const uint32_t rows = images.read_be32("the row count"), cols = images.read_be32("the column count");
  MNEMO_CHECK(rows == kRows && cols == kCols) << "'" << image_path << "': images are " << rows << "x" << cols
                                              << ", expected " << kRows << "x" << kCols;
  MNEMO_CHECK(n > 0 && n <= kMaxExamples) << "'" << image_path << "': implausible image count " << n;
  expect_stream_size(image_bytes, 16 + uint64_t{n} * kRows * kCols, image_path, std::to_string(n) + " images");
  pixels_.resize(size_t{n} * kRows * kCols);
  images.read(pixels_.data(), pixels_.size(), std::to_string(n) + " images of 28x28 pixels");
  images.expect_end(std::to_string(n) + " images (" + std::to_string(16 + uint64_t{n} * kRows * kCols) + " bytes)");

  const StreamSize label_bytes = stream_size(label_path, "Fashion-MNIST file");
  GzFile labels(label_path);
  expect_magic(labels, label_path, kIdxLabelsMagic, "idx1 unsigned-byte labels");
  const uint32_t nl = labels.read_be32("the label count");
  MNEMO_CHECK(nl == n) << "'" << label_path << "' holds " << nl << " labels but '" << image_path << "' holds " << n
                       << " images";
  expect_stream_size(label_bytes, 8 + uint64_t{n}, label_path, std::to_string(n) + " labels");
  labels_.resize(n);
  labels.read(labels_.data(), labels_.size(), std::to_string(n) + " labels");
  labels.expect_end(std::to_string(n) + " labels (" + std::to_string(8 + uint64_t{n}) + " bytes)");
  for (size_t i = 0; i < labels_.size(); ++i)
    MNEMO_CHECK(labels_[i] < kClasses) << "'" << label_path << "': label " << int{labels_[i]} << " of example " << i
                                       << " is out of range [0," << kClasses << ")";

  for (int v = 0; v < 256; ++v) lut_[v] = static_cast<float>((v / 255.0 - 0.2860) / 0.3530);
}

void FashionMnist::get(int64_t index, float* data, int32_t* labels) const {
  MNEMO_CHECK(index >= 0 && index < size()) << "Fashion-MNIST: example " << index << " out of range [0," << size()
                                            << ")";
  const uint8_t* p = pixels_.data() + index * kRows * kCols;
  for (int64_t j = 0; j < kRows * kCols; ++j) data[j] = lut_[p[j]];
  labels[0] = labels_[index];
}

Cifar10::Cifar10(const std::string& dir, Split split) {
  std::vector<std::string> names;
  if (split == Split::train) {
    for (int b = 1; b <= 5; ++b) names.push_back("data_batch_" + std::to_string(b) + ".bin");
  } else {
    names.push_back("test_batch.bin");
  }
  for (const std::string& name : names) {
    const std::string path = (fs::path(dir) / name).string();
    MNEMO_CHECK(fs::exists(path)) << "CIFAR-10 file '" << path << "' not found (expected the binary "
                                  << "version: data_batch_1..5.bin and test_batch.bin)";
    const int64_t bytes = regular_file_size(path, "CIFAR-10 file");
    MNEMO_CHECK(bytes <= 10000 * kRecord) << "'" << path << "' is " << bytes << " bytes; a CIFAR-10 batch file holds 10000 "
                                          << kRecord << "-byte records (" << 10000 * kRecord << " bytes)";
    MNEMO_CHECK(bytes > 0 && bytes % kRecord == 0)
        << "'" << path << "' is " << bytes << " bytes, not a whole number of " << kRecord
        << "-byte records (1 label byte + 3072 pixel bytes): truncated or not a CIFAR-10 binary batch";
    const int64_t records = bytes / kRecord;
    std::vector<uint8_t> raw(static_cast<size_t>(bytes));
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(raw.data()), bytes);
    MNEMO_CHECK(in.gcount() == bytes) << "'" << path << "': read " << in.gcount() << " of " << bytes << " bytes";
    const size_t base = labels_.size();
    labels_.resize(base + records);
    pixels_.resize((base + records) * kPixels);
    for (int64_t r = 0; r < records; ++r) {
      const uint8_t* rec = raw.data() + r * kRecord;
      MNEMO_CHECK(rec[0] < kClasses) << "'" << path << "': label " << int{rec[0]} << " of record " << r
                                     << " is out of range [0," << kClasses << ")";
      labels_[base + r] = rec[0];
      std::copy(rec + 1, rec + kRecord, pixels_.begin() + static_cast<ptrdiff_t>((base + r) * kPixels));
    }
  }
  const double mean[kChannels] = {0.4914, 0.4822, 0.4465}, stdev[kChannels] = {0.2470, 0.2435, 0.2616};
  for (int c = 0; c < kChannels; ++c)
    for (int v = 0; v < 256; ++v) lut_[c][v] = static_cast<float>((v / 255.0 - mean[c]) / stdev[c]);
}

void Cifar10::get(int64_t index, float* data, int32_t* labels) const {
  MNEMO_CHECK(index >= 0 && index < size()) << "CIFAR-10: example " << index << " out of range [0," << size() << ")";
  const uint8_t* p = pixels_.data() + index * kPixels;
  const int64_t plane = kSide * kSide;
  for (int64_t c = 0; c < kChannels; ++c)
    for (int64_t j = 0; j < plane; ++j) data[c * plane + j] = lut_[c][p[c * plane + j]];
  labels[0] = labels_[index];
}

}  // namespace mnemo
