// train/data: file sources on tiny files written here (values, normalisation, every corruption
// giving an error that names the file), the real Fashion-MNIST when installed, text and synthetic
// sources, and the batch loader (determinism, epoch permutations, seek, time-major layout, worker
// errors) and the evaluation pass.
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "test_util.h"
#include "train/session/session.h"
#include "train/data/data.h"

namespace mnemo::test {
namespace {

namespace fs = std::filesystem;

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}
void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}
void write_raw(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}
uint8_t pixel(int64_t image, int64_t j) { return static_cast<uint8_t>((image * 37 + j * 5) % 256); }

// idx images (header says `n` images, `pixels` images actually written) and labels.
std::vector<uint8_t> idx_images(uint32_t n, int64_t pixels, uint32_t magic = 0x803, uint32_t side = 28) {
  std::vector<uint8_t> v;
  for (uint32_t x : {magic, n, side, side}) put_be32(v, x);
  for (int64_t i = 0; i < pixels; ++i)
    for (int64_t j = 0; j < side * side; ++j) v.push_back(pixel(i, j));
  return v;
}
std::vector<uint8_t> idx_labels(const std::vector<uint8_t>& labels, uint32_t magic = 0x801) {
  std::vector<uint8_t> v;
  put_be32(v, magic);
  put_be32(v, static_cast<uint32_t>(labels.size()));
  v.insert(v.end(), labels.begin(), labels.end());
  return v;
}
void write_mnist(const TempDir& d, const std::vector<uint8_t>& images, const std::vector<uint8_t>& labels,
                 const std::string& prefix = "train") {
  write_gz(d.file(prefix + "-images-idx3-ubyte.gz"), images);
  write_gz(d.file(prefix + "-labels-idx1-ubyte.gz"), labels);
}

