// The workers: the live worker's step (pull, forward layer by layer as parts arrive, backward,
// push) and the transmission scheduler's loop around the policy.
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor::sim {

// `cpu`: the worker's own computation (not a deliberate sleep), which with real compute waits
// for one of the host's cores and holds it throughout. `rebuild`: the factors' products, real
// work on a core under compute replay too (replay sleeps for forward and backward only), and
// not stretched for a straggler (the live worker stretches forward and backward alone).
void Simulation::start_compute(Worker& w, int wi, double seconds, bool cpu, bool rebuild) {
  w.computing = true;
  w.compute_started = now_;
  const bool on_core = cpu && (cfg_.compute_on_cores || rebuild) && !cores_.empty();
  // A straggler's own computation takes its factor times as long; on the cores, as the live
  // worker's real compute, the CPU first and then a sleep of (factor - 1) x what that took.
  const double factor = cpu && !rebuild ? compute_factor_[std::size_t(wi)] : 1.0;
  if (on_core) {
    booked_cpu_s_ += seconds * cfg_.compute_cpu_scale;
    const double end = run_on_core(now_, seconds * cfg_.compute_cpu_scale);
    schedule(end + (factor - 1) * (end - now_), EventType::kComputeDone, wi);
  } else {
    schedule(now_ + seconds * factor, EventType::kComputeDone, wi);
  }
}

// Runs the worker's step forward until it must wait for compute or a transfer.
void Simulation::advance(int wi) {
  Worker& w = workers_[wi];
  while (!w.computing) {
    if (bucket_ && threads_[wi].blocked) return;  // waits in a send for room in the buffer
    switch (w.phase) {
      case Phase::kStart: {
        if (w.step == 0 && !w.started) {  // as launch --start-stagger-ms
          w.started = true;
          const double delay = cfg_.start_stagger_s * wi / W_ + start_delay_[wi];
          if (delay > 0) {
            start_compute(w, wi, delay);
            break;
          }
        }
        if (w.step == warmup_) w.steady_start = now_;
        w.step_started = now_;
        w.pulls_left = layer_floats_;
        w.pulls_total = total_floats_;
        w.pushes_total = total_floats_ + factor_send_floats_;  // the step's factors leave in it
        w.driver.begin_step(now_, std::uint64_t(w.step));
        for (int i = 0; i < int(plan_.parts.size()); ++i) {
          const std::int64_t n = plan_.parts[i].numel;
          if (factors_.sfb[std::size_t(part_layer_[i])]) continue;
          // Push-pull: last step's pushes brought the part back, or will (bsp, ssp), as the live
          // worker's TransmissionScheduler::still_to_pull.
          const PushPullAnswers::Plan plan = cfg_.push_pull
                                                 ? w.answers.plan(i, n, std::uint64_t(w.step))
                                                 : PushPullAnswers::Plan{};
          if (!plan.pull) {
            w.pulls_left[part_layer_[i]] -= plan.have;
            w.pulls_total -= plan.have;
          } else {
            w.driver.parameter_needed(now_, {Direction::kPull, i, part_layer_[i], 0, n});
          }
        }
        pump(wi, true);
        w.phase = Phase::kOverhead;
        break;
      }
      case Phase::kOverhead:
        // Batch loading runs while the pulls are in flight, except under "pull everything first".
        if (w.driver.policy().pull_all_before_forward() && w.pulls_total > 0) return;
        w.phase = Phase::kOverheadRunning;
        start_compute(w, wi, w.sampler.step_overhead_s(), true);
        break;
      case Phase::kOverheadRunning:  // only reached through compute_done
        w.phase = Phase::kForward, w.layer = 0;
        break;
      case Phase::kForward:
        if (w.layer == L_) {
          w.phase = Phase::kBackward, w.layer = L_ - 1;
          break;
        }
        if (w.pulls_left[w.layer] > 0) return;
        if (sfb_layer(w.layer) >= 0 && !factors_ready(w, wi)) {
          if (w.computing) break;  // rebuilding
          return;                  // waits for peers' factors
        }
        start_compute(w, wi, w.sampler.forward_s(w.layer), true);
        break;
      case Phase::kBackward:
        if (w.layer < 0) {
          w.phase = Phase::kStraggle;
          break;
        }
        start_compute(w, wi, w.sampler.backward_s(w.layer), true);
        break;
      case Phase::kStraggle:
        // As `psbed launch --straggler-ms`: worker-0 sleeps after backward, before backward_done.
        if (wi == 0 && cfg_.straggler_s > 0 && !w.straggled) {
          w.straggled = true;
          start_compute(w, wi, cfg_.straggler_s);
          break;
        }
        w.straggled = false;
        w.driver.backward_done(now_);
        pump(wi, true);
        w.phase = Phase::kWaitPush;
        break;
      case Phase::kWaitPush:
        if (w.pushes_total > 0) return;
        if (w.trace) record(*w.trace, "step", "step", w.step_started, now_, w.step);
        ++w.step;
        if (w.step == cfg_.steps) {
          w.end = now_;
          w.phase = Phase::kDone;
          return;
        }
        w.phase = Phase::kStart;
        break;
      case Phase::kDone:
        return;
    }
  }
}

void Simulation::compute_done(int wi) {
  Worker& w = workers_[wi];
  w.computing = false;
  if (w.rebuilding >= 0) {
    rebuild_done(w);  // the forward of the layer comes next
  } else if (w.phase == Phase::kForward) {
    if (w.trace)
      record(*w.trace, "fwd:" + spec_.layers[w.layer].name, "compute", w.compute_started, now_,
             w.step);
    ++w.layer;
  } else if (w.phase == Phase::kBackward) {
    const int l = w.layer;
    if (w.trace)
      record(*w.trace, "bwd:" + spec_.layers[l].name, "compute", w.compute_started, now_, w.step);
    for (int i : parts_of_layer_[l])
      w.driver.gradient_ready(now_, {Direction::kPush, i, l, 0, plan_.parts[i].numel});
    if (sfb_layer(l) >= 0) factors_ready_to_send(w, wi, l);  // no parts: factors for the peers
    if (!parts_of_layer_[l].empty() || (sfb_layer(l) >= 0 && W_ > 1)) pump(wi, true);
    --w.layer;
  } else if (w.phase == Phase::kStraggle) {
    if (w.trace) record(*w.trace, "straggle", "compute", w.compute_started, now_, w.step);
  } else if (w.phase == Phase::kStart) {
    if (w.trace) record(*w.trace, "start-delay", "compute", w.compute_started, now_, -1);
  }
  advance(wi);  // kOverheadRunning moves on to the first forward there
}

// The transmission scheduler's loop: take whatever the policy lets go now. With bucket links
// the calling thread (compute, or the one receiving replies) hands them to the send buffer and
// waits there while it is full. The policy chooses them all before the first is issued, as in
// the live scheduler; issuing only schedules events and never comes back to the policy, so
// this is the same as choosing and issuing one at a time.
void Simulation::pump(int wi, bool from_compute) {
  Worker& w = workers_[wi];
  const int thread = from_compute ? wi : W_ + wi;
  sends_.clear();
  w.driver.take_sends(now_, sends_);
  for (const Transfer& t : sends_) {
    if (t.dir == Direction::kFactors) {
      issue_factors(wi, thread, t);
      continue;
    }
    const int shard = plan_.parts[t.part].shard;
    if (t.dir == Direction::kPull) {
      const int id = new_message({MsgKind::kPullRequest, wi, shard, t, w.step, now_});
      if (bucket_) {
        send_from(thread, id);
      } else {
        // A request is a header only: on fair links it costs latency, not bandwidth.
        arrive(id, now_ + cfg_.latency_s);
      }
    } else {
      if (cfg_.push_pull) w.answers.pushed(t.part, t.count);  // its answer follows
      const int id = new_message({MsgKind::kPushData, wi, shard, t, w.step, now_});
      if (bucket_)
        send_from(thread, id);
      else
        send(push_channel(wi, shard), id);
    }
  }
}

void Simulation::transfer_done(const Message& m) {
  const int wi = m.worker;  // `m` is not read after pump, whose sends may reuse its id
  Worker& w = workers_[wi];
  if (m.kind == MsgKind::kPullReply && m.answer_later) {
    // A push-pull's floats after its ack: awaited by the step, or kept for the next one.
    if (w.answers.answered(m.t.part, m.t.count, std::uint64_t(m.clock))) {
      w.pulls_left[m.t.layer] -= m.t.count;
      w.pulls_total -= m.t.count;
      advance(wi);
    }
    return;
  }
  w.driver.acked(now_, m.t);
  if (w.trace) record_transfer(w, m);
  if (m.kind == MsgKind::kPullReply && m.t.dir == Direction::kPull) {
    w.pulls_left[m.t.layer] -= m.t.count;
    w.pulls_total -= m.t.count;
  } else {
    w.pushes_total -= m.t.count;
    // Push-pull in async: the answer ends the push.
    if (m.kind == MsgKind::kPullReply)
      w.answers.answered(m.t.part, m.t.count, std::uint64_t(m.clock));
  }
  pump(wi, false);
  advance(wi);
}

}  // namespace psbed::predictor::sim
