// How big each part of each tensor is, as the cluster map says: what a received key, part,
// offset and length are checked against. An interface because the store answers from its own
// tables and tests answer from a literal; PartTable is the plain one.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace psbed::ps {

class PartSizes {
 public:
  virtual ~PartSizes() = default;
  virtual std::uint32_t tensor_count() const = 0;
  // Precondition: key < tensor_count().
  virtual std::uint32_t part_count(std::uint32_t key) const = 0;
  // Precondition: part < part_count(key).
  virtual std::uint64_t part_bytes(std::uint32_t key, std::uint32_t part) const = 0;
};

// bytes[key][part] = the byte size of that part.
class PartTable final : public PartSizes {
 public:
  explicit PartTable(std::vector<std::vector<std::uint64_t>> bytes) : bytes_(std::move(bytes)) {}
  std::uint32_t tensor_count() const override { return static_cast<std::uint32_t>(bytes_.size()); }
  std::uint32_t part_count(std::uint32_t key) const override {
    return static_cast<std::uint32_t>(bytes_[key].size());
  }
  std::uint64_t part_bytes(std::uint32_t key, std::uint32_t part) const override {
    return bytes_[key][part];
  }

 private:
  std::vector<std::vector<std::uint64_t>> bytes_;
};

}  // namespace psbed::ps
