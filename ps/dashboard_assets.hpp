// The dashboard's files (ps/dashboard/ and the charting library fetched by
// cluster/fetch-web.sh), built into the binary by ps/dashboard/embed.cmake.
#pragma once
#include <string_view>
#include <vector>

namespace psbed::ps {

struct DashboardAsset {
  std::string_view path;  // URL path, e.g. "/" or "/uPlot.iife.min.js"
  std::string_view content_type;
  std::string_view body;
};

const std::vector<DashboardAsset>& dashboard_assets();

}  // namespace psbed::ps
