#include <algorithm>
#include <cmath>

#include "workloads/dataset.hpp"

namespace psbed::workloads {

ChannelStats standardize(Split& split) {
  const Shape s = split.train.shape;
  const std::int64_t plane = std::int64_t(s.h) * s.w;
  ChannelStats st;
  st.mean.assign(s.c, 0.0);
  st.std.assign(s.c, 0.0);
  const std::size_t n = split.train.size();
  for (std::size_t i = 0; i < n; ++i)
    for (int c = 0; c < s.c; ++c) {
      const float* p = split.train.image(i) + c * plane;
      for (std::int64_t k = 0; k < plane; ++k) st.mean[c] += p[k], st.std[c] += double(p[k]) * p[k];
    }
  for (int c = 0; c < s.c; ++c) {
    const double cnt = double(n) * plane;
    st.mean[c] /= cnt;
    st.std[c] = std::sqrt(std::max(1e-12, st.std[c] / cnt - st.mean[c] * st.mean[c]));
  }
  for (Dataset* d : {&split.train, &split.test})
    for (std::size_t i = 0; i < d->size(); ++i)
      for (int c = 0; c < s.c; ++c) {
        float* p = d->images.data() + i * s.numel() + c * plane;
        const float m = float(st.mean[c]), inv = float(1.0 / st.std[c]);
        for (std::int64_t k = 0; k < plane; ++k) p[k] = (p[k] - m) * inv;
      }
  return st;
}

}  // namespace psbed::workloads
