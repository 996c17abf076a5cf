// Labelled image sets in memory, NCHW float32 in [0, 1], and where they come from: IDX files
// (MNIST, Fashion-MNIST, or the default digits converted by fetch-mnist.sh) or the seeded
// synthetic generator. Every loader error is a psbed::Error naming the file and the fault.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model_spec.hpp"

namespace psbed::workloads {

struct Dataset {
  Shape shape;                // per-sample C x H x W
  std::vector<float> images;  // size() * shape.numel() floats, sample-major
  std::vector<std::int32_t> labels;
  std::size_t size() const { return labels.size(); }
  const float* image(std::size_t i) const { return images.data() + i * shape.numel(); }
};

// Reads an IDX image file (magic 0x00000803, u8 pixels, scaled by 1/255 into a 1 x rows x cols
// shape) and its label file (magic 0x00000801). Either may be gzip-compressed (".gz" or the gzip
// magic). Wrong magic, truncated data, count mismatch between the two: Error naming the file.
Dataset load_idx(const std::string& images_path, const std::string& labels_path);

// Raw IDX decoding from a byte buffer (exposed for tests; `name` is used in error messages).
struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;
};
IdxArray parse_idx_u8(const std::vector<std::uint8_t>& bytes, const std::string& name);
std::vector<std::uint8_t> read_file_maybe_gzip(const std::string& path);
// A file's bytes as read_file_maybe_gzip hands them on: inflated when they are gzip (by content,
// not by name), else as they are. Errors name `name`.
std::vector<std::uint8_t> maybe_gunzip(std::vector<std::uint8_t> bytes, const std::string& name);

struct SyntheticOptions {
  Shape shape{3, 32, 32};
  std::size_t train = 8000, test = 2000;
  int classes = 10;
  std::uint64_t seed = 1;
  float noise = 0.35f;  // std-dev of the per-pixel Gaussian noise added to the class pattern
};
struct Split {
  Dataset train, test;
  std::string description;  // "mnist from data/mnist (8000 train / 2000 test)"
};
// Learnable: each class has a fixed smooth random pattern; a sample is its class pattern plus
// noise, clipped to [0, 1]. Same seed, same data.
Split make_synthetic(const SyntheticOptions& opt);
// What make_synthetic refuses (shape, classes, noise, size against memory), without making it.
void check_synthetic(const SyntheticOptions& opt);

// Per-channel mean and standard deviation of the training images.
struct ChannelStats {
  std::vector<double> mean, std;
};
// Standardises both parts with the training part's per-channel statistics (zero mean, unit
// variance), as is usual before SGD; returns those statistics.
ChannelStats standardize(Split& split);

// The data set named on the command line for a model with that input shape and number of
// classes: "mnist" (IDX files train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
// t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz] in data_dir, default
// default_data_dir()),
// whose samples must have that shape and whose labels must be below `classes` (fewer distinct
// labels are fine), or "synthetic" (that shape, `classes` classes).
Split load_dataset(const std::string& name, const std::string& data_dir, const Shape& model_input,
                   int classes, std::uint64_t seed);
// Refuses what load_dataset would refuse. Synthetic data is checked without being made (a
// launcher's check would otherwise cost as much as a worker's start); mnist is read whole.
void check_dataset(const std::string& name, const std::string& data_dir, const Shape& model_input,
                   int classes, std::uint64_t seed);

// $PSBED_DATA_DIR, else data/mnist in the working folder if it has one, else this checkout's
// data/mnist (filled by `make data`) if it has one, else data/mnist.
std::string default_data_dir();

}  // namespace psbed::workloads
