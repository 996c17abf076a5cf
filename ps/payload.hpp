// Bytes plus whatever keeps them alive. A Payload is how tensor bytes cross the transport without
// copies: on send it shares the tensor's buffer with ZeroMQ until the bytes are on the wire; on
// receive it shares ZeroMQ's frame with the store. Copying a Payload copies a reference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace psbed::ps {

class Payload {
 public:
  Payload() = default;
  // Views `size` bytes at `data`; `owner` keeps them alive. The bytes must not change while any
  // Payload (including the transport's, until it has sent them) refers to them.
  Payload(std::shared_ptr<const void> owner, const void* data, std::size_t size)
      : owner_(std::move(owner)), data_(static_cast<const std::uint8_t*>(data)), size_(size) {}

  // Shares a whole vector (a tensor's storage). Don't resize it while shared.
  template <typename T>
  static Payload share(std::shared_ptr<const std::vector<T>> v) {
    const void* data = v->data();
    const std::size_t size = v->size() * sizeof(T);
    return Payload(std::move(v), data, size);
  }
  // Owns a copy: for small control messages (JSON), never for tensors.
  static Payload copy(std::string_view bytes) {
    auto s = std::make_shared<const std::string>(bytes);
    const void* data = s->data();
    return Payload(std::move(s), data, bytes.size());
  }

  // A sub-range sharing the same owner: one part of a tensor.
  Payload slice(std::size_t offset, std::size_t size) const {
    if (offset > size_ || size > size_ - offset)
      throw Error("payload slice [" + std::to_string(offset) + ", +" + std::to_string(size) +
                  ") is past its end (" + std::to_string(size_) + " bytes)");
    return Payload(owner_, data_ + offset, size);
  }

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  // Whatever keeps the bytes alive; a transport may tell what it is (ZmqTransport::frame_of).
  const std::shared_ptr<const void>& owner() const { return owner_; }

 private:
  std::shared_ptr<const void> owner_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace psbed::ps
