// Human units on the command line and in TOML: sizes ("4MiB", "40000"), bandwidths ("1gbit",
// "100mbit"), durations ("200us", "1.5s"). Each parser throws psbed::Error naming the text
// and what was expected.
#pragma once
#include <cstdint>
#include <string>

namespace psbed {

// The largest value each parser takes (larger ones are refused, naming the bound): far beyond
// any real setting, and exact in a double and an int64_t.
constexpr double kMaxBytes = 1125899906842624.0;  // 1 PiB
constexpr double kMaxBandwidthBps = 1e13;         // 10 Tbit/s
constexpr double kMaxDurationS = 86400;           // a day

// Bytes. Binary suffixes (KiB, MiB, GiB) are powers of 1024, decimal ones (KB, MB, GB) of 1000;
// a bare number is bytes.
std::uint64_t parse_bytes(const std::string& text);
// Bits per second. "1gbit", "100mbit", "500kbit", "1Gbit/s"; "gbps" (and mbps, kbps) is refused
// with a hint, since tc reads it as bytes per second. Only 0 may go without a unit.
double parse_bandwidth_bps(const std::string& text);
// Seconds. Suffixes ns, us, ms, s, min, h; only 0 may go without a unit.
double parse_duration_s(const std::string& text);
// Seconds, for a flag that has always taken a bare number in its own unit (`--timeout 3600`
// seconds, `--straggler-ms 50`): a bare number is `bare_unit_s` seconds each, a unit as above.
// At most `max_s`.
double parse_duration_in(const std::string& text, double bare_unit_s, double max_s);

std::string format_bytes(double bytes);    // "4.00 MiB"
std::string format_bandwidth(double bps);  // "1.00 Gbit/s"
// Seconds as given in a log line: "0.5", "2.25", "30" (two decimals at most, none when whole).
// A cast to int printed --connect-timeout 0.5 as "within 0 s".
std::string format_seconds(double s);

}  // namespace psbed