// Runs f, expects a mnemo::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << parts.front();
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Data, FashionMnistTinyFilesValuesAndRows) {
  TempDir d;
  write_mnist(d, idx_images(3, 3), idx_labels({3, 0, 9}));
  FashionMnist src(d.path.string(), Split::train);
  ASSERT_EQ(src.size(), 3);
  EXPECT_EQ(src.sample_shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(src.label_shape(), Shape{});
  EXPECT_EQ(src.classes(), 10);
  std::vector<float> x(784);
  int32_t y = -1;
  for (int64_t i = 0; i < 3; ++i) {
    src.get(i, x.data(), &y);
    EXPECT_EQ(y, (std::vector<int32_t>{3, 0, 9})[i]);
    for (int64_t j = 0; j < 784; ++j)
      ASSERT_NEAR(x[j], (pixel(i, j) / 255.0 - 0.2860) / 0.3530, 1e-6) << "image " << i << " pixel " << j;
  }
  EXPECT_THROW(src.get(3, x.data(), &y), Error);
  FashionMnistRows rows(d.path.string(), Split::train);
  EXPECT_EQ(rows.sample_shape(), (Shape{28, 28}));
  EXPECT_EQ(rows.label_shape(), Shape{});
  std::vector<float> r(784);
  rows.get(2, r.data(), &y);
  src.get(2, x.data(), &y);
  EXPECT_EQ(r, x);
  // The test split, stored uncompressed.
  write_raw(d.file("t10k-images-idx3-ubyte"), idx_images(2, 2));
  write_raw(d.file("t10k-labels-idx1-ubyte"), idx_labels({1, 2}));
  EXPECT_EQ(FashionMnist(d.path.string(), Split::test).size(), 2);
  EXPECT_EQ(parse_split("test"), Split::test);
  expect_error([] { parse_split("valid"); }, {"valid"});
}

TEST(Data, FashionMnistCorruptFilesNameTheFile) {
  const std::string images = "train-images-idx3-ubyte.gz", labels = "train-labels-idx1-ubyte.gz";
  auto check = [&](auto setup, const std::string& file, const std::string& what) {
    TempDir d;
    write_mnist(d, idx_images(3, 3), idx_labels({1, 2, 3}));
    setup(d);
    expect_error([&] { FashionMnist(d.path.string(), Split::train); }, {d.file(file), what});
  };
  check([&](TempDir& d) { write_gz(d.file(images), idx_images(3, 3, 0x804)); }, images, "wrong magic number 0x00000804");
  check([&](TempDir& d) { write_gz(d.file(labels), idx_labels({1, 2, 3}, 0x803)); }, labels, "wrong magic");
  // A cut file: its stream ends before the header's images.
  check([&](TempDir& d) { fs::resize_file(d.file(images), fs::file_size(d.file(images)) / 2); }, images, "truncated");
  check([&](TempDir& d) { fs::resize_file(d.file(images), fs::file_size(d.file(images)) - 3); }, images, "gzip");
  check([&](TempDir& d) {  // damaged compressed data
    std::fstream f(d.file(images), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(60);
    f.write("\xff\x00\xff\x00\xff\x00", 6);
  }, images, "gzip");
  check([&](TempDir& d) { write_gz(d.file(images), idx_images(3, 2)); }, images, "truncated");
  check([&](TempDir& d) { write_gz(d.file(images), idx_images(2, 3)); }, images, "the header claims 2 images (1584 bytes)");
  // A header claiming 10 million images in a small file is refused before 7.8 GB are allocated.
  check([&](TempDir& d) { write_gz(d.file(images), idx_images(10'000'000, 3)); }, images,
        "the header claims 10000000 images (7840000016 bytes) but a gzip file of");
  check([&](TempDir& d) { fs::resize_file(d.file(labels), fs::file_size(d.file(labels)) - 2); }, labels, "gzip");
  // A forged trailer whose length matches the header's claim mod 2^32 is refused too: no deflate
  // stream of this size expands to 7.8 GB (the trailer is not read for the size).
  check([&](TempDir& d) {
    write_gz(d.file(images), idx_images(10'000'000, 3));
    const uint32_t claim = static_cast<uint32_t>((16 + uint64_t{10'000'000} * 784) & 0xffffffffu);
    std::fstream f(d.file(images), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(d.file(images)) - 4));
    const char le[4] = {static_cast<char>(claim), static_cast<char>(claim >> 8), static_cast<char>(claim >> 16),
                        static_cast<char>(claim >> 24)};
    f.write(le, 4);
  }, images, images);  // refused (by the size check, or by zlib's length check on so small a file)
  check([&](TempDir& d) { write_gz(d.file(images), idx_images(3, 3, 0x803, 27)); }, images, "27x27");
  check([&](TempDir& d) { write_gz(d.file(labels), idx_labels({1, 2})); }, labels, "2 labels");
  check([&](TempDir& d) { write_gz(d.file(labels), idx_labels({1, 10, 2})); }, labels, "label 10 of example 1");
  check([&](TempDir& d) { fs::remove(d.file(labels)); }, labels, "not found");
  check([&](TempDir& d) { write_raw(d.file(labels), {0x1f, 0x8b, 8, 0, 1, 2}); }, labels, "train-labels");
}

// A gzip file of two members (gzip of two parts concatenated, as `cat a.gz b.gz` makes) is one
// stream to zlib: read whole (its last trailer's length, once taken as the file's, refused it).
TEST(Data, FashionMnistGzipOfSeveralMembersReads) {
  TempDir d;
  const std::vector<uint8_t> images = idx_images(3, 3), labels = idx_labels({1, 2, 3});
  const size_t cut = images.size() / 3;
  write_gz(d.file("part1.gz"), std::vector<uint8_t>(images.begin(), images.begin() + cut));
  write_gz(d.file("part2.gz"), std::vector<uint8_t>(images.begin() + cut, images.end()));
  {
    std::ofstream out(d.file("train-images-idx3-ubyte.gz"), std::ios::binary);
    for (const char* part : {"part1.gz", "part2.gz"}) out << std::ifstream(d.file(part), std::ios::binary).rdbuf();
  }
  write_gz(d.file("train-labels-idx1-ubyte.gz"), labels);
  FashionMnist src(d.path.string(), Split::train);
  ASSERT_EQ(src.size(), 3);
  std::vector<float> x(784);
  int32_t y = -1;
  src.get(2, x.data(), &y);
  EXPECT_EQ(y, 3);
  EXPECT_NEAR(x[100], (pixel(2, 100) / 255.0 - 0.2860) / 0.3530, 1e-6);
}

TEST(Data, FashionMnistRealFiles) {
  const std::string dir = FashionMnist::kDefaultDir;
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz")) GTEST_SKIP() << dir << " not installed";
  FashionMnist train(dir, Split::train), test(dir, Split::test);
  ASSERT_EQ(train.size(), 60000);
  ASSERT_EQ(test.size(), 10000);
  EXPECT_EQ(train.classes(), 10);
  std::vector<int64_t> count(10, 0);
  std::vector<float> x(784);
  double sum = 0, sum2 = 0;
  for (int64_t i = 0; i < train.size(); ++i) {
    int32_t y;
    train.get(i, x.data(), &y);
    ++count[y];
    for (float v : x) sum += v, sum2 += double{v} * v;
  }
  for (int64_t c : count) EXPECT_EQ(c, 6000);
  const double n = 60000.0 * 784, mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);                           // the constants are the train set's statistics
  EXPECT_NEAR(std::sqrt(sum2 / n - mean * mean), 1.0, 0.01);
}

