#include "ps/metrics.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

namespace psbed::ps {

std::string escape_label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string metric_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void MetricsText::family(const std::string& name, const std::string& type,
                         const std::string& help) {
  out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void MetricsText::sample(const std::string& name, const MetricLabels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += "{";
    for (std::size_t i = 0; i < labels.size(); ++i)
      out_ +=
          (i ? "," : "") + labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
    out_ += "}";
  }
  out_ += " " + metric_number(value) + "\n";
}

void MetricsText::histogram(const std::string& name, const MetricLabels& labels,
                            const std::vector<double>& bounds, const std::vector<double>& counts,
                            double sum) {
  double cumulative = 0;
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += i < counts.size() ? counts[i] : 0;
    MetricLabels l = labels;
    l.emplace_back("le", i < bounds.size() ? metric_number(bounds[i]) : "+Inf");
    sample(name + "_bucket", l, cumulative);
  }
  sample(name + "_sum", labels, sum);
  sample(name + "_count", labels, cumulative);
}

void append_process_metrics(MetricsText& m) {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces and parentheses: fields count from its last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return;
  std::istringstream rest(stat.substr(close + 2));
  std::vector<std::string> f{"", "", ""};  // fields 1-2 and a pad, so f[i] is field i
  for (std::string tok; rest >> tok;) f.push_back(tok);
  if (f.size() <= 24) return;
  const double tick = double(sysconf(_SC_CLK_TCK)), page = double(sysconf(_SC_PAGESIZE));
  auto field = [&](int i) { return std::strtod(f[std::size_t(i)].c_str(), nullptr); };
  double boot_s = 0;
  std::ifstream proc_stat("/proc/stat");
  for (std::string key; proc_stat >> key;)
    if (key == "btime") {
      proc_stat >> boot_s;
      break;
    }
  m.family("process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds");
  m.sample("process_cpu_seconds_total", {}, (field(14) + field(15)) / tick);
  m.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes");
  m.sample("process_resident_memory_bytes", {}, field(24) * page);
  m.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes");
  m.sample("process_virtual_memory_bytes", {}, field(23));
  m.family("process_start_time_seconds", "gauge",
           "Start time of the process since the Unix epoch in seconds");
  m.sample("process_start_time_seconds", {}, boot_s + field(22) / tick);
  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  m.family("process_open_fds", "gauge", "Number of open file descriptors");
  m.sample("process_open_fds", {}, fds);
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    m.family("process_max_fds", "gauge", "Maximum number of open file descriptors");
    m.sample("process_max_fds", {}, double(lim.rlim_cur));
  }
}

void append_build_info(MetricsText& m) {
  m.family("psbed_build_info", "gauge", "The psbed build answering (value always 1)");
  m.sample("psbed_build_info", {{"version", PSBED_VERSION}}, 1);
}

}  // namespace psbed::ps
