#include "cluster/netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "core/error.hpp"

namespace psbed::cluster {
namespace {

// Runs a command (argv, no shell); returns its exit status and, in `err`, what it printed.
int run_cmd(const std::vector<std::string>& argv, std::string& err) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error("pipe failed running " + argv[0]);
  pid_t pid = ::fork();
  if (pid < 0) throw Error("fork failed running " + argv[0]);
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    // The launcher blocks these signals for its own bookkeeping; the command must not inherit that.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  err.clear();
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) err.append(buf, std::size_t(n));
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

void must(const std::vector<std::string>& argv) {
  std::string err;
  const int rc = run_cmd(argv, err);
  if (rc == 127)
    throw Error("'" + argv[0] + "' is not installed (Debian package iproute2); --netns needs it");
  if (rc != 0)
    throw Error("'" + joined(argv) +
                "' failed: " + (err.empty() ? "exit " + std::to_string(rc) : err));
}

bool quietly(const std::vector<std::string>& argv) {
  std::string err;
  return run_cmd(argv, err) == 0;
}

const char* kNetnsDir = "/var/run/netns";

}  // namespace

NetnsTestbed::NetnsTestbed(std::uint64_t rate_bits_per_s) : rate_(rate_bits_per_s) {
  if (::geteuid() != 0)
    throw Error(
        "--netns needs root (it creates network namespaces, veth pairs and tc qdiscs); run as "
        "root, or "
        "leave out --netns to shape links in-process with --bandwidth");
  if (const int n = remove_stale(); n > 0)
    spdlog::info("removed {} network namespace(s) left by a launcher that died", n);
  prefix_ = "psbed" + std::to_string(::getpid()) + "-";
  bridge_ns_ = prefix_ + "br";
  must({"ip", "netns", "add", bridge_ns_});
  bridge_made_ = true;
  must({"ip", "-n", bridge_ns_, "link", "add", "br0", "type", "bridge"});
  must({"ip", "-n", bridge_ns_, "link", "set", "br0", "up"});
}

NetnsTestbed::~NetnsTestbed() { remove_all(); }

std::string NetnsTestbed::ns_of(const std::string& node) const { return prefix_ + node; }

std::string NetnsTestbed::add_node(const std::string& node) {
  const int k = int(nodes_.size());
  const std::string ns = ns_of(node), peer = "v" + std::to_string(k);
  const std::string addr =
      "10.213." + std::to_string((k + 2) / 256) + "." + std::to_string((k + 2) % 256);
  must({"ip", "netns", "add", ns});
  nodes_.push_back(node);
  must({"ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", peer, "netns",
        bridge_ns_});
  must({"ip", "-n", bridge_ns_, "link", "set", peer, "master", "br0"});
  must({"ip", "-n", bridge_ns_, "link", "set", peer, "up"});
  must({"ip", "-n", ns, "addr", "add", addr + "/16", "dev", "eth0"});
  must({"ip", "-n", ns, "link", "set", "eth0", "up"});
  must({"ip", "-n", ns, "link", "set", "lo", "up"});
  if (rate_ > 0) shape(node, rate_);
  return addr;
}

void NetnsTestbed::shape(const std::string& node, std::uint64_t rate) {
  const auto it = std::find(nodes_.begin(), nodes_.end(), node);
  if (it == nodes_.end()) throw Error("no network namespace for node '" + node + "'");
  const std::string ns = ns_of(node), peer = "v" + std::to_string(it - nodes_.begin());
  // Token bucket per direction: the node's egress on its eth0, its ingress as the egress of the
  // bridge-side peer. The bucket holds 2 ms of traffic (at least 64 KiB, one GSO segment).
  const std::uint64_t burst = std::max<std::uint64_t>(64 * 1024, rate / 8 / 500);
  const std::vector<std::string> tbf = {
      "root",    "tbf",  "rate", std::to_string(rate) + "bit", "burst", std::to_string(burst),
      "latency", "100ms"};
  for (const auto& [in_ns, dev] :
       {std::pair{ns, std::string("eth0")}, std::pair{bridge_ns_, peer}}) {
    // "replace" both adds a qdisc and changes one add_node set.
    std::vector<std::string> cmd = {"tc", "-n", in_ns, "qdisc", "replace", "dev", dev};
    cmd.insert(cmd.end(), tbf.begin(), tbf.end());
    must(cmd);
  }
}

bool NetnsTestbed::enter(const std::string& node) const {
  const std::string path = std::string(kNetnsDir) + "/" + ns_of(node);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

std::vector<std::string> NetnsTestbed::namespaces() const {
  std::vector<std::string> v;
  for (const auto& n : nodes_) v.push_back(ns_of(n));
  if (bridge_made_) v.push_back(bridge_ns_);
  return v;
}

void NetnsTestbed::remove_all() {
  // A node namespace goes first (its eth0 and the bridge-side peer vanish with it), the bridge
  // last.
  for (const auto& ns : namespaces())
    if (!quietly({"ip", "netns", "del", ns}))
      spdlog::warn("could not remove network namespace {}", ns);
  nodes_.clear();
  bridge_made_ = false;
}

int NetnsTestbed::remove_stale() {
  namespace fs = std::filesystem;
  std::error_code ec;
  int removed = 0;
  for (const auto& e : fs::directory_iterator(kNetnsDir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("psbed", 0) != 0) continue;
    const auto dash = name.find('-');
    if (dash == std::string::npos || dash == 5) continue;
    const std::string pid_text = name.substr(5, dash - 5);
    if (pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = pid_t(std::stol(pid_text));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    removed += quietly({"ip", "netns", "del", name});
  }
  return removed;
}

}  // namespace psbed::cluster
