// Sufficient factors in the event flow (SimConfig::comm): an SFB layer is neither pulled nor
// pushed. After its backward a worker hands its policy one factor transfer per peer, and what the
// policy lets go crosses its own links (the same buckets or fair shares as its shard traffic);
// a transfer completes when its bytes have left the sender, as live; before the layer's next
// forward it rebuilds and applies what the live worker's FactorExchange::apply_until would
// (worker/sfb.cpp): in bsp every complete step, so step s waits for every worker's factors of step
// s - 1; in ssp:K each worker's factors as they came, step s waiting for those of step s - K - 1.
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor::sim {

namespace {

// One worker's factors of `step` reached the holder of `s` (or were its own).
void note_factors(FactorState& s, std::int64_t step, int workers) {
  ++s.got[step];
  ++s.arrived;
  for (auto it = s.got.find(s.complete); it != s.got.end() && it->second == workers;
       it = s.got.find(s.complete)) {
    s.got.erase(it);
    ++s.complete;
  }
}

}  // namespace

void Simulation::set_up_factors() {
  sfb_index_.assign(std::size_t(L_), -1);
  if (!factors_.any()) return;
  for (int w = 0; w < W_; ++w)
    for (int p = 0; p < W_; ++p) {
      Channel& c = channels_[factor_channel(w, p)];
      c.up_link = 2 * w, c.down_link = 2 * p + 1;
    }
  for (std::size_t f = 0; f < factors_.layers.size(); ++f) {
    const int layer = factors_.layers[f].layer;
    sfb_index_[std::size_t(layer)] = int(f);
    factor_send_floats_ +=
        factor_floats(spec_.layers[std::size_t(layer)], profile_.batch) * std::int64_t(W_ - 1);
    // One worker's product, K x M by K x N, is 2KMN flops: those of the layer's forward, so it
    // takes what the profile measured for that forward (its rate on a GEMM of that size).
    rebuild_product_s_.push_back(profile_.mean_forward_ms(layer) * 1e-3);
    // The optimizer step on the rebuilt gradient is the shard's (the same sgd_apply), at the
    // profile's apply cost.
    std::int64_t bytes = 0;
    for (int t : spec_.layers[std::size_t(layer)].tensors) bytes += spec_.tensors[t].numel * 4;
    rebuild_apply_s_.push_back(profile_.apply_overhead_us * 1e-6 +
                               profile_.apply_ns_per_byte * 1e-9 * double(bytes));
  }
  for (Worker& w : workers_) w.factors.assign(factors_.layers.size(), FactorState{});
}

// Before the forward of SFB layer w.layer: starts the rebuild of whatever may be applied now,
// as apply_until does (bsp: every complete step, all workers' products each; ssp: every
// worker's factors that arrived, one product and one optimizer step each), and false while it
// runs or while the steps the consistency model needs are incomplete.
bool Simulation::factors_ready(Worker& w, int wi) {
  const int f = sfb_layer(w.layer);
  FactorState& s = w.factors[std::size_t(f)];
  const bool ssp = cfg_.mode.kind == Consistency::Kind::kSsp;
  const std::int64_t applies = ssp ? s.arrived - s.applied : s.complete - s.applied_steps;
  if (applies > 0) {
    const std::int64_t products = ssp ? applies : applies * W_;
    w.rebuilding = f, w.rebuild_products = products, w.rebuild_steps = ssp ? 0 : applies;
    start_compute(w, wi,
                  double(products) * rebuild_product_s_[std::size_t(f)] +
                      double(applies) * rebuild_apply_s_[std::size_t(f)],
                  true, true);
    return false;
  }
  return s.complete >= w.step - (ssp ? cfg_.mode.staleness : 0);
}

void Simulation::rebuild_done(Worker& w) {
  FactorState& s = w.factors[std::size_t(w.rebuilding)];
  s.applied += w.rebuild_products;
  s.applied_steps += w.rebuild_steps;
  // Named by the last step it rebuilt, as the live trace names it.
  if (w.trace)
    record(*w.trace, "rebuild:" + spec_.layers[std::size_t(w.layer)].name, "compute",
           w.compute_started, now_, w.rebuild_steps > 0 ? s.applied_steps - 1 : w.step - 1);
  w.rebuilding = -1;
}

// After the backward of SFB layer `layer`: the worker's own factors count for the step, and its
// factors for every peer go to the policy as one transfer per peer, starting with the peer after
// it, as the live worker's FactorExchange::stage hands them over.
void Simulation::factors_ready_to_send(Worker& w, int wi, int layer) {
  FactorState& s = w.factors[std::size_t(sfb_layer(layer))];
  note_factors(s, w.step, W_);
  const std::int64_t floats = factor_floats(spec_.layers[std::size_t(layer)], profile_.batch);
  s.issued = -1, s.in_flight = W_ - 1;
  for (int i = 1; i < W_; ++i)
    w.driver.gradient_ready(now_, {Direction::kFactors, (wi + i) % W_, layer, 0, floats});
}

// The policy let a peer's factors go: over the worker's links to that peer (bucket links: from
// the thread that pumped, which waits there while the connection's send buffer is full).
void Simulation::issue_factors(int wi, int thread, const Transfer& t) {
  Worker& w = workers_[std::size_t(wi)];
  FactorState& s = w.factors[std::size_t(sfb_layer(t.layer))];
  if (s.issued < 0) s.issued = now_;
  const int id = new_message({MsgKind::kFactors, wi, t.part, t, w.step, now_});
  if (bucket_)
    send_from(thread, id);
  else
    send(factor_channel(wi, t.part), id);
}

// A factor message's bytes left its sender. The ack is an event of its own at this instant: this
// runs inside a send, where the policy must not be asked again.
void Simulation::factor_departed(const Message& m) {
  workers_[std::size_t(m.worker)].factors_gone.push_back(m.t);
  schedule(now_, EventType::kFactorsLeft, m.worker);
}

// As the live scheduler's completion: out of the bytes in flight, and the policy asked again.
void Simulation::factors_left(int wi) {
  Worker& w = workers_[std::size_t(wi)];
  const Transfer t = w.factors_gone.front();
  w.factors_gone.pop_front();
  w.driver.acked(now_, t);
  w.pushes_total -= t.count;
  FactorState& s = w.factors[std::size_t(sfb_layer(t.layer))];
  if (--s.in_flight == 0 && w.trace)
    record(*w.trace, "factors:" + spec_.layers[std::size_t(t.layer)].name, "sfb", s.issued, now_,
           w.step);
  pump(wi, false);
  advance(wi);
}

// A peer's factors reached a worker's factor thread: counted, and the worker goes on if it
// waited for them.
void Simulation::factors_arrived(int id) {
  const Message m = messages_[id];
  free_messages_.push_back(id);
  Worker& w = workers_[std::size_t(m.shard)];
  note_factors(w.factors[std::size_t(sfb_layer(m.t.layer))], m.clock, W_);
  advance(m.shard);
}

}  // namespace psbed::predictor::sim
