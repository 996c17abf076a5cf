// IDX files (the MNIST container format), plain or gzip-compressed, and the data set chosen by
// name on the command line. Every fault is a one-line psbed::Error naming the file.
//
// IDX layout: 2 zero bytes, a type code (0x08 = unsigned byte), the number of dimensions, then
// one big-endian u32 per dimension, then the data, row-major.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "workloads/dataset.hpp"

namespace psbed::workloads {
namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t kImagesMagic = 0x00000803;  // u8, 3 dimensions: count, rows, cols
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // u8, 1 dimension: count

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

std::uint32_t read_be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

bool is_gzip(const std::vector<std::uint8_t>& bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

// The bytes an IDX file of unsigned bytes holds in all, header included, once `head` has its
// whole header; 0 before that or for anything else.
std::uint64_t idx_u8_declared_size(const std::vector<std::uint8_t>& head) {
  if (head.size() < 4 || head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] == 0) return 0;
  const std::size_t nd = head[3];
  if (head.size() < 4 + 4 * nd) return 0;
  std::uint64_t total = 1;
  for (std::size_t i = 0; i < nd; ++i) {
    const std::uint64_t d = read_be32(head.data() + 4 + 4 * i);
    total = d != 0 && total > (std::uint64_t(1) << 50) / d ? (std::uint64_t(1) << 50) : total * d;
  }
  return 4 + 4 * nd + total;
}

// Decompresses a whole gzip buffer (one or more concatenated members, as gzip(1) allows). An IDX
// file stops once it holds more than its header declares: a small file could otherwise inflate to
// gigabytes before parse_idx_u8 found the excess.
std::vector<std::uint8_t> gunzip(const std::vector<std::uint8_t>& in, const std::string& path) {
  std::vector<std::uint8_t> out;
  z_stream zs{};
  // 16 + MAX_WBITS: gzip wrapper only (the caller has seen the gzip magic).
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    throw Error(path + ": cannot initialise zlib to decompress it");
  struct Guard {
    z_stream* z;
    ~Guard() { inflateEnd(z); }
  } guard{&zs};

  std::size_t consumed = 0;
  std::uint8_t chunk[1 << 16];
  while (true) {
    const std::size_t remaining = in.size() - consumed;
    zs.next_in = const_cast<Bytef*>(in.data() + consumed);
    zs.avail_in =
        static_cast<uInt>(std::min<std::size_t>(remaining, std::numeric_limits<uInt>::max()));
    const uInt fed = zs.avail_in;
    zs.next_out = chunk;
    zs.avail_out = sizeof chunk;
    int rc = inflate(&zs, Z_NO_FLUSH);
    consumed += fed - zs.avail_in;
    out.insert(out.end(), chunk, chunk + (sizeof chunk - zs.avail_out));
    if (const std::uint64_t declared = idx_u8_declared_size(out); declared > 0) {
      if (out.size() > declared)
        throw Error(path + ": decompresses to more than the " + std::to_string(declared) +
                    " bytes its IDX header declares, expected exactly that many");
      // A header may lie as well: no more than the memory there is.
      if (const std::uint64_t have = available_memory_bytes(); have > 0 && declared > have)
        throw Error(path + ": its IDX header declares " + format_memory(declared) +
                    ", more than the " + format_memory(have) + " of memory available");
    }
    if (rc == Z_STREAM_END) {
      // Another member may follow; anything else after the stream is an error.
      if (consumed == in.size()) break;
      if (in.size() - consumed >= 2 && in[consumed] == 0x1f && in[consumed + 1] == 0x8b) {
        inflateReset(&zs);
        continue;
      }
      // Zero padding after the last member is harmless (gzip(1) ignores it too).
      if (std::all_of(in.begin() + static_cast<std::ptrdiff_t>(consumed), in.end(),
                      [](std::uint8_t b) { return b == 0; }))
        break;
      throw Error(path + ": corrupt gzip data: " + std::to_string(in.size() - consumed) +
                  " stray bytes after the compressed stream, expected end of file");
    }
    if (rc == Z_OK) continue;
    // Z_BUF_ERROR with all input consumed: the stream needs bytes the file does not have.
    if (rc == Z_BUF_ERROR && consumed == in.size())
      throw Error(path + ": truncated gzip data: the compressed stream ends early (after " +
                  std::to_string(out.size()) +
                  " decompressed bytes), expected a complete gzip file");
    throw Error(path + ": corrupt gzip data (" +
                (zs.msg ? zs.msg : "zlib error " + std::to_string(rc)) +
                "), expected a valid gzip file");
  }
  return out;
}

// Reads `path` and checks it holds a u8 IDX array with exactly `expected_magic`.
IdxArray read_idx(const std::string& path, std::uint32_t expected_magic, const char* what) {
  std::vector<std::uint8_t> bytes = read_file_maybe_gzip(path);
  if (bytes.size() < 4)
    throw Error(path + ": truncated: " + std::to_string(bytes.size()) +
                " bytes, expected at least a 4-byte IDX magic number (" + hex32(expected_magic) +
                ", " + what + ")");
  const std::uint32_t magic = read_be32(bytes.data());
  if (magic != expected_magic)
    throw Error(path + ": wrong magic " + hex32(magic) + ", expected " + hex32(expected_magic) +
                " (" + what + ")");
  return parse_idx_u8(bytes, path);
}

std::string dims_str(const std::vector<std::uint32_t>& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

// data_dir/base, or data_dir/base.gz; an Error with a remedy when neither exists.
std::string find_data_file(const std::string& dir, const std::string& base) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error("data folder " + dir + " is a file, expected a folder of IDX files (--data-dir)");
  const fs::path plain = fs::path(dir) / base;
  if (fs::is_regular_file(plain, ec)) return plain.string();
  const fs::path gz = fs::path(dir) / (base + ".gz");
  if (fs::is_regular_file(gz, ec)) return gz.string();
  // There, but no file to read: a folder, a pipe, a link to nothing.
  for (const fs::path& p : {plain, gz}) {
    if (!fs::exists(fs::symlink_status(p, ec))) continue;
    const fs::file_status target = fs::status(p, ec);
    const char* what = !fs::exists(target)        ? "a link to nothing"
                       : fs::is_directory(target) ? "a folder"
                                                  : "not a regular file";
    throw Error(p.string() + " is " + what + ", expected an IDX file");
  }
  throw Error("missing file " + plain.string() + " (or " + gz.filename().string() +
              ") (run `make data` to fetch the default digits, or pass --data-dir)");
}

// Labels index the model's class scores: one past them would only fail mid-training, with no
// word of which file it came from.
void check_labels(const Dataset& d, const std::string& labels_path, int classes) {
  const std::int32_t top = *std::max_element(d.labels.begin(), d.labels.end());  // never empty
  if (top >= classes)
    throw Error(labels_path + ": has labels up to " + std::to_string(top) + " but the model has " +
                std::to_string(classes) + " classes, expected labels 0 to " +
                std::to_string(classes - 1) + " (pick a model with at least " +
                std::to_string(top + 1) + " classes)");
}

}  // namespace