TEST(Data, Cifar10TinyBatches) {
  TempDir d;
  auto records = [](int64_t n, int64_t first, uint8_t bad_label = 0) {
    std::vector<uint8_t> v;
    for (int64_t r = 0; r < n; ++r) {
      v.push_back(bad_label ? bad_label : static_cast<uint8_t>((first + r) % 10));
      for (int64_t j = 0; j < 3072; ++j) v.push_back(pixel(first + r, j));
    }
    return v;
  };
  for (int b = 1; b <= 5; ++b) write_raw(d.file("data_batch_" + std::to_string(b) + ".bin"), records(2, 2 * (b - 1)));
  write_raw(d.file("test_batch.bin"), records(3, 100));
  Cifar10 train(d.path.string(), Split::train), test(d.path.string(), Split::test);
  ASSERT_EQ(train.size(), 10);
  ASSERT_EQ(test.size(), 3);
  EXPECT_EQ(train.sample_shape(), (Shape{3, 32, 32}));
  const double mean[3] = {0.4914, 0.4822, 0.4465}, stdev[3] = {0.2470, 0.2435, 0.2616};
  std::vector<float> x(3072);
  int32_t y;
  for (int64_t i : {0, 7}) {
    train.get(i, x.data(), &y);
    EXPECT_EQ(y, i % 10);
    for (int64_t j = 0; j < 3072; ++j)
      ASSERT_NEAR(x[j], (pixel(i, j) / 255.0 - mean[j / 1024]) / stdev[j / 1024], 1e-5) << j;
  }
  test.get(2, x.data(), &y);
  EXPECT_EQ(y, 102 % 10);

  write_raw(d.file("test_batch.bin"), records(1, 0, 10));
  expect_error([&] { Cifar10(d.path.string(), Split::test); }, {d.file("test_batch.bin"), "label 10"});
  fs::resize_file(d.file("test_batch.bin"), 3073 + 100);
  expect_error([&] { Cifar10(d.path.string(), Split::test); }, {d.file("test_batch.bin"), "3073-byte records"});
  fs::remove(d.file("data_batch_3.bin"));
  expect_error([&] { Cifar10(d.path.string(), Split::train); }, {d.file("data_batch_3.bin"), "not found"});
}

