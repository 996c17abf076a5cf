#include "ps/checkpoint.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "core/error.hpp"
#include "core/trace.hpp"
#include "core/units.hpp"

namespace psbed::ps {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic8[8] = {'P', 'S', 'B', 'D', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kFormat = 1;
constexpr std::uint64_t kFnvBasis = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n, std::uint64_t h = kFnvBasis) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

class Writer {
 public:
  template <typename T>
  void put(T v) {
    std::uint8_t b[sizeof(T)];
    for (std::size_t i = 0; i < sizeof(T); ++i) b[i] = std::uint8_t(std::uint64_t(v) >> (8 * i));
    bytes.insert(bytes.end(), b, b + sizeof(T));
  }
  void floats(const std::vector<float>& v) {
    static_assert(sizeof(float) == 4);
    const auto* p = reinterpret_cast<const std::uint8_t*>(v.data());
    bytes.insert(bytes.end(), p, p + v.size() * 4);  // x86-64 and aarch64: little-endian
  }
  std::vector<std::uint8_t> bytes;
};

class Reader {
 public:
  Reader(const std::vector<std::uint8_t>& b, std::size_t end, const std::string& path)
      : b_(b), end_(end), path_(path) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) v |= std::uint64_t(b_[at_ + i]) << (8 * i);
    at_ += sizeof(T);
    return T(v);
  }
  void floats(std::vector<float>& v, std::uint64_t n) {
    if (n > (end_ - at_) / 4) need(end_ - at_ + 1);  // n * 4 could wrap: refused as too long
    v.resize(n);
    std::memcpy(v.data(), b_.data() + at_, n * 4);
    at_ += n * 4;
  }
  std::string text(std::uint32_t n) {
    need(n);
    std::string s(reinterpret_cast<const char*>(b_.data() + at_), n);
    at_ += n;
    return s;
  }
  std::size_t at() const { return at_; }

 private:
  void need(std::uint64_t n) {
    if (n > end_ - at_)
      throw Error("checkpoint " + path_ + " is damaged: its contents run past its length");
  }
  const std::vector<std::uint8_t>& b_;
  std::size_t end_, at_ = 0;
  const std::string& path_;
};

}  // namespace

std::uint64_t model_hash(const std::string& spec_text) {
  return fnv1a(reinterpret_cast<const std::uint8_t*>(spec_text.data()), spec_text.size());
}

std::string checkpoint_path(const std::string& dir, int shard, std::uint64_t step) {
  return dir + "/shard-" + std::to_string(shard) + ".step-" + std::to_string(step) + ".ckpt";
}

void write_checkpoint(const std::string& path, const Checkpoint& c) {
  Writer w;
  w.bytes.insert(w.bytes.end(), kMagic8, kMagic8 + 8);
  w.put(kFormat), w.put(std::uint32_t(c.shard)), w.put(std::uint32_t(c.shards));
  w.put(std::uint32_t(c.parts.size())), w.put(c.step), w.put(c.model_hash);
  w.put(std::uint32_t(c.model.size()));
  w.bytes.insert(w.bytes.end(), c.model.begin(), c.model.end());
  for (const auto& p : c.parts) {
    w.put(std::uint32_t(p.key)), w.put(std::uint32_t(p.part));
    w.put(std::uint64_t(p.offset)), w.put(std::uint64_t(p.numel));
    w.floats(p.params), w.floats(p.velocity);
  }
  const std::uint64_t body = w.bytes.size();
  w.put(body), w.put(fnv1a(w.bytes.data(), body));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("cannot write checkpoint " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < w.bytes.size()) {
    const ssize_t n = ::write(fd, w.bytes.data() + done, w.bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write checkpoint " + tmp + ": " + why);
    }
    done += std::size_t(n);
  }
  // On disk before the rename: a crash after it must not leave a name over missing bytes.
  const bool synced = ::fsync(fd) == 0;
  if (!synced || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (synced == false) ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("cannot write checkpoint " + tmp + ": " + why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error("cannot rename checkpoint " + tmp + " to " + path + ": " + why);
  }
  // The rename itself on disk: the folder's entry, not only the file's bytes.
  const std::string dir = fs::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) ::fsync(dfd), ::close(dfd);
}

