// safetensors I/O (train/session/safetensors.h): round trips of every dtype incl. rank 0 and empty tensors,
// a clear mnemo::Error for every kind of corrupt file, atomic saves (a failed save leaves the old
// file and no temporary file), and reading a file written by the Python safetensors package
// (tests/fixtures/compat_python.safetensors, made by tools/make_fixtures.py).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "train/session/safetensors.h"

namespace mnemo::test {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("mnemo_safetensors_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  // Names in the directory (to find leftover temporary files).
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file with an explicit header text and data bytes; header_size overrides the size field.
void write_raw(const std::string& path, const std::string& header, const std::string& data,
               int64_t header_size = -1) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header_size >= 0 ? static_cast<uint64_t>(header_size) : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i)));
  out << header << data;
}

// read_safetensors(path) throws mnemo::Error whose message contains every one of `parts`.
void expect_read_error(const std::string& path, const std::vector<std::string>& parts) {
  try {
    read_safetensors(path);
    ADD_FAILURE() << "reading " << path << " did not throw; expected: " << parts[0];
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing in: " << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << "the file name is missing in: " << msg;
  }
}

Tensor make(DType dt, Shape shape, uint64_t seed) {
  Tensor t(dt, std::move(shape));
  if (dt == DType::i32) fill_ints(t, seed, 1000);
  else if (t.numel() > 0) fill_normal(t, seed);
  return t;
}

TEST_F(SafetensorsTest, RoundTripEveryDtypeRankZeroEmptyAndMetadata) {
  std::vector<std::pair<std::string, Tensor>> in;
  in.emplace_back("block1/conv/weight", make(DType::f32, {4, 3, 3, 3}, 1));
  in.emplace_back("scalar64", make(DType::f64, {}, 2));
  in.emplace_back("labels", make(DType::i32, {7}, 3));
  in.emplace_back("empty32", make(DType::f32, {0, 5}, 4));
  in.emplace_back("empty_i32", make(DType::i32, {2, 0}, 5));
  in.emplace_back("matrix64", make(DType::f64, {3, 5}, 6));
  in.emplace_back("scalar_i32", make(DType::i32, {}, 7));
  std::vector<std::pair<std::string, TensorView>> views;
  for (const auto& [name, t] : in) views.emplace_back(name, t.view());
  const std::map<std::string, std::string> meta = {{"step", "12"}, {"model", "resnet \"cifar\" \xc3\xa9"}, {"", ""}};
  const std::string path = file("a.safetensors");
  write_safetensors(path, views, meta);

  const TensorFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(f.tensors.count(name));
    const Tensor& got = f.tensors.at(name);
    EXPECT_EQ(got.type(), t.type());
    EXPECT_EQ(std::memcmp(got.data(), t.data(), t.bytes()), 0);
  }
  // The data section starts 8-byte aligned, and the names keep the order given.
  const std::string bytes = slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_LT(bytes.find("block1/conv/weight"), bytes.find("scalar64"));
  EXPECT_EQ(listing(), std::vector<std::string>{"a.safetensors"});
}

TEST_F(SafetensorsTest, RoundTripNoTensorsAndOverwrite) {
  const std::string path = file("empty.safetensors");
  write_safetensors(path, {}, {});
  TensorFile f = read_safetensors(path);
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
  EXPECT_EQ(slurp(path).find("__metadata__"), std::string::npos);  // omitted when empty

  Tensor t = make(DType::f32, {3}, 9);
  write_safetensors(path, {{"x", t.view()}}, {{"k", "v"}});  // replaces the old file
  f = read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_TRUE(bitwise_equal(f.tensors.at("x"), t));
  EXPECT_EQ(f.metadata.at("k"), "v");
}