TEST(Data, TextCharsWindowsAndErrors) {
  TempDir d;
  write_raw(d.file("t.txt"), {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n'});
  TextChars text(d.file("t.txt"), 4);
  EXPECT_EQ(text.vocab(), std::string("\n dehlorw"));
  ASSERT_EQ(text.size(), 2);  // 11 targets / 4 steps
  EXPECT_EQ(text.sample_shape(), (Shape{4, 9}));
  EXPECT_EQ(text.label_shape(), Shape{4});
  std::vector<float> x(36);
  std::vector<int32_t> y(4);
  text.get(1, x.data(), y.data());  // inputs "o wo", targets " wor"
  const std::string in = "o wo", out = " wor";
  for (int t = 0; t < 4; ++t) {
    for (int v = 0; v < 9; ++v) EXPECT_EQ(x[t * 9 + v], text.vocab()[v] == in[t] ? 1.0f : 0.0f);
    EXPECT_EQ(text.vocab()[y[t]], out[t]);
  }
  write_raw(d.file("empty.txt"), {});
  expect_error([&] { TextChars(d.file("empty.txt"), 4); }, {d.file("empty.txt"), "empty"});
  expect_error([&] { TextChars(d.file("t.txt"), 12); }, {d.file("t.txt"), "too short"});
  expect_error([&] { TextChars(d.file("none.txt"), 4); }, {d.file("none.txt")});
  // One distinct character: no next character to predict (the error named model.classes).
  write_raw(d.file("aaa.txt"), std::vector<uint8_t>(20, 'a'));
  expect_error([&] { TextChars(d.file("aaa.txt"), 4); }, {d.file("aaa.txt"), "one distinct character"});
}

// data.source text: the file's last tenth of sequences (at least one) is the test split, the rest
// the training one (both were the whole file: the test accuracy was the training text's); a file
// of one sequence has no test split, an error naming the file.
TEST(Data, TextSourceHoldsOutItsLastTenth) {
  TempDir d;
  std::vector<uint8_t> text;
  for (int i = 0; i < 401; ++i) text.push_back(static_cast<uint8_t>("abcdefg "[(i * 7 + i / 3) % 8]));
  write_raw(d.file("t.txt"), text);
  const Config c = parse_config("model: {type: lstm, layers: 1, hidden: 4, per_step: true}\n"
                                "data: {source: text, path: " + d.file("t.txt") + ", steps: 8, batch: 2}\ntrain: {steps: 1}\n",
                                "t.yaml");
  const TextChars all(d.file("t.txt"), 8);
  ASSERT_EQ(all.size(), 50);
  const auto train = make_source(c, Split::train), test = make_source(c, Split::test);
  EXPECT_EQ(train->size(), 45);
  EXPECT_EQ(test->size(), 5);
  std::vector<float> x(8 * all.classes()), x2(x.size());
  std::vector<int32_t> y(8), y2(8);
  for (int64_t i = 0; i < 5; ++i) {
    test->get(i, x.data(), y.data());
    all.get(45 + i, x2.data(), y2.data());
    EXPECT_EQ(x, x2) << i;
    EXPECT_EQ(y, y2) << i;
  }
  write_raw(d.file("one.txt"), std::vector<uint8_t>(text.begin(), text.begin() + 9));
  Config one = c;
  one.data.path = d.file("one.txt");
  EXPECT_EQ(make_source(one, Split::train)->size(), 1);
  expect_error([&] { make_source(one, Split::test); }, {d.file("one.txt"), "no test split"});
}

TEST(Data, SyntheticSourcesAreSeededAndLearnable) {
  SyntheticSource img({2, 3, 3}, 4, 50, 7);
  SyntheticImages gen({2, 3, 3}, 4, 7);
  Tensor xb(DType::f32, {1, 2, 3, 3}), yb(DType::i32, {1});
  gen.batch(5, xb, yb);
  std::vector<float> x(18);
  int32_t y;
  img.get(5, x.data(), &y);
  EXPECT_EQ(y, yb.as<int32_t>()[0]);
  EXPECT_EQ(0, std::memcmp(x.data(), xb.data(), 18 * sizeof(float)));

  const int64_t T = 10, D = 8, C = 4;
  SyntheticSequences seq(T, D, C, 200, 3, true), same(T, D, C, 200, 3, true), whole(T, D, C, 200, 3, false);
  EXPECT_EQ(seq.sample_shape(), (Shape{T, D}));
  EXPECT_EQ(seq.label_shape(), Shape{T});
  EXPECT_EQ(whole.label_shape(), Shape{});
  // Seeded: equal for equal seeds, whatever the label layout. Learnable: a nearest-centroid
  // classifier on the time-averaged input, fit on half the examples, is right on most of the rest.
  std::vector<float> a(T * D), b(T * D), c(T * D);
  std::vector<int32_t> ya(T), yb2(T);
  int32_t yc;
  std::vector<std::vector<double>> avg(seq.size(), std::vector<double>(D, 0.0));
  std::vector<std::vector<double>> centroid(C, std::vector<double>(D, 0.0));
  std::vector<int32_t> label(seq.size());
  std::vector<int64_t> count(C, 0);
  for (int64_t i = 0; i < seq.size(); ++i) {
    seq.get(i, a.data(), ya.data());
    same.get(i, b.data(), yb2.data());
    whole.get(i, c.data(), &yc);
    ASSERT_EQ(a, b);
    ASSERT_EQ(a, c);
    ASSERT_EQ(ya, yb2);
    for (int64_t t = 0; t < T; ++t) ASSERT_EQ(ya[t], yc);
    label[i] = yc;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < D; ++j) avg[i][j] += a[t * D + j] / T;
    if (i >= seq.size() / 2) continue;
    ++count[yc];
    for (int64_t j = 0; j < D; ++j) centroid[yc][j] += avg[i][j];
  }
  int64_t correct = 0;
  for (int64_t i = seq.size() / 2; i < seq.size(); ++i) {
    int64_t best = -1;
    double best_d = 1e300;
    for (int64_t k = 0; k < C; ++k) {
      double dist = 0;
      for (int64_t j = 0; j < D; ++j) dist += std::pow(avg[i][j] - centroid[k][j] / count[k], 2);
      if (dist < best_d) best_d = dist, best = k;
    }
    correct += best == label[i];
  }
  EXPECT_GT(correct, seq.size() / 2 * 8 / 10);
}

// Example i: data {T,D} with x[t,d] = 100 i + 10 t + d; labels {T} = i + t (per_step) or {} = i.
// get() throws for example throw_at.
class IndexSource : public DataSource {
 public:
  IndexSource(int64_t size, int64_t T, int64_t D, bool per_step, int64_t throw_at = -1)
      : size_(size), T_(T), D_(D), per_step_(per_step), throw_at_(throw_at) {}
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return {T_, D_}; }
  Shape label_shape() const override { return per_step_ ? Shape{T_} : Shape{}; }
  int64_t classes() const override { return 1000; }
  void get(int64_t i, float* x, int32_t* y) const override {
    MNEMO_CHECK(i != throw_at_) << "bad example " << i;
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t d = 0; d < D_; ++d) x[t * D_ + d] = static_cast<float>(100 * i + 10 * t + d);
    for (int64_t t = 0; t < (per_step_ ? T_ : 1); ++t) y[t] = static_cast<int32_t>(i + t);
  }

 private:
  int64_t size_, T_, D_;
  bool per_step_;
  int64_t throw_at_;
};

