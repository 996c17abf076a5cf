#include "predictor/sim/factors.hpp"

namespace psbed::predictor::sim {

double FactorModel::link_bytes() const {
  double bytes = 0;
  for (const FactorLayer& l : layers) bytes += l.bytes_per_peer * (workers - 1);
  return bytes;
}

double FactorModel::rebuild_flops() const {
  double flops = 0;
  for (const FactorLayer& l : layers) flops += l.rebuild_flops;
  return flops;
}

FactorModel factor_model(const ModelSpec& spec, CommMode mode, int workers, int shards, int batch,
                         const CommCost& cost) {
  const CommPlan plan = choose_comm(spec, mode, workers, shards, batch, cost);
  FactorModel m;
  m.workers = workers;
  m.sfb = plan.sfb;
  m.sfb.resize(spec.layers.size(), false);
  for (const LayerComm& c : plan.layers) {
    if (!c.sfb) continue;
    FactorLayer f;
    f.layer = c.layer;
    f.bytes_per_peer = 4.0 * double(factor_floats(spec.layers[std::size_t(c.layer)], batch));
    f.rebuild_flops = 2.0 * workers * double(batch) * double(c.m) * double(c.n);
    m.layers.push_back(f);
  }
  return m;
}

double factor_step_floor(const FactorModel& m, double compute_s, double link_bytes_per_s,
                         double flops_per_s) {
  return compute_s + m.link_bytes() / link_bytes_per_s + m.rebuild_flops() / flops_per_s;
}

}  // namespace psbed::predictor::sim