TEST_F(SafetensorsTest, WriterRejectsBadNames) {
  Tensor t = make(DType::f32, {2}, 1);
  auto expect_write_error = [&](std::vector<std::pair<std::string, TensorView>> v, const std::string& part) {
    try {
      write_safetensors(file("bad.safetensors"), v, {});
      ADD_FAILURE() << "no error; expected " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
    EXPECT_TRUE(listing().empty());
  };
  expect_write_error({{"x", t.view()}, {"x", t.view()}}, "tensor 'x' is given twice");
  expect_write_error({{"", t.view()}}, "cannot save a tensor named ''");
  expect_write_error({{"__metadata__", t.view()}}, "cannot save a tensor named '__metadata__'");
  expect_write_error({{"nodata", TensorView{nullptr, {DType::f32, {2}}}}}, "tensor 'nodata' (float32[2]) has no data");
}

// One valid tensor "w" float32[2,2] at [0,16], the rest of the header given as JSON.
std::string header_with(const std::string& extra) {
  return R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})" + extra + "}";
}

TEST_F(SafetensorsTest, CorruptFilesGiveClearErrors) {
  const std::string p = file("bad.safetensors");
  const std::string data16(16, '\0');

  expect_read_error(file("missing.safetensors"), {"cannot open", "No such file"});
  { std::ofstream(p, std::ios::binary) << "abc"; }
  expect_read_error(p, {"file too short", "at least 8 bytes", "found 3"});
  write_raw(p, header_with(""), data16, 1000);
  expect_read_error(p, {"header size 1000 is larger than the rest of the file"});
  write_raw(p, R"({"w": {"dtype": "F32",)", data16);
  expect_read_error(p, {"not valid JSON"});
  write_raw(p, "[1, 2]", "");
  expect_read_error(p, {"must be a JSON object", "found array"});
  write_raw(p, R"({"w":{"dtype":"Q7","shape":[2,2],"data_offsets":[0,16]}})", data16);
  expect_read_error(p, {"tensor 'w'", "unknown dtype 'Q7'", "expected F32, F64 or I32"});
  write_raw(p, R"({"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_read_error(p, {"tensor 'w'", "dtype 'BF16' is not supported"});
  write_raw(p, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", std::string(12, '\0'));
  expect_read_error(p, {"tensor 'w'", "float32[2,2] needs 16 bytes", "data_offsets [0, 12] hold 12"});
  write_raw(p, R"({"w":{"dtype":"F64","shape":[3],"data_offsets":[0,16]}})", data16);
  expect_read_error(p, {"tensor 'w'", "float64[3] needs 24 bytes"});
  write_raw(p, header_with(R"(,"v":{"dtype":"F32","shape":[2],"data_offsets":[8,16]})"), data16);
  expect_read_error(p, {"tensor 'v'", "overlap tensor 'w' [0, 16]"});
  write_raw(p, header_with(R"(,"v":{"dtype":"I32","shape":[1],"data_offsets":[20,24]})"), std::string(24, '\0'));
  expect_read_error(p, {"tensor 'v'", "leave a hole", "begin at byte 16"});
  write_raw(p, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[4,20]}})", data16);
  expect_read_error(p, {"tensor 'w'", "[4, 20] extend beyond the data section (16 bytes)"});
  write_raw(p, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[16,0]}})", data16);
  expect_read_error(p, {"tensor 'w'", "end before they begin"});
  write_raw(p, header_with(""), data16 + "junk");
  expect_read_error(p, {"4 trailing bytes after the last tensor 'w'", "expected a data section of 16 bytes, found 20"});
  write_raw(p, "{}", "x");
  expect_read_error(p, {"1 trailing bytes"});
  write_raw(p, R"({"w":{"dtype":"F32","shape":[-2,2],"data_offsets":[0,16]}})", data16);
  expect_read_error(p, {"tensor 'w'", "shape dimensions must be non-negative integers, found -2"});
  write_raw(p, R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}})", data16);
  expect_read_error(p, {"tensor 'w'", "is too large"});
  write_raw(p, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0]}})", data16);
  expect_read_error(p, {"tensor 'w'", "data_offsets must be [begin, end]"});
  write_raw(p, R"({"w":{"dtype":"F32","shape":[2,2]}})", data16);
  expect_read_error(p, {"tensor 'w'", "missing field 'data_offsets'"});
  write_raw(p, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16],"stride":[2,1]}})", data16);
  expect_read_error(p, {"tensor 'w'", "unexpected field 'stride'"});
  write_raw(p, R"({"w":[1,2]})", data16);
  expect_read_error(p, {"tensor 'w'", "expected {\"dtype\""});
  write_raw(p, header_with(R"(,"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})"), data16);
  expect_read_error(p, {"the header names 'w' twice"});
  write_raw(p, header_with(R"(,"__metadata__":{"step":12})"), data16);
  expect_read_error(p, {"__metadata__ 'step' must be a string, found 12"});
  write_raw(p, header_with(R"(,"__metadata__":"x")"), data16);
  expect_read_error(p, {"__metadata__ must be an object of strings"});
  expect_read_error(dir_.string(), {"not a regular file"});
}