TEST(Data, BatchLoaderIsDeterministicAndEpochsArePermutations) {
  auto src = std::make_shared<IndexSource>(10, 1, 1, false);
  BatchLoader a(src, 3, true, 42), b(src, 3, true, 42), other(src, 3, true, 43), plain(src, 3, false, 42);
  EXPECT_EQ(a.batches_per_epoch(), 3);
  Tensor xa, ya, xb, yb;
  for (int64_t e = 0; e < 3; ++e) {
    EXPECT_EQ(a.epoch(), e);
    const std::vector<int64_t> order = a.epoch_order(e);
    EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 10u);
    for (int64_t k = 0; k < 3; ++k) {
      a.next(xa, ya);
      b.next(xb, yb);
      ASSERT_EQ(xa.type().str(), "float32[3,1,1]");
      ASSERT_EQ(ya.type().str(), "int32[3]");
      ASSERT_TRUE(bitwise_equal(xa, xb) && bitwise_equal(ya, yb));
      for (int64_t i = 0; i < 3; ++i) {
        EXPECT_EQ(ya.as<int32_t>()[i], order[k * 3 + i]);
        EXPECT_EQ(xa.as<float>()[i], 100.0f * order[k * 3 + i]);
      }
    }
  }
  EXPECT_EQ(a.position(), 9);
  EXPECT_NE(a.epoch_order(0), a.epoch_order(1));
  EXPECT_NE(a.epoch_order(0), other.epoch_order(0));
  std::vector<int64_t> identity(10);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(plain.epoch_order(5), identity);
  expect_error([&] { BatchLoader(src, 11, true, 1); }, {"fewer than one batch of 11"});
  expect_error([&] { BatchLoader(src, 0, true, 1); }, {"batch size"});
}

