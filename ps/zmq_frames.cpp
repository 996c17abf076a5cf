#include "ps/zmq_frames.hpp"

#include <memory>

#include "core/error.hpp"

namespace psbed::ps {
namespace {

using Owner = std::shared_ptr<const void>;

// ZeroMQ's free function: called once, on an I/O thread, when the frame is done with. The hint is
// the heap-held reference made in zero_copy_frame; adopting it into a unique_ptr drops it.
void release_owner(void* /*data*/, void* hint) {
  std::unique_ptr<Owner> owner(static_cast<Owner*>(hint));
}

}  // namespace

zmq::message_t zero_copy_frame(const Payload& payload) {
  if (payload.empty()) return zmq::message_t();
  // The C API can only carry the reference as a void* hint, so it lives on the heap until
  // release_owner; the unique_ptr covers the case where the constructor throws.
  auto keep = std::make_unique<Owner>(payload.owner());
  // ZeroMQ never writes through the pointer of a frame it sends; its API just isn't const.
  zmq::message_t frame(const_cast<std::uint8_t*>(payload.data()), payload.size(), &release_owner,
                       keep.get());
  static_cast<void>(keep.release());  // now ZeroMQ's: release_owner frees it
  return frame;
}

Payload adopt_frame(zmq::message_t&& frame) {
  auto owned = std::make_shared<zmq::message_t>(std::move(frame));
  const void* data = owned->data();
  const std::size_t size = owned->size();
  return Payload(std::move(owned), data, size);
}

bool connect_and_wait(zmq::socket_t& s, const std::string& endpoint, std::chrono::milliseconds wait,
                      const std::string& who, const std::string& example) {
  s.set(zmq::sockopt::immediate, 1);
  try {
    s.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw Error(who + ": cannot connect to '" + endpoint + "': " + e.what() +
                " (expected an endpoint such as " + example + ")");
  }
  zmq::pollitem_t out[] = {{s.handle(), 0, ZMQ_POLLOUT, 0}};
  return zmq::poll(out, 1, wait) > 0 && (out[0].revents & ZMQ_POLLOUT);
}

}  // namespace psbed::ps
