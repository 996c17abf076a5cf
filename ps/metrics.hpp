// Prometheus text exposition format (version 0.0.4), written by hand: a family is announced once
// (# HELP, # TYPE) and followed by its samples; label values are escaped. Enough for /metrics;
// `promtool check metrics` is the judge (tests/integration/http_control.sh).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace psbed::ps {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class MetricsText {
 public:
  // type: counter, gauge or histogram.
  void family(const std::string& name, const std::string& type, const std::string& help);
  void sample(const std::string& name, const MetricLabels& labels, double value);
  // A histogram's _bucket (cumulative, ending in +Inf), _sum and _count samples; `counts` holds
  // the observations per bucket (not cumulative), one more than `bounds` (the +Inf bucket).
  void histogram(const std::string& name, const MetricLabels& labels,
                 const std::vector<double>& bounds, const std::vector<double>& counts, double sum);
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// The families every Prometheus client library exports for its process (process_cpu_seconds_total,
// process_resident_memory_bytes, process_start_time_seconds, ...), read from /proc/self; on a
// system without /proc they are left out.
void append_process_metrics(MetricsText& m);
// psbed_build_info{version=...} 1: which build answers, as exporters name it.
void append_build_info(MetricsText& m);

std::string escape_label_value(const std::string& v);
// A number as Prometheus reads it: integers without a fraction, NaN and infinities spelled out.
std::string metric_number(double v);

}  // namespace psbed::ps
