#include "ps/metrics.hpp"

#include <cmath>
#include <cstdio>

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

}  // namespace psbed::ps
