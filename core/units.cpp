#include "core/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace psbed {
namespace {

// Splits "12.5MiB" into 12.5 and "mib" (suffix lower-cased); throws on anything else.
std::pair<double, std::string> split_number(const std::string& text, const char* what) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw Error("bad " + std::string(what) + " '" + text + "': expected a number with a unit");
  }
  if (!std::isfinite(value) || value < 0)
    throw Error("bad " + std::string(what) + " '" + text + "': expected a non-negative number");
  std::string suffix;
  for (size_t i = pos; i < text.size(); ++i)
    if (!std::isspace(static_cast<unsigned char>(text[i])))
      suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  return {value, suffix};
}

// The value in the base unit, at most `max` of it: past the bound a value is no setting anyone
// means, and a conversion to a whole number (bytes, nanoseconds) would overflow (--credit 1e19
// became -9223372036854775808 bytes).
double lookup(const std::string& text, const char* what, const std::string& expected,
              const std::vector<std::pair<const char*, double>>& units, double max,
              const char* max_text) {
  auto [value, suffix] = split_number(text, what);
  for (const auto& [name, scale] : units) {
    if (suffix != name) continue;
    if (!(value * scale <= max))
      throw Error("bad " + std::string(what) + " '" + text + "': at most " + max_text);
    return value * scale;
  }
  throw Error("bad " + std::string(what) + " '" + text + "': unknown unit '" + suffix +
              "', expected " + expected);
}

}  // namespace

std::uint64_t parse_bytes(const std::string& text) {
  double v = lookup(text, "size", "B, KiB, MiB, GiB, KB, MB or GB",
                    {{"", 1},
                     {"b", 1},
                     {"kib", 1024.0},
                     {"mib", 1024.0 * 1024},
                     {"gib", 1024.0 * 1024 * 1024},
                     {"kb", 1e3},
                     {"mb", 1e6},
                     {"gb", 1e9},
                     {"k", 1024.0},
                     {"m", 1024.0 * 1024},
                     {"g", 1024.0 * 1024 * 1024}},
                    kMaxBytes, "1 PiB (1125899906842624 bytes)");
  return static_cast<std::uint64_t>(std::llround(v));
}

double parse_bandwidth_bps(const std::string& text) {
  // A bare number would be bits/s: `--bandwidth 100` (meant as Mbit/s) stalled a run for an hour.
  const auto [value, suffix] = split_number(text, "bandwidth");
  if (suffix.empty() && value != 0)
    throw Error("bad bandwidth '" + text + "': give its unit, bit, kbit, mbit or gbit (e.g. " +
                text + "mbit; 0: unshaped)");
  // tc reads "gbps" as gigabytes per second, 8 times what the same word means to most people:
  // refused, with the two readings spelled out.
  for (const char* bytes_unit : {"kbps", "mbps", "gbps"})
    if (suffix == bytes_unit) {
      const std::string prefix(1, bytes_unit[0]);
      throw Error("bad bandwidth '" + text + "': '" + bytes_unit +
                  "' is ambiguous (tc reads it as bytes per second); write " + prefix +
                  "bit for bits per second (e.g. " + text.substr(0, text.size() - 4) + prefix +
                  "bit)");
    }
  // "Gbit/s", as psbed prints a rate, reads back.
  std::string plain = text;
  if (plain.size() > 2 && plain.compare(plain.size() - 2, 2, "/s") == 0)
    plain.resize(plain.size() - 2);
  return lookup(plain, "bandwidth", "bit, kbit, mbit or gbit (or Kbit/s, Mbit/s, Gbit/s)",
                {{"", 1}, {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}},
                kMaxBandwidthBps, "10000gbit (10 Tbit/s)");
}

double parse_duration_s(const std::string& text) {
  // A bare number would be seconds: `--latency 200` meant 200 us and stalled a run for an hour.
  const auto [value, suffix] = split_number(text, "duration");
  if (suffix.empty() && value != 0)
    throw Error("bad duration '" + text + "': give its unit, ns, us, ms or s (e.g. " + text +
                "us)");
  return lookup(
      text, "duration", "ns, us, ms, s, min or h",
      {{"", 1}, {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"min", 60}, {"h", 3600}},
      kMaxDurationS, "86400s (a day)");
}

double parse_duration_in(const std::string& text, double bare_unit_s, double max_s) {
  const auto [value, suffix] = split_number(text, "duration");
  if (suffix.empty()) {
    if (!(value * bare_unit_s <= max_s))
      throw Error("bad duration '" + text + "': at most " + format_seconds(max_s) + " s");
    return value * bare_unit_s;
  }
  return lookup(text, "duration", "ns, us, ms, s, min or h",
                {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"min", 60}, {"h", 3600}},
                max_s, (format_seconds(max_s) + " s").c_str());
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (bytes >= 1024 && i < 4) bytes /= 1024, ++i;
  char buf[32];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f %s" : "%.2f %s", bytes, units[i]);
  return buf;
}

std::string format_bandwidth(double bps) {
  const char* units[] = {"bit/s", "Kbit/s", "Mbit/s", "Gbit/s"};
  int i = 0;
  while (bps >= 1000 && i < 3) bps /= 1000, ++i;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", bps, units[i]);
  return buf;
}

std::string format_seconds(double s) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  std::string t = buf;
  if (t.find('.') != std::string::npos) {
    while (!t.empty() && t.back() == '0') t.pop_back();
    if (!t.empty() && t.back() == '.') t.pop_back();
  }
  return t;
}

}  // namespace psbed