// Data parallelism: the ranks' loaders together yield exactly the global batches one loader of
// batch * ranks yields, rank r the r-th contiguous part of each (also time-major, across epochs
// and after a seek).
TEST(Data, ShardedLoadersSplitTheGlobalBatches) {
  for (bool tm : {false, true}) {
    auto src = std::make_shared<IndexSource>(40, tm ? 3 : 1, 2, false);  // label of example i: i
    const int ranks = 3;
    const int64_t b = 2, T = tm ? 3 : 1, D = 2;
    BatchLoader whole(src, b * ranks, true, 7, tm);
    std::vector<std::unique_ptr<BatchLoader>> part;
    for (int r = 0; r < ranks; ++r) part.push_back(std::make_unique<BatchLoader>(src, b, true, 7, tm, r, ranks));
    EXPECT_EQ(part[0]->batches_per_epoch(), whole.batches_per_epoch());
    for (auto& l : part) l->seek(1);
    whole.seek(1);
    for (int p = 1; p < 9; ++p) {  // 6 global batches per epoch: crosses an epoch boundary
      Tensor x, y;
      whole.next(x, y);
      for (int r = 0; r < ranks; ++r) {
        Tensor xr, yr;
        part[r]->next(xr, yr);
        for (int64_t i = 0; i < b; ++i) {
          EXPECT_EQ(yr.as<int32_t>()[i], y.as<int32_t>()[r * b + i]) << "batch " << p << " rank " << r << " time-major " << tm;
          for (int64_t t = 0; t < T; ++t)  // data [T,N,D] time-major, else [N,T,D]
            for (int64_t d = 0; d < D; ++d) {
              const int64_t mine = tm ? (t * b + i) * D + d : (i * T + t) * D + d;
              const int64_t theirs = tm ? (t * b * ranks + r * b + i) * D + d : ((r * b + i) * T + t) * D + d;
              ASSERT_EQ(xr.as<float>()[mine], x.as<float>()[theirs]);
            }
        }
      }
    }
  }
  auto src = std::make_shared<IndexSource>(10, 1, 1, false);
  expect_error([&] { BatchLoader(src, 4, true, 1, false, 0, 3); }, {"fewer than one batch of 12"});
  expect_error([&] { BatchLoader(src, 1, true, 1, false, 3, 3); }, {"rank 3 of 3"});
}

TEST(Data, BatchLoaderSeekReproducesAnUninterruptedRun) {
  auto src = std::make_shared<SyntheticSource>(Shape{2, 4, 4}, 5, 50, 11);
  std::vector<Tensor> ref_x, ref_y;
  {
    BatchLoader ref(src, 8, true, 99);
    for (int p = 0; p < 20; ++p) {
      Tensor x, y;
      ref.next(x, y);
      ref_x.push_back(std::move(x));
      ref_y.push_back(std::move(y));
    }
  }
  auto expect_from = [&](BatchLoader& l, int64_t from, int64_t n) {
    Tensor x, y;
    for (int64_t p = from; p < from + n; ++p) {
      EXPECT_EQ(l.position(), p);
      l.next(x, y);
      ASSERT_TRUE(bitwise_equal(x, ref_x[p]) && bitwise_equal(y, ref_y[p])) << "batch " << p;
    }
  };
  BatchLoader l(src, 8, true, 99);
  expect_from(l, 0, 2);
  l.seek(9);  // forward, across an epoch boundary (6 batches per epoch), with prefetched batches in flight
  expect_from(l, 9, 11);
  l.seek(3);  // backward
  expect_from(l, 3, 3);
  BatchLoader fresh(src, 8, true, 99);
  fresh.seek(13);
  EXPECT_EQ(fresh.epoch(), 2);
  expect_from(fresh, 13, 7);
}

