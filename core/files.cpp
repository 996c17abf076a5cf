#include "core/files.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace psbed {
namespace fs = std::filesystem;

namespace {
std::string reason() { return errno ? std::string(": ") + std::strerror(errno) : std::string(); }

// Creates folder `dir` with its parents; the error names `flag`.
void make_folder(const fs::path& dir, const std::string& flag) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error(flag + ": cannot create the folder '" + dir.string() + "'" +
                (ec ? ": " + ec.message() : ""));
}
}  // namespace

void ensure_writable_dir(const std::string& dir, const std::string& flag) {
  if (dir.empty()) return;
  make_folder(dir, flag);
  std::error_code ec;
  const fs::path probe = fs::path(dir) / ".psbed-write-check";
  errno = 0;
  if (!std::ofstream(probe))
    throw Error(flag + ": cannot write in the folder '" + dir + "'" + reason());
  fs::remove(probe, ec);
}

void ensure_writable_file(const std::string& path, const std::string& flag) {
  if (path.empty()) return;
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec))
    throw Error(flag + ": '" + path + "' is a folder, expected a file name");
  // An existing file (or a device, a pipe: /dev/stdout) is opened as it will be, nothing else
  // asked of its folder; a new one is created, in its folder made if need be, and removed again.
  const bool existed = fs::exists(fs::symlink_status(p, ec)) || fs::exists(p, ec);
  if (!existed && p.has_parent_path()) make_folder(p.parent_path(), flag);
  errno = 0;
  if (!std::ofstream(path, std::ios::app))
    throw Error(flag + ": cannot write '" + path + "'" + reason());
  if (!existed) fs::remove(p, ec);
}

void write_text_file(const std::string& path, const std::string& text) {
  errno = 0;
  std::ofstream out(path);
  if (!out) throw Error("cannot write '" + path + "'" + reason());
  out << text;
  out.flush();
  if (!out) throw Error("writing '" + path + "' failed" + reason());
}

std::uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    std::getline(in, unit);
  }
  return 0;
}

std::string format_memory(std::uint64_t bytes) {
  char buf[32];
  if (bytes >= (std::uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1 << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  return buf;
}

}  // namespace psbed
