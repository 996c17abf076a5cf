// Seconds as people read them in a log line: "0.5", "2.25", "30" (two decimals at most, none
// when whole). A cast to int printed --connect-timeout 0.5 as "within 0 s".
#pragma once
#include <cstdio>
#include <string>

namespace psbed::ps {

inline std::string seconds_text(double s) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  std::string t = buf;
  if (t.find('.') != std::string::npos) {
    while (!t.empty() && t.back() == '0') t.pop_back();
    if (!t.empty() && t.back() == '.') t.pop_back();
  }
  return t;
}

}  // namespace psbed::ps