std::vector<std::uint8_t> read_file_maybe_gzip(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec) && !ec)
    throw Error("missing file " + path + ": no such file, expected an IDX file");
  if (fs::is_directory(path, ec)) throw Error(path + ": is a directory, expected an IDX file");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw Error("cannot open " + path + ": " + std::strerror(errno));
  std::vector<std::uint8_t> bytes;
  std::uint8_t buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.insert(bytes.end(), buf, buf + n);
  if (std::ferror(f.get())) throw Error("cannot read " + path + ": " + std::strerror(errno));
  return maybe_gunzip(std::move(bytes), path);
}

std::vector<std::uint8_t> maybe_gunzip(std::vector<std::uint8_t> bytes, const std::string& name) {
  // Detect compression by content, not by name: a ".gz" that is not gzip is read as is (and
  // then fails the IDX checks with a message about its magic), a gzip without ".gz" is inflated.
  if (is_gzip(bytes)) return gunzip(bytes, name);
  return bytes;
}

IdxArray parse_idx_u8(const std::vector<std::uint8_t>& bytes, const std::string& name) {
  if (bytes.size() < 4)
    throw Error(name + ": truncated header: " + std::to_string(bytes.size()) +
                " bytes, expected at least the 4-byte IDX magic number");
  const std::uint32_t magic = read_be32(bytes.data());
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] == 0)
    throw Error(name + ": wrong magic " + hex32(magic) +
                ", expected 0x000008NN (IDX of unsigned bytes with NN >= 1 dimensions)");
  const std::size_t ndims = bytes[3];
  const std::size_t header = 4 + 4 * ndims;
  if (bytes.size() < header)
    throw Error(name + ": truncated header: " + std::to_string(bytes.size()) +
                " bytes, the IDX header of " + std::to_string(ndims) + " dimension" +
                (ndims == 1 ? "" : "s") + " needs " + std::to_string(header));
  IdxArray a;
  a.dims.resize(ndims);
  std::uint64_t total = 1;
  bool overflow = false;
  for (std::size_t i = 0; i < ndims; ++i) {
    a.dims[i] = read_be32(bytes.data() + 4 + 4 * i);
    if (a.dims[i] != 0 && total > std::numeric_limits<std::uint64_t>::max() / a.dims[i])
      overflow = true;
    total *= a.dims[i];
  }
  const std::size_t have = bytes.size() - header;
  if (overflow || total > have)
    throw Error(name + ": truncated: header says " + dims_str(a.dims) + " = " +
                (overflow ? std::string("(overflow)") : std::to_string(total)) +
                " bytes of data, file has " + std::to_string(have) + " after the " +
                std::to_string(header) + "-byte header");
  if (total < have)
    throw Error(name + ": " + std::to_string(have - total) +
                " unexpected trailing bytes: header says " + dims_str(a.dims) + " = " +
                std::to_string(total) + " bytes of data, expected exactly that many");
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return a;
}