Checkpoint read_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read checkpoint " + path + ": " + std::strerror(errno));
  const std::vector<std::uint8_t> b((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
  if (b.size() < 8 || std::memcmp(b.data(), kMagic8, 8) != 0)
    throw Error("checkpoint " + path + " is not a psbed checkpoint (it does not start PSBDCKPT)");
  if (b.size() < 8 + 16)
    throw Error("checkpoint " + path + " is truncated (" + std::to_string(b.size()) + " bytes)");
  const std::size_t body = b.size() - 16;
  std::uint64_t said = 0;
  for (int i = 0; i < 8; ++i) said |= std::uint64_t(b[body + std::size_t(i)]) << (8 * i);
  if (said != body)
    throw Error("checkpoint " + path + " is truncated or damaged: its " + std::to_string(b.size()) +
                " bytes do not end with the length it was written with");
  std::uint64_t sum = 0;
  for (int i = 0; i < 8; ++i) sum |= std::uint64_t(b[body + 8 + std::size_t(i)]) << (8 * i);
  if (sum != fnv1a(b.data(), body))
    throw Error("checkpoint " + path + " is damaged: its checksum does not match its contents");
  Reader r(b, body, path);
  (void)r.text(8);
  if (const auto v = r.get<std::uint32_t>(); v != kFormat)
    throw Error("checkpoint " + path + " has format " + std::to_string(v) + ", expected " +
                std::to_string(kFormat));
  Checkpoint c;
  c.shard = int(r.get<std::uint32_t>()), c.shards = int(r.get<std::uint32_t>());
  const auto parts = r.get<std::uint32_t>();
  c.step = r.get<std::uint64_t>(), c.model_hash = r.get<std::uint64_t>();
  c.model = r.text(r.get<std::uint32_t>());
  for (std::uint32_t i = 0; i < parts; ++i) {
    CheckpointPart p;
    p.key = int(r.get<std::uint32_t>()), p.part = int(r.get<std::uint32_t>());
    p.offset = std::int64_t(r.get<std::uint64_t>());
    const auto numel = r.get<std::uint64_t>();
    r.floats(p.params, numel), r.floats(p.velocity, numel);
    p.numel = std::int64_t(numel);
    c.parts.push_back(std::move(p));
  }
  if (r.at() != body) throw Error("checkpoint " + path + " is damaged: bytes after its last part");
  return c;
}

void check_checkpoint(const Checkpoint& c, const ClusterMap& map, int shard,
                      const std::string& path) {
  const std::string at = "checkpoint " + path + " ";
  if (c.model != map.exp.model_name || c.model_hash != model_hash(map.exp.model_toml))
    throw Error(at + "is of another model (" + c.model +
                (c.model == map.exp.model_name ? ", another spec" : "") + "), not this run's " +
                map.exp.model_name);
  if (c.shards != int(map.servers.size()) || c.shard != shard)
    throw Error(at + "is shard " + std::to_string(c.shard) + " of " + std::to_string(c.shards) +
                ", not shard " + std::to_string(shard) + " of " +
                std::to_string(map.servers.size()));
  std::size_t mine = 0;
  for (const Part& p : map.plan.parts) mine += p.shard == shard;
  bool same = c.parts.size() == mine;
  for (const auto& p : c.parts) {
    if (!same) break;
    if (p.key < 0 || p.key >= int(map.plan.parts_of_key.size()) || p.part < 0 ||
        p.part >= int(map.plan.parts_of_key[std::size_t(p.key)].size())) {
      same = false;
      break;
    }
    const Part& want = map.plan.at(p.key, p.part);
    same = want.shard == shard && want.offset == p.offset && want.numel == p.numel;
  }
  if (!same)
    throw Error(at +
                "cuts the tensors into other parts than this run (another --partition-bytes?)");
}

std::int64_t latest_checkpoint_step(const std::string& dir, int shards) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return -1;
  std::map<std::uint64_t, std::set<int>> found;
  const std::regex name(R"(shard-(\d+)\.step-(\d+)\.ckpt)");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (std::regex_match(f, m, name) && m[1].length() < 9 && m[2].length() < 18)
      found[std::stoull(m[2])].insert(std::stoi(m[1]));
  }
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    int have = 0;
    for (int s = 0; s < shards; ++s) have += it->second.count(s) > 0;
    if (have == shards) return std::int64_t(it->first);
  }
  return -1;
}

void restore_checkpoint(Store& store, const Checkpoint& c, int workers) {
  for (const auto& p : c.parts) {
    PartState& s = store.state(p.key, p.part);
    std::lock_guard<std::mutex> lock(*s.mu);
    *s.current = p.params;
    s.velocity = p.velocity;
    s.applied_clocks = c.step;
    s.completed.assign(std::size_t(workers), c.step);
  }
}

CheckpointEvery parse_checkpoint_every(const std::string& text) {
  CheckpointEvery e;
  if (text.empty() || text == "0") return e;
  const bool digits = text.find_first_not_of("0123456789") == std::string::npos;
  try {
    if (digits && text.size() < 12)
      e.steps = std::stoll(text);
    else
      e.seconds = parse_duration_s(text);
  } catch (const std::exception& x) {
    // No flag name: CLI11 and for_flag put it in front.
    throw Error(std::string(x.what()) + " (expected a number of steps, 200, or a duration, 30s)");
  }
  if (e.seconds != 0 && !(e.seconds >= 0.1))
    throw Error("a checkpoint every " + text + " is too often: 0.1 s at least");
  return e;
}