TEST(Data, BatchLoaderTimeMajorLayout) {
  for (bool per_step : {true, false}) {
    auto src = std::make_shared<IndexSource>(7, 3, 2, per_step);
    BatchLoader tm(src, 3, false, 0, true), bm(src, 3, false, 0, false);
    Tensor x, y, xb, yb;
    tm.next(x, y);
    tm.next(x, y);  // batch 1: examples 3, 4, 5
    bm.next(xb, yb);
    bm.next(xb, yb);
    EXPECT_EQ(x.type().str(), "float32[3,3,2]");
    EXPECT_EQ(y.type().str(), per_step ? "int32[3,3]" : "int32[3]");
    EXPECT_EQ(yb.type().str(), per_step ? "int32[3,3]" : "int32[3]");
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t i = 0; i < 3; ++i) {
        const int64_t idx = 3 + i;
        for (int64_t d = 0; d < 2; ++d) {
          EXPECT_EQ(x.as<float>()[(t * 3 + i) * 2 + d], 100 * idx + 10 * t + d);   // [T,N,D]
          EXPECT_EQ(xb.as<float>()[(i * 3 + t) * 2 + d], 100 * idx + 10 * t + d);  // [N,T,D]
        }
        if (per_step) {
          EXPECT_EQ(y.as<int32_t>()[t * 3 + i], idx + t);
          EXPECT_EQ(yb.as<int32_t>()[i * 3 + t], idx + t);
        }
      }
    for (int64_t i = 0; i < 3 && !per_step; ++i) EXPECT_EQ(y.as<int32_t>()[i], 3 + i);
  }
  auto images = std::make_shared<SyntheticSource>(Shape{1, 4, 4}, 3, 10, 1);
  expect_error([&] { BatchLoader(images, 2, false, 0, true); }, {"time-major", "[1,4,4]"});
}

TEST(Data, BatchLoaderWorkerErrorSurfacesInNext) {
  auto src = std::make_shared<IndexSource>(10, 1, 1, false, 5);
  BatchLoader l(src, 2, false, 0);
  Tensor x, y;
  l.next(x, y);
  l.next(x, y);
  expect_error([&] { l.next(x, y); }, {"bad example 5"});
  expect_error([&] { l.next(x, y); }, {"bad example 5"});  // stays failed
  EXPECT_EQ(l.position(), 2);
  l.seek(0);
  l.next(x, y);
  EXPECT_EQ(y.as<int32_t>()[1], 1);
}

TEST(Data, EvalPassCoversTheSourceInOrder) {
  IndexSource src(10, 2, 1, true);
  std::vector<int64_t> counts;
  int64_t expect_next = 0;
  const int64_t batches = for_each_eval_batch(src, 4, true, [&](const Tensor& x, const Tensor& y, int64_t count) {
    EXPECT_EQ(x.type().str(), "float32[2,4,1]");
    EXPECT_EQ(y.type().str(), "int32[2,4]");
    counts.push_back(count);
    for (int64_t i = 0; i < 4; ++i) {
      const bool valid = i < count;
      EXPECT_EQ(y.as<int32_t>()[4 + i], valid ? expect_next + i + 1 : 0);  // step 1 label = index + 1
      EXPECT_EQ(x.as<float>()[4 + i], valid ? 100.0f * (expect_next + i) + 10 : 0.0f);
    }
    expect_next += count;
  });
  EXPECT_EQ(batches, 3);
  EXPECT_EQ(counts, (std::vector<int64_t>{4, 4, 2}));
  expect_error([&] { for_each_eval_batch(src, 4, false, [](const Tensor&, const Tensor&, int64_t) { MNEMO_FAIL() << "stop"; }); },
               {"stop"});
  IndexSource bad(10, 1, 1, false, 9);
  expect_error([&] { for_each_eval_batch(bad, 4, false, [](const Tensor&, const Tensor&, int64_t) {}); },
               {"bad example 9"});
}

}  // namespace
}  // namespace mnemo::test

namespace mnemo::test {
namespace {

// Every file a run needs is validated before the first step: a missing test split stops `train`
// at once, not after training.
TEST(Data, AMissingTestSplitStopsTrainingBeforeItStarts) {
  TempDir d;
  write_mnist(d, idx_images(8, 8), idx_labels({1, 2, 3, 4, 5, 6, 7, 8}));  // train split only
  const std::string cfg = d.file("c.yaml", "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                                           "data: {source: fashion-mnist, path: " + d.path.string() + ", batch: 4}\n"
                                           "train: {steps: 2, threads: 1}\n");
  TrainOptions o;
  o.config = cfg;
  ::testing::internal::CaptureStdout();
  const std::string e = error_of([&] { run_train(o); });
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(e.find("t10k-images-idx3-ubyte.gz' not found"), std::string::npos) << e;
  EXPECT_EQ(out.find("step 1"), std::string::npos) << "nothing trained: " << out;
  o.eval = false;  // without evaluation the test split is not needed
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_train(o), 0);
  ::testing::internal::GetCapturedStdout();
}

}  // namespace
}  // namespace mnemo::test
