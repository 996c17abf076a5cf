// The IDX reader: the tiny fixtures in tests/fixtures/idx (plain and gzip), malformed files
// written here into a scratch folder, and the data set chosen by name.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "workloads/dataset.hpp"

namespace fs = std::filesystem;
using psbed::Error;
using namespace psbed::workloads;
using Catch::Contains;

namespace test_idx {

const std::string kFixtures = std::string(PSBED_FIXTURES_DIR) + "/idx";
const std::string kImages = kFixtures + "/tiny-images-idx3-ubyte";
const std::string kImagesGz = kFixtures + "/tiny-images-idx3-ubyte.gz";
const std::string kLabels = kFixtures + "/tiny-labels-idx1-ubyte";

std::vector<std::uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `plain` as one gzip member, as gzip(1) writes it.
std::vector<std::uint8_t> gzip(std::vector<std::uint8_t> plain) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                       Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<std::uint8_t> gz(deflateBound(&zs, uLong(plain.size())));
  zs.next_in = plain.data(), zs.avail_in = uInt(plain.size());
  zs.next_out = gz.data(), zs.avail_out = uInt(gz.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  gz.resize(zs.total_out);
  deflateEnd(&zs);
  return gz;
}

void spit(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

void put_be32(std::vector<std::uint8_t>& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(std::uint8_t(v >> s));
}

std::vector<std::uint8_t> idx(std::uint32_t magic, const std::vector<std::uint32_t>& dims,
                              std::size_t payload) {
  std::vector<std::uint8_t> b;
  put_be32(b, magic);
  for (auto d : dims) put_be32(b, d);
  for (std::size_t i = 0; i < payload; ++i) b.push_back(std::uint8_t(i * 7));
  return b;
}

// A scratch folder removed at the end of the test.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "psbed-test-idx-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace test_idx

using namespace test_idx;

TEST_CASE("load_idx reads the tiny fixture: shape, labels, pixels scaled by 1/255",
          "[workloads][idx]") {
  const Dataset d = load_idx(kImages, kLabels);
  const auto raw_images = slurp(kImages);
  const auto raw_labels = slurp(kLabels);
  const std::size_t n = raw_labels.size() - 8;

  REQUIRE(d.shape.c == 1);
  REQUIRE(d.shape.h == 4);
  REQUIRE(d.shape.w == 5);
  REQUIRE(d.size() == n);
  REQUIRE(n == 3);
  REQUIRE(d.images.size() == n * 20);
  REQUIRE(raw_images.size() == 16 + d.images.size());
  for (std::size_t i = 0; i < n; ++i) CHECK(d.labels[i] == raw_labels[8 + i]);
  for (std::size_t i = 0; i < d.images.size(); ++i) {
    CHECK(d.images[i] == Approx(raw_images[16 + i] / 255.0).margin(1e-7));
    CHECK(d.images[i] >= 0.0f);
    CHECK(d.images[i] <= 1.0f);
  }
  // The fixture's first pixel is 0 and its last 255: both ends of the range map exactly.
  CHECK(d.images.front() == 0.0f);
  CHECK(d.images.back() == 1.0f);
  // image(i) points at sample i.
  CHECK(d.image(2) == d.images.data() + 2 * 20);
}

TEST_CASE("load_idx reads gzip-compressed files the same as plain ones", "[workloads][idx]") {
  const Dataset plain = load_idx(kImages, kLabels);
  const Dataset gz = load_idx(kImagesGz, kLabels);
  CHECK(gz.shape.str() == plain.shape.str());
  CHECK(gz.labels == plain.labels);
  CHECK(gz.images == plain.images);
}

TEST_CASE("gzip is detected by its magic, not by the file name", "[workloads][idx]") {
  ScratchDir dir;
  const std::string disguised = dir.file("images-without-suffix");
  spit(disguised, slurp(kImagesGz));
  const auto bytes = read_file_maybe_gzip(disguised);
  CHECK(bytes == slurp(kImages));
  CHECK(load_idx(disguised, kLabels).images == load_idx(kImages, kLabels).images);

  // A ".gz" name on a plain file: read as is.
  const std::string plain_gz = dir.file("plain-images.gz");
  spit(plain_gz, slurp(kImages));
  CHECK(read_file_maybe_gzip(plain_gz) == slurp(kImages));
}

TEST_CASE("a truncated gzip file is an error naming the file", "[workloads][idx]") {
  ScratchDir dir;
  auto gz = slurp(kImagesGz);
  gz.resize(gz.size() / 2);
  const std::string path = dir.file("cut-images.gz");
  spit(path, gz);
  REQUIRE_THROWS_AS(read_file_maybe_gzip(path), Error);
  REQUIRE_THROWS_WITH(read_file_maybe_gzip(path), Contains(path) && Contains("truncated"));
}

TEST_CASE("load_idx: a truncated header is an error naming the file", "[workloads][idx]") {
  ScratchDir dir;
  const std::string path = dir.file("short-header-images");
  auto bytes = slurp(kImages);
  bytes.resize(10);  // magic and 1.5 of the 3 dimensions
  spit(path, bytes);
  REQUIRE_THROWS_AS(load_idx(path, kLabels), Error);
  REQUIRE_THROWS_WITH(load_idx(path, kLabels), Contains(path) && Contains("truncated"));

  const std::string tiny = dir.file("two-byte-images");
  spit(tiny, {0, 0});
  REQUIRE_THROWS_WITH(load_idx(tiny, kLabels), Contains(tiny) && Contains("truncated"));
}

TEST_CASE("load_idx: truncated pixel data is an error naming the file and both sizes",
          "[workloads][idx]") {
  ScratchDir dir;
  const std::string path = dir.file("short-images");
  auto bytes = slurp(kImages);
  bytes.pop_back();
  spit(path, bytes);
  REQUIRE_THROWS_AS(load_idx(path, kLabels), Error);
  REQUIRE_THROWS_WITH(load_idx(path, kLabels), Contains(path) && Contains("truncated") &&
                                                   Contains("3 x 4 x 5 = 60") && Contains("59"));

  // Truncated labels too.
  const std::string labels = dir.file("short-labels");
  auto lb = slurp(kLabels);
  lb.pop_back();
  spit(labels, lb);
  REQUIRE_THROWS_WITH(load_idx(kImages, labels), Contains(labels) && Contains("truncated"));
}

TEST_CASE("load_idx: trailing bytes after the data are an error", "[workloads][idx]") {
  ScratchDir dir;
  const std::string path = dir.file("long-images");
  auto bytes = slurp(kImages);
  bytes.push_back(42);
  spit(path, bytes);
  REQUIRE_THROWS_WITH(load_idx(path, kLabels), Contains(path) && Contains("trailing"));
}

TEST_CASE("a gzip IDX file that inflates past its header's size stops there", "[workloads][idx]") {
  // A labels header for 4 items, then 64 MiB of zeros: a few tens of KiB compressed.
  std::vector<std::uint8_t> plain = {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4};
  plain.resize(plain.size() + (std::size_t(64) << 20), 0);
  const std::vector<std::uint8_t> gz = gzip(plain);
  CHECK(gz.size() < (std::size_t(1) << 20));
  ScratchDir dir;
  const std::string path = dir.file("bomb-labels.gz");
  spit(path, gz);
  REQUIRE_THROWS_WITH(
      read_file_maybe_gzip(path),
      Contains(path) && Contains("decompresses to more than the 12 bytes its IDX header declares"));
}

TEST_CASE("a gzip IDX file whose header declares more than the memory there is stops there",
          "[workloads][idx]") {
  // 4,000,000,000 images of 28x28 (2.9 TiB) declared, 4 KiB given.
  std::vector<std::uint8_t> plain = {0, 0, 8, 3, 0xEE, 0x6B, 0x28, 0x00, 0, 0, 0, 28, 0, 0, 0, 28};
  plain.resize(plain.size() + 4096, 0);
  const std::vector<std::uint8_t> gz = gzip(plain);
  ScratchDir dir;
  const std::string path = dir.file("liar-images.gz");
  spit(path, gz);
  REQUIRE_THROWS_WITH(
      read_file_maybe_gzip(path),
      Contains(path) && Contains("its IDX header declares 2920.6 GiB, more than the"));
}

TEST_CASE("load_idx: a wrong magic number is an error naming the file and the expected magic",
          "[workloads][idx]") {
  // Images and labels swapped: each has the other's magic.
  REQUIRE_THROWS_AS(load_idx(kLabels, kImages), Error);
  REQUIRE_THROWS_WITH(load_idx(kLabels, kImages), Contains(kLabels) && Contains("wrong magic") &&
                                                      Contains("0x00000801") &&
                                                      Contains("expected 0x00000803"));
  REQUIRE_THROWS_WITH(load_idx(kImages, kImages), Contains(kImages) && Contains("wrong magic") &&
                                                      Contains("expected 0x00000801"));
  // Not an IDX file at all.
  ScratchDir dir;
  const std::string text = dir.file("text-images");
  spit(text, {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n', 0, 0, 0, 0});
  REQUIRE_THROWS_WITH(load_idx(text, kLabels), Contains(text) && Contains("wrong magic"));
}

TEST_CASE("load_idx: images and labels of different counts are an error naming both counts",
          "[workloads][idx]") {
  ScratchDir dir;
  const std::string labels = dir.file("four-labels");
  spit(labels, idx(0x801, {4}, 4));
  REQUIRE_THROWS_AS(load_idx(kImages, labels), Error);
  REQUIRE_THROWS_WITH(load_idx(kImages, labels),
                      Contains(labels) && Contains("4 labels") && Contains("3 images"));
}

TEST_CASE("load_idx: a missing file is an error naming it", "[workloads][idx]") {
  ScratchDir dir;
  const std::string nowhere = dir.file("no-such-images");
  REQUIRE_THROWS_AS(load_idx(nowhere, kLabels), Error);
  REQUIRE_THROWS_WITH(load_idx(nowhere, kLabels), Contains(nowhere) && Contains("missing"));
  const std::string no_labels = dir.file("no-such-labels");
  REQUIRE_THROWS_WITH(load_idx(kImages, no_labels), Contains(no_labels) && Contains("missing"));
}

TEST_CASE("parse_idx_u8 decodes dimensions and data from memory", "[workloads][idx]") {
  const IdxArray a = parse_idx_u8(idx(0x803, {2, 3, 4}, 24), "mem");
  REQUIRE(a.dims == std::vector<std::uint32_t>{2, 3, 4});
  REQUIRE(a.data.size() == 24);
  for (std::size_t i = 0; i < 24; ++i) CHECK(a.data[i] == std::uint8_t(i * 7));

  const IdxArray one = parse_idx_u8(idx(0x801, {5}, 5), "mem");
  CHECK(one.dims == std::vector<std::uint32_t>{5});
  CHECK(one.data.size() == 5);

  const IdxArray empty = parse_idx_u8(idx(0x801, {0}, 0), "mem");
  CHECK(empty.data.empty());
}

TEST_CASE("parse_idx_u8 rejects malformed buffers with the name in the message",
          "[workloads][idx]") {
  REQUIRE_THROWS_WITH(parse_idx_u8({}, "buf-empty"),
                      Contains("buf-empty") && Contains("truncated"));
  REQUIRE_THROWS_WITH(parse_idx_u8({0, 0, 8}, "buf-3"), Contains("buf-3") && Contains("truncated"));
  // Type code 0x0D (float) is not u8.
  REQUIRE_THROWS_WITH(parse_idx_u8(idx(0x00000D01, {1}, 4), "buf-float"),
                      Contains("buf-float") && Contains("wrong magic") && Contains("0x00000D01"));
  // Zero dimensions.
  REQUIRE_THROWS_WITH(parse_idx_u8(idx(0x800, {}, 0), "buf-0d"),
                      Contains("buf-0d") && Contains("wrong magic"));
  // Header promises 3 dims, has 2.
  REQUIRE_THROWS_WITH(parse_idx_u8(idx(0x803, {2, 3}, 0), "buf-hdr"),
                      Contains("buf-hdr") && Contains("truncated header"));
  // Data shorter than the dimensions say.
  REQUIRE_THROWS_WITH(parse_idx_u8(idx(0x802, {3, 3}, 8), "buf-data"),
                      Contains("buf-data") && Contains("truncated") && Contains("3 x 3 = 9"));
  // Dimensions whose product overflows 64 bits are truncated data, not a huge allocation.
  REQUIRE_THROWS_WITH(
      parse_idx_u8(idx(0x803, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, 16), "buf-huge"),
      Contains("buf-huge") && Contains("truncated"));
}

TEST_CASE("load_dataset mnist reads the four IDX files from the data folder", "[workloads][idx]") {
  ScratchDir dir;
  spit(dir.file("train-images-idx3-ubyte"), slurp(kImages));
  spit(dir.file("train-labels-idx1-ubyte"), slurp(kLabels));
  spit(dir.file("t10k-images-idx3-ubyte.gz"), slurp(kImagesGz));  // the .gz form is found too
  spit(dir.file("t10k-labels-idx1-ubyte"), slurp(kLabels));

  const psbed::Shape input{1, 4, 5};
  const Split s = load_dataset("mnist", dir.path.string(), input, 10, 1);
  CHECK(s.train.size() == 3);
  CHECK(s.test.size() == 3);
  CHECK(s.train.images == s.test.images);
  CHECK(s.description.find("mnist") != std::string::npos);
  CHECK(s.description.find(dir.path.string()) != std::string::npos);

  SECTION("a model with another input shape is an error naming both shapes") {
    REQUIRE_THROWS_AS(load_dataset("mnist", dir.path.string(), psbed::Shape{1, 28, 28}, 10, 1),
                      Error);
    REQUIRE_THROWS_WITH(load_dataset("mnist", dir.path.string(), psbed::Shape{1, 28, 28}, 10, 1),
                        Contains("1x4x5") && Contains("1x28x28"));
  }
  SECTION("a missing file names it and says how to get the data") {
    fs::remove(dir.path / "t10k-labels-idx1-ubyte");
    REQUIRE_THROWS_WITH(
        load_dataset("mnist", dir.path.string(), input, 10, 1),
        Contains("missing file") && Contains("t10k-labels-idx1-ubyte") && Contains("make data"));
  }
  SECTION("a folder or a dangling link in a file's place is named as such, not as missing") {
    fs::remove(dir.path / "t10k-labels-idx1-ubyte");
    fs::create_directory(dir.path / "t10k-labels-idx1-ubyte");
    REQUIRE_THROWS_WITH(load_dataset("mnist", dir.path.string(), input, 10, 1),
                        Contains("t10k-labels-idx1-ubyte is a folder, expected an IDX file"));
    fs::remove(dir.path / "t10k-labels-idx1-ubyte");
    fs::create_symlink(dir.path / "nowhere", dir.path / "t10k-labels-idx1-ubyte");
    REQUIRE_THROWS_WITH(load_dataset("mnist", dir.path.string(), input, 10, 1),
                        Contains("t10k-labels-idx1-ubyte is a link to nothing"));
  }
  SECTION("a file given as the data folder is named as such") {
    const std::string file = (dir.path / "train-labels-idx1-ubyte").string();
    REQUIRE_THROWS_WITH(load_dataset("mnist", file, input, 10, 1),
                        Contains("data folder " + file + " is a file, expected a folder"));
  }
}

TEST_CASE("load_dataset: synthetic takes the model's input shape, unknown names are errors",
          "[workloads][idx]") {
  const psbed::Shape input{2, 6, 7};
  const Split s = load_dataset("synthetic", "", input, 10, 5);
  CHECK(s.train.shape.str() == input.str());
  CHECK(s.test.shape.str() == input.str());
  CHECK(s.train.size() > 0);
  CHECK(s.test.size() > 0);
  CHECK(s.train.images.size() == s.train.size() * std::size_t(input.numel()));

  REQUIRE_THROWS_AS(load_dataset("cifar", "", input, 10, 1), Error);
  REQUIRE_THROWS_WITH(load_dataset("cifar", "", input, 10, 1),
                      Contains("unknown data set 'cifar'") && Contains("mnist or synthetic"));
}

TEST_CASE("load_dataset mnist refuses labels past the model's classes, naming the labels file",
          "[workloads][idx]") {
  // The tiny fixture's labels are 7, 0 and 9.
  ScratchDir dir;
  spit(dir.file("train-images-idx3-ubyte"), slurp(kImages));
  spit(dir.file("train-labels-idx1-ubyte"), slurp(kLabels));
  spit(dir.file("t10k-images-idx3-ubyte"), slurp(kImages));
  spit(dir.file("t10k-labels-idx1-ubyte"), slurp(kLabels));
  const psbed::Shape input{1, 4, 5};

  SECTION("the training labels") {
    REQUIRE_THROWS_WITH(load_dataset("mnist", dir.path.string(), input, 3, 1),
                        Contains(dir.file("train-labels-idx1-ubyte")) &&
                            Contains("labels up to 9") && Contains("the model has 3 classes"));
  }
  SECTION("the test labels") {
    std::vector<std::uint8_t> low = slurp(kLabels);
    for (std::size_t i = 8; i < low.size(); ++i) low[i] = std::uint8_t(i % 3);  // after the header
    spit(dir.file("train-labels-idx1-ubyte"), low);
    REQUIRE_THROWS_WITH(load_dataset("mnist", dir.path.string(), input, 9, 1),
                        Contains(dir.file("t10k-labels-idx1-ubyte")) &&
                            Contains("labels up to 9") && Contains("9 classes"));
  }
  SECTION("as many or more classes than labels is fine") {
    CHECK(load_dataset("mnist", dir.path.string(), input, 10, 1).train.size() == 3);
    CHECK(load_dataset("mnist", dir.path.string(), input, 12, 1).test.size() == 3);
  }
}

TEST_CASE("load_dataset: synthetic makes the model's number of classes", "[workloads][idx]") {
  const psbed::Shape input{1, 5, 5};
  for (int classes : {2, 3, 13}) {
    INFO(classes << " classes");
    const Split s = load_dataset("synthetic", "", input, classes, 4);
    for (const Dataset* d : {&s.train, &s.test}) {
      std::vector<int> seen(std::size_t(classes), 0);
      for (auto l : d->labels) {
        REQUIRE(l >= 0);
        REQUIRE(l < classes);
        seen[std::size_t(l)] = 1;
      }
      CHECK(std::count(seen.begin(), seen.end(), 1) == classes);
    }
    CHECK(s.description.find(std::to_string(classes) + " classes") != std::string::npos);
  }
  // The 10-class form (what callers without a class count get) is unchanged.
  const Split ten = load_dataset("synthetic", "", input, 10, 4);
  CHECK(*std::max_element(ten.train.labels.begin(), ten.train.labels.end()) == 9);
  REQUIRE_THROWS_WITH(load_dataset("synthetic", "", input, 1, 4), Contains("1 classes"));
}

TEST_CASE("default_data_dir: $PSBED_DATA_DIR, else data/mnist here, else the checkout's",
          "[workloads][idx]") {
  // Restores the environment and the working folder whatever the checks do.
  struct Restore {
    std::string env;
    bool had_env;
    fs::path cwd = fs::current_path();
    Restore() {
      const char* e = std::getenv("PSBED_DATA_DIR");
      had_env = e != nullptr;
      env = e ? e : "";
    }
    ~Restore() {
      fs::current_path(cwd);
      if (had_env)
        ::setenv("PSBED_DATA_DIR", env.c_str(), 1);
      else
        ::unsetenv("PSBED_DATA_DIR");
    }
  } restore;
  ScratchDir dir;
  ::setenv("PSBED_DATA_DIR", "/some/where", 1);
  CHECK(default_data_dir() == "/some/where");
  ::unsetenv("PSBED_DATA_DIR");
  fs::current_path(dir.path);
  const std::string checkout = std::string(PSBED_SOURCE_DIR) + "/data/mnist";
  // An empty folder: the checkout's digits if `make data` fetched them, else the plain name
  // (whose "missing file" error then says to run make data).
  CHECK(default_data_dir() == (fs::is_directory(checkout) ? checkout : std::string("data/mnist")));
  fs::create_directories(dir.path / "data" / "mnist");
  CHECK(default_data_dir() == "data/mnist");  // the working folder's own comes first
}