ShardCheckpointer::ShardCheckpointer(std::string dir, const ClusterMap& map, int shard,
                                     std::int64_t every_steps, std::uint64_t from_step)
    : dir_(std::move(dir)),
      model_(map.exp.model_name),
      hash_(model_hash(map.exp.model_toml)),
      shard_(shard),
      shards_(int(map.servers.size())),
      parts_(0),
      every_(every_steps),
      steps_(map.exp.steps),
      from_(from_step) {
  for (const Part& p : map.plan.parts) parts_ += p.shard == shard;
  fs::create_directories(dir_);
  writer_ = std::thread([this] { write_loop(); });
}

ShardCheckpointer::~ShardCheckpointer() { stop(); }

void ShardCheckpointer::want(std::uint64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (step > from_ && std::int64_t(step) < steps_) asked_.insert(step);
  while (asked_.size() > 8) asked_.erase(asked_.begin());
}

bool ShardCheckpointer::wanted_locked(std::uint64_t step) const {
  if (step <= from_ || std::int64_t(step) >= steps_) return false;
  return (every_ > 0 && step % std::uint64_t(every_) == 0) || asked_.count(step) > 0;
}

void ShardCheckpointer::reached(const PartState& s, std::uint64_t clock) {
  std::lock_guard<std::mutex> lock(mu_);
  // Async and ssp report a step once per worker: one taken already is not taken again (a later
  // copy would hold faster workers' gradients of the steps after it).
  if (stopping_ || clock <= captured_ || !wanted_locked(clock)) return;
  auto it = pending_.find(clock);
  if (it == pending_.end()) {
    // A step some part went past before it was asked for never completes: the two newest kept.
    while (pending_.size() >= 2) pending_.erase(pending_.begin());
    Checkpoint c;
    c.model = model_, c.model_hash = hash_, c.shard = shard_, c.shards = shards_, c.step = clock;
    it = pending_.emplace(clock, std::move(c)).first;
  }
  for (const auto& p : it->second.parts)
    if (p.key == s.part.key && p.part == s.part.part) return;  // async: reached again
  CheckpointPart p;
  p.key = s.part.key, p.part = s.part.part, p.offset = s.part.offset, p.numel = s.part.numel;
  p.params = *s.current;
  p.velocity = s.velocity;
  it->second.parts.push_back(std::move(p));
  if (it->second.parts.size() == parts_) {
    captured_ = std::max(captured_, clock);
    // A writer behind (slow disk, frequent checkpoints) keeps the newest two waiting, not all.
    while (ready_.size() >= 2) {
      spdlog::warn("shard {}: checkpoint of step {} dropped: the writer is behind", shard_,
                   ready_.front().step);
      ready_.pop_front();
    }
    ready_.push_back(std::move(it->second));
    pending_.erase(it);
    cv_.notify_one();
  }
}

void ShardCheckpointer::write_loop() {
  pthread_setname_np(pthread_self(), "ps-checkpoint");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
    if (ready_.empty()) return;
    Checkpoint c = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    const std::string path = checkpoint_path(dir_, shard_, c.step);
    try {
      const double t0 = now_us();
      write_checkpoint(path, c);
      spdlog::info("shard {} checkpoint of step {} in {} ({:.0f} ms)", shard_, c.step, path,
                   (now_us() - t0) / 1e3);
      // The two before stay: another shard may not have finished writing this step's yet.
      std::error_code ec;
      std::uint64_t prev = 0;
      {
        std::lock_guard<std::mutex> relock(mu_);
        ++written_;
        last_step_ = std::max(last_step_, c.step);
        kept_.push_back(c.step);
        if (kept_.size() > 3) kept_.pop_front();
        if (kept_.size() == 3) prev = kept_.front();
      }
      if (prev > 0 && prev < c.step) {
        for (const auto& e : fs::directory_iterator(dir_, ec)) {
          const std::string f = e.path().filename().string();
          const std::string mine = "shard-" + std::to_string(shard_) + ".step-";
          if (f.rfind(mine, 0) == 0 && f.size() > 5 && f.substr(f.size() - 5) == ".ckpt") {
            const std::string num = f.substr(mine.size(), f.size() - 5 - mine.size());
            if (num.find_first_not_of("0123456789") == std::string::npos && num.size() < 18 &&
                std::stoull(num) < prev)
              fs::remove(e.path(), ec);
          }
        }
      }
    } catch (const Error& e) {
      spdlog::error("shard {}: {}", shard_, e.what());  // training goes on; the last one stays
    }
    lock.lock();
  }
}

void ShardCheckpointer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (writer_.joinable()) writer_.join();
}

std::uint64_t ShardCheckpointer::written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_;
}

std::uint64_t ShardCheckpointer::last_step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_step_;
}

}  // namespace psbed::ps