Dataset load_idx(const std::string& images_path, const std::string& labels_path) {
  IdxArray images = read_idx(images_path, kImagesMagic, "IDX u8 images");
  const std::uint32_t count = images.dims[0], rows = images.dims[1], cols = images.dims[2];
  if (count == 0) throw Error(images_path + ": holds 0 images, expected at least one");
  if (rows == 0 || cols == 0 || rows > 1u << 15 || cols > 1u << 15)
    throw Error(images_path + ": bad image size " + std::to_string(rows) + " x " +
                std::to_string(cols) + ", expected rows and columns between 1 and 32768");

  IdxArray labels = read_idx(labels_path, kLabelsMagic, "IDX u8 labels");
  if (labels.dims[0] != count)
    throw Error(labels_path + ": " + std::to_string(labels.dims[0]) +
                " labels but the images file " + images_path + " has " + std::to_string(count) +
                " images, expected one label per image");

  Dataset d;
  d.shape = Shape{1, int(rows), int(cols)};
  d.images.resize(images.data.size());
  constexpr float kScale = 1.0f / 255.0f;
  for (std::size_t i = 0; i < images.data.size(); ++i) d.images[i] = float(images.data[i]) * kScale;
  d.labels.assign(labels.data.begin(), labels.data.end());
  return d;
}

// The default data folder: $PSBED_DATA_DIR, else data/mnist in the working folder if it has one,
// else the one `make data` fills in this checkout, so psbed finds the digits from any folder.
std::string default_data_dir() {
  if (const char* env = std::getenv("PSBED_DATA_DIR"); env && *env) return env;
  const std::string here = "data/mnist";
  if (std::filesystem::is_directory(here)) return here;
#ifdef PSBED_SOURCE_DIR
  const std::string checkout = std::string(PSBED_SOURCE_DIR) + "/" + here;
  if (std::filesystem::is_directory(checkout)) return checkout;
#endif
  return here;
}

namespace {

void check_classes(int classes) {
  if (classes < 2)
    throw Error("a model with " + std::to_string(classes) + " classes, expected at least 2");
}

SyntheticOptions synthetic_options(const Shape& model_input, int classes, std::uint64_t seed) {
  SyntheticOptions opt;
  opt.shape = model_input;
  opt.classes = classes;
  opt.seed = seed;
  return opt;
}

}  // namespace

void check_dataset(const std::string& name, const std::string& data_dir, const Shape& model_input,
                   int classes, std::uint64_t seed) {
  if (name != "synthetic") {
    load_dataset(name, data_dir, model_input, classes, seed);
    return;
  }
  check_classes(classes);
  check_synthetic(synthetic_options(model_input, classes, seed));
}

Split load_dataset(const std::string& name, const std::string& data_dir, const Shape& model_input,
                   int classes, std::uint64_t seed) {
  check_classes(classes);
  if (name == "synthetic") return make_synthetic(synthetic_options(model_input, classes, seed));
  if (name != "mnist") throw Error("unknown data set '" + name + "', expected mnist or synthetic");

  const std::string dir = data_dir.empty() ? default_data_dir() : data_dir;
  const std::string train_images = find_data_file(dir, "train-images-idx3-ubyte");
  const std::string train_labels = find_data_file(dir, "train-labels-idx1-ubyte");
  const std::string test_images = find_data_file(dir, "t10k-images-idx3-ubyte");
  const std::string test_labels = find_data_file(dir, "t10k-labels-idx1-ubyte");

  Split s;
  s.train = load_idx(train_images, train_labels);
  s.test = load_idx(test_images, test_labels);
  check_labels(s.train, train_labels, classes);
  check_labels(s.test, test_labels, classes);
  const Shape& a = s.train.shape;
  const Shape& b = s.test.shape;
  if (a.c != b.c || a.h != b.h || a.w != b.w)
    throw Error(test_images + ": images of shape " + b.str() + " but the training images " +
                train_images + " are " + a.str() + ", expected the same shape in both");
  const Shape& m = model_input;
  if (a.c != m.c || a.h != m.h || a.w != m.w)
    throw Error("data set mnist in " + dir + " has samples of shape " + a.str() +
                " but the model's input shape is " + m.str() +
                ", expected them equal (pick a model made for " + a.str() +
                " input, or --data synthetic)");
  std::ostringstream os;
  os << "mnist from " << dir << " (" << s.train.size() << " train / " << s.test.size() << " test)";
  s.description = os.str();
  return s;
}

}  // namespace psbed::workloads
