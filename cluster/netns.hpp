// Kernel-shaped links for `psbed launch --netns`: every node runs in its own network namespace,
// joined by a veth pair to a bridge, with `tc` tbf shaping both directions of each link.
//
// The bridge lives in a namespace of its own, not in the host's: deleting the namespaces takes
// every veth and the bridge with them, so cleanup cannot miss a device, and the host's network
// is never touched. Namespaces are named psbed<launcher pid>-<node>, so ones left behind by a
// launcher that was SIGKILLed are recognised (their pid is gone) and removed by the next one.
// Addresses come from 10.213.0.0/16, used only inside these namespaces.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace psbed::cluster {

class NetnsTestbed {
 public:
  // rate_bits_per_s == 0: links unshaped. Throws Error, naming what is missing, without root
  // or without `ip`/`tc`.
  explicit NetnsTestbed(std::uint64_t rate_bits_per_s);
  ~NetnsTestbed();  // removes every namespace (and with them the veths and the bridge)
  NetnsTestbed(const NetnsTestbed&) = delete;
  NetnsTestbed& operator=(const NetnsTestbed&) = delete;

  // Creates the node's namespace, its veth to the bridge, its address and the shaping;
  // returns its address ("10.213.0.2").
  std::string add_node(const std::string& node);
  // Shapes (or reshapes) an added node's link, both directions, at its own rate (a straggler's).
  void shape(const std::string& node, std::uint64_t rate_bits_per_s);
  // Joins the calling process to the node's namespace (in a forked child, before exec).
  // Returns false if it could not (errno set).
  bool enter(const std::string& node) const;
  // Namespace names this testbed made, bridge last.
  std::vector<std::string> namespaces() const;
  void remove_all();

  // Namespaces of launchers that no longer run; returns how many were removed.
  static int remove_stale();

 private:
  std::string ns_of(const std::string& node) const;
  std::string prefix_;
  std::string bridge_ns_;
  std::uint64_t rate_;
  std::vector<std::string> nodes_;
  bool bridge_made_ = false;
};

}  // namespace psbed::cluster