TEST_F(SafetensorsTest, ReadsHeaderPaddingAndZeroSizedTensorsAnywhere) {
  // Spaces after the JSON (the Python package pads to 8 bytes) and an empty tensor at the end.
  const std::string p = file("pad.safetensors");
  write_raw(p, header_with(R"(,"e":{"dtype":"F64","shape":[0],"data_offsets":[16,16]})") + "     ",
            std::string(16, '\0'));
  const TensorFile f = read_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors.at("e").type(), (TensorType{DType::f64, {0}}));
}

TEST_F(SafetensorsTest, FailedSaveIntoMissingDirectoryCreatesNothing) {
  Tensor t = make(DType::f32, {3}, 1);
  const std::string path = file("no/such/dir/x.safetensors");
  try {
    write_safetensors(path, {{"x", t.view()}}, {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create the temporary file"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_TRUE(listing().empty());
}

TEST_F(SafetensorsTest, ANonRegularTargetIsRefusedAndNothingIsLeft) {
  // A directory (or a device, a FIFO) where the file should go is refused, never replaced.
  const std::string path = file("target");
  fs::create_directory(path);
  Tensor t = make(DType::f32, {3}, 1);
  try {
    write_safetensors(path, {{"x", t.view()}}, {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a regular file; refusing to replace it"), std::string::npos) << e.what();
  }
  EXPECT_EQ(listing(), std::vector<std::string>{"target"});
  EXPECT_TRUE(fs::is_directory(path));
  EXPECT_NE(error_of([&] { write_safetensors("/dev/null", {{"x", t.view()}}, {}); }).find("refusing to replace it"),
            std::string::npos);
}

// A FIFO is refused at once (opening it for reading would wait for a writer for ever), and so is a
// header nested deeper than any safetensors header.
TEST_F(SafetensorsTest, FifosAndDeeplyNestedHeadersAreRefused) {
  const std::string fifo = file("f.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { read_safetensors(fifo); }).find("not a regular file"), std::string::npos);
  std::string header = "{\"t\": " + std::string(10000, '[') + std::string(10000, ']') + "}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  std::ofstream(file("deep.safetensors"), std::ios::binary) << bytes << header;
  EXPECT_NE(error_of([&] { read_safetensors(file("deep.safetensors")); }).find("nests deeper"), std::string::npos);
}

// Saving through a symlink replaces the link's target and keeps the link.
TEST_F(SafetensorsTest, SymlinksAreWrittenThrough) {
  fs::create_directory(file("real"));
  const std::string target = file("real/ckpt.safetensors"), link = file("link.safetensors");
  fs::create_symlink(target, link);
  Tensor t = make(DType::f32, {3}, 1);
  write_safetensors(link, {{"x", t.view()}}, {});
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_regular_file(target));
  EXPECT_TRUE(bitwise_equal(read_safetensors(link).tensors.at("x"), t));
}

// Every tensor carries a CRC-32; a flipped data byte is an error naming the tensor, not silent.
TEST_F(SafetensorsTest, ChecksumsCatchDamagedData) {
  const std::string path = file("c.safetensors");
  Tensor a = make(DType::f32, {16}, 1), b = make(DType::f64, {4}, 2);
  write_safetensors(path, {{"a", a.view()}, {"b", b.view()}}, {{"note", "kept"}});
  const TensorFile ok = read_safetensors(path);
  EXPECT_EQ(ok.checksummed, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(ok.metadata, (std::map<std::string, std::string>{{"note", "kept"}})) << "checksums are not user metadata";
  const auto size = fs::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size - 5));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(static_cast<std::streamoff>(size - 5));
    f.write(&c, 1);
  }
  EXPECT_NE(error_of([&] { read_safetensors(path); }).find("tensor 'b' does not match its checksum"), std::string::npos);
}

// Temporary files of saves killed before their rename are removed by the next save to the same
// file (their process is gone); a live process's temporary file is left alone.
TEST_F(SafetensorsTest, StaleTemporaryFilesOfDeadProcessesAreRemoved) {
  const std::string path = file("ckpt.safetensors");
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  std::ofstream(path + ".tmp." + std::to_string(dead)) << "partial";
  std::ofstream(path + ".tmp.1") << "pid 1 is alive";
  Tensor t = make(DType::f32, {3}, 1);
  write_safetensors(path, {{"x", t.view()}}, {});
  EXPECT_EQ(listing(), (std::vector<std::string>{"ckpt.safetensors", "ckpt.safetensors.tmp.1"}));
}

// RLIMIT_FSIZE makes the write itself fail (EFBIG) half-way through the temporary file: a real
// I/O error, with no test hook in the library.
TEST_F(SafetensorsTest, FailedWriteLeavesTheOldFileIntactAndNoTemporaryFile) {
  const std::string path = file("ckpt.safetensors");
  Tensor old_t = make(DType::f32, {4}, 1);
  write_safetensors(path, {{"w", old_t.view()}}, {{"step", "1"}});
  const std::string before = slurp(path);

  Tensor big = make(DType::f64, {64 * 1024}, 2);  // 512 KiB, over the limit below
  struct rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit small = saved;
  small.rlim_cur = 64 * 1024;
  if (small.rlim_max != RLIM_INFINITY && small.rlim_max < small.rlim_cur) GTEST_SKIP() << "file size limit too low";
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg;
  try {
    write_safetensors(path, {{"w", big.view()}}, {{"step", "2"}});
  } catch (const Error& e) {
    msg = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  EXPECT_NE(msg.find("File too large"), std::string::npos) << "expected an EFBIG write error, got: '" << msg << "'";
  EXPECT_EQ(slurp(path), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"ckpt.safetensors"});
  const TensorFile f = read_safetensors(path);
  EXPECT_TRUE(bitwise_equal(f.tensors.at("w"), old_t));
  EXPECT_EQ(f.metadata.at("step"), "1");
}

TEST(SafetensorsCompat, ReadsFileWrittenByThePythonPackage) {
  const TensorFile f = read_safetensors(std::string(MNEMO_FIXTURE_DIR) + "/compat_python.safetensors");
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"note", "written by the Python safetensors package"}}));
  ASSERT_EQ(f.tensors.size(), 5u);
  const Tensor& a = f.tensors.at("a_f32");
  ASSERT_EQ(a.type(), (TensorType{DType::f32, {2, 3}}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a.as<float>()[i], 0.5f * i - 1.0f);
  const Tensor& b = f.tensors.at("b_f64_scalar");
  ASSERT_EQ(b.type(), (TensorType{DType::f64, {}}));
  EXPECT_EQ(b.as<double>()[0], 3.25);
  const Tensor& c = f.tensors.at("c_i32");
  ASSERT_EQ(c.type(), (TensorType{DType::i32, {4}}));
  const int32_t want_c[] = {-2, -1, 7, 2147483647};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.as<int32_t>()[i], want_c[i]);
  EXPECT_EQ(f.tensors.at("d_empty").type(), (TensorType{DType::f32, {0, 3}}));
  const Tensor& e = f.tensors.at("e_f64");
  ASSERT_EQ(e.type(), (TensorType{DType::f64, {3}}));
  EXPECT_EQ(e.as<double>()[0], 1e-300);
  EXPECT_EQ(e.as<double>()[1], -2.5);
  EXPECT_EQ(e.as<double>()[2], 1e300);
}

}  // namespace
}  // namespace mnemo::test
