#include "worker/ps_worker.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/stats.hpp"
#include "core/straggler.hpp"
#include "core/trace.hpp"
#include "ps/client.hpp"
#include "ps/control.hpp"
#include "ps/node_link.hpp"
#include "ps/stop_signals.hpp"
#include "worker/arrivals.hpp"
#include "worker/batcher.hpp"
#include "worker/comm_switch.hpp"
#include "worker/evaluate.hpp"
#include "worker/net.hpp"
#include "worker/replay_net.hpp"
#include "worker/scheduler.hpp"
#include "worker/sfb.hpp"
#include "worker/train.hpp"
#include "workloads/dataset.hpp"

namespace psbed::worker {

void save_params(const std::string& path, const std::vector<std::vector<float>>& tensors) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error("cannot write parameters to '" + path + "'");
  for (const auto& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data()), std::streamsize(t.size() * 4));
  if (!out) throw Error("writing parameters to '" + path + "' failed");
}

namespace {

class PsWorker {
 public:
  PsWorker(const WorkerOptions& opt, ps::StopSignals& signals)
      : opt_(opt), signals_(signals), trace_(opt.node.name, !opt.node.trace_dir.empty()) {}

  int run() {
    // The trace is written when the worker stops: a folder it cannot write in is said now, not
    // after the run.
    ensure_writable_dir(opt_.node.trace_dir, "--trace-dir");
    set_compute_threads(opt_.threads);
    require_device(opt_.device);  // before joining: a worker without its GPU never joins
    // Data first: the coordinator needs the training-set size to turn epochs into steps.
    const ModelSpec local = load_model(opt_.model);
    // A bad --compute or profile fails here, before the cluster waits for this worker.
    const std::string replay = replay_profile_path(opt_.compute);
    std::optional<Profile> profile;
    if (!replay.empty()) {
      profile = Profile::load(replay);
      profile->check_matches(local, "profile '" + replay + "'");
    }
    if (!opt_.straggler.empty()) parse_straggler_keys(opt_.straggler, slow_);
    keys_ = ps::node_keys(opt_.node.keys, opt_.node.key_file, opt_.node.name);
    // The factor port is bound before joining: its address goes into the registration.
    sfb_ = std::make_unique<FactorExchange>(opt_.peer_bind);
    ps::NodeLink link({opt_.node.coordinator, "worker", opt_.node.name, sfb_->address(),
                       opt_.node.connect_timeout_s, opt_.node.heartbeat_s,
                       opt_.node.coordinator_timeout_s, keys_});
    // SIGTERM or SIGINT: training stops at the next step boundary (see stop_reason below).
    const ps::StopHook hook(signals_, [this, &link](int sig) {  // removed before `link` goes
      link.stop("stopped by " + ps::StopSignals::name(sig));
      std::lock_guard<std::mutex> lock(watch_mu_);
      stop_signalled_ = true;
      watch_cv_.notify_all();
    });
    try {
      const int status = run_joined(link, local, replay, profile);
      if (status == ps::kStoppedStatus) log_stopped(link);
      return status;
    } catch (const std::exception& e) {
      if (!link.stopped().empty()) {  // the step or evaluation in flight was cut short
        // The coordinator counts a registered worker, even before the cluster map came, and
        // would otherwise notice only when its heartbeats stop.
        if (!joined_) {
          spdlog::warn("{} {} {}", opt_.node.name, link.stopped(), link.leave_before_start());
          return ps::kStoppedStatus;
        }
        link.leave(link.stopped() + " after " + std::to_string(done_steps_) + " steps", 0.5);
        log_stopped(link);
        return ps::kStoppedStatus;
      }
      // A worker failing after it registered says why at once: the coordinator logs it and
      // counts it out of barriers and clocks now, rather than when its heartbeats stop.
      if (link.registered() && !link.shutdown_requested()) link.leave(e.what(), 0.5);
      throw;
    }
  }

 private:
  // After a stop signal the step in flight finishes, however long it takes while transfers keep
  // completing (a slow link, a long step); a step waiting on a shard that is gone never would,
  // so it is cut short once the compute thread has waited this long with nothing arriving.
  static constexpr double kGiveUpUs = 1e6;
  // A wait this long with nothing arriving is told to the coordinator, which names it if the run
  // stalls (a lost message, a deadlock, a shard that stopped answering).
  static constexpr double kTellWaitUs = 2e6;
  static constexpr const char* kRoomToSend = "room to send on a full link";

  // Runs while the worker trains and evaluates. It tells the coordinator of a long wait (once
  // per wait). After a stop signal it watches for the compute thread stuck on the servers
  // (kGiveUpUs with nothing arriving), then gives up: it stops the client, which also frees a
  // thread waiting for room to send to a shard that is gone, and the waits end with the stop.
  void watch_for_stuck(ps::PsClient& client, ps::NodeLink& link) {
    std::unique_lock<std::mutex> lock(watch_mu_);
    double told = -1;  // last_moved_us() of the wait already told
    bool signalled = false;
    while (!watch_done_) {
      if (stop_signalled_ && !signalled) {
        signalled = true;
        // A part arriving just now is not known: the wait counts from the signal at the earliest.
        progress_.moved();
      }
      if (signalled && progress_.stuck_for(kGiveUpUs)) {
        gave_up_ = true;
        lock.unlock();
        client.stop();
        pulls_.wake();
        pushes_.wake();
        return;
      }
      if (!signalled && progress_.stuck_for(kTellWaitUs) && progress_.last_moved_us() != told) {
        told = progress_.last_moved_us();
        lock.unlock();
        std::string on = progress_.what();
        if (const std::string out = client.describe_outstanding(); !out.empty())
          on += ": oldest, " + out;
        link.try_send_control({{"event", "waiting"}, {"step", step_.load()}, {"on", on}});
        lock.lock();
        continue;
      }
      watch_cv_.wait_for(lock, std::chrono::milliseconds(signalled ? 50 : 250),
                         [&] { return watch_done_ || (stop_signalled_ && !signalled); });
    }
  }

  // Loads the data and joins the cluster with it; refuses a cluster whose model or input this
  // worker's does not fit.
  std::unique_ptr<workloads::Split> join_cluster(ps::NodeLink& link, const ModelSpec& local) {
    auto data = std::make_unique<workloads::Split>(
        workloads::load_dataset(opt_.data, opt_.data_dir, local.input, local.classes, 1));
    workloads::standardize(*data);
    // The coordinator's live policy switch: taken up at the next step boundary.
    link.on_control([this](const nlohmann::json& j) {
      comm_switch_.on_control(j);
      if (j.value("event", "") == "worker_dead") sfb_->peer_dead(j.value("worker", -1));
      if (j.value("event", "") == "server_dead")
        fail_over(j.value("server", -1), j.value("to", -1), j.value("to_address", ""));
      if (j.value("event", "") != "set_policy") return;
      std::lock_guard<std::mutex> lock(ctl_mu_);
      pending_policy_ = j;
    });
    // The model and data it brings, so that the coordinator refuses a mismatch at registration,
    // leaving the slot to a worker that fits, rather than the run losing it after the start.
    link_id_ = ps::PsClient::make_link_id(opt_.node.name);
    map_ = link.join({{"link_id", link_id_},
                      {"train_size", data->train.size()},
                      {"data", data->description},
                      {"dataset", opt_.data},
                      {"model", local.name},
                      {"parameters", local.parameter_count()},
                      {"layers", local.layers.size()}});
    const ModelSpec& spec = map_.spec;
    if (local.parameter_count() != spec.parameter_count() ||
        local.layers.size() != spec.layers.size())
      throw Error("this worker's model '" + opt_.model + "' (" +
                  std::to_string(local.parameter_count()) + " parameters) is not the cluster's '" +
                  spec.name + "' (" + std::to_string(spec.parameter_count()) + ")");
    if (!(data->train.shape.c == spec.input.c && data->train.shape.h == spec.input.h &&
          data->train.shape.w == spec.input.w))
      throw Error("data " + data->description + " has samples of " + data->train.shape.str() +
                  " but the model " + spec.name + " takes " + spec.input.str());
    id_ = link.id();
    joined_ = true;
    choose_route();
    return data;
  }

  // Why a wait on the servers ends with the run, or "" while it goes on.
  std::string stop_reason(ps::NodeLink& link) const {
    if (const ps::PsClient* c = client_.load(); c)
      if (std::string why = c->refusal(); !why.empty()) return why;
    if (!link.shutdown_requested()) return "";
    const std::string lost = link.coordinator_lost();
    if (!lost.empty()) return lost;
    if (const std::string why = link.stopped(); !why.empty())
      return gave_up_ ? why + ", the step in flight cut short" : "";
    if (const std::string why = link.ended_because(); !why.empty()) return "the run failed: " + why;
    return "told to stop by the coordinator (the run ended, or this worker was declared dead)";
  }

  // After joining: the waits' way out, the trace's description of this worker, the net.
  void set_up(ps::NodeLink& link, const std::string& replay,
              const std::optional<Profile>& profile) {
    pulls_.set_abort([this, &link] { return stop_reason(link); });
    pushes_.set_abort([this, &link] { return stop_reason(link); });
    pulls_.set_progress(&progress_);
    pushes_.set_progress(&progress_);
    sfb_->set_abort([this, &link] { return stop_reason(link); });
    sfb_->set_progress(&progress_);
    sfb_->set_trace(&trace_);
    comm_switch_.set_up(
        map_, id_, opt_.node.name, trace_, progress_, [this, &link] { return stop_reason(link); },
        [this](const CommPlan& p) {
          return comm_refusal(p, keys_.on(), opt_.device, opt_.compute);
        });
    const auto& exp = map_.exp;
    trace_.set_metadata("role", "worker");
    trace_.set_metadata("clock_sync", link.clock_sync());
    trace_.set_metadata("cluster", map_.to_json()["experiment"]);
    trace_.set_metadata("compute", replay.empty() ? "real" : opt_.compute);
    trace_.set_metadata("threads", opt_.threads);
    trace_.set_metadata("straggle_ms", opt_.straggle_ms);
    trace_.set_metadata("straggler", {{"compute_factor", slow_.compute_factor},
                                      {"bandwidth_bytes_per_sec", slow_.bandwidth_bytes_per_sec}});
    trace_.set_metadata("start_stagger_ms", opt_.start_stagger_ms);

    replay_ = !replay.empty();
    net_ = replay_ ? make_replay_net(map_.spec, exp.batch, exp.seed + std::uint64_t(id_), *profile,
                                     "profile '" + replay + "'", slow_.compute_factor)
                   : make_net(opt_.device, map_.spec, exp.batch, exp.seed);
  }

  // A step cut short (the coordinator gone, or this worker declared dead) still leaves the
  // trace of the steps before it.
  struct TraceOnError {
    PsWorker* self;
    bool armed = true;
    ~TraceOnError() {
      if (!armed) return;
      try {
        self->write_trace();
      } catch (const std::exception&) {
      }
    }
  };

  // What the steps share: the objects they drive, and what the loop keeps from step to step for
  // the progress reports and the final report.
  struct Training {
    Training(ps::NodeLink& link, ps::PsClient& client, TransmissionScheduler& sched,
             Batcher& batcher, std::int64_t warmup, std::size_t image_floats, std::size_t batch)
        : link(link),
          client(client),
          sched(sched),
          batcher(batcher),
          warmup(warmup),
          pull_all_first(sched.policy().pull_all_before_forward()),
          images(image_floats),
          labels(batch) {}
    ps::NodeLink& link;
    ps::PsClient& client;
    TransmissionScheduler& sched;
    Batcher& batcher;
    std::int64_t warmup;
    bool pull_all_first;
    std::vector<float> images;
    std::vector<std::int32_t> labels;
    double steady_start = 0, steady_cpu = 0, last_report = now_us();
    double loss = 0,
           first_loss = 0;  // the last step's and the first's (is training going anywhere?)
    std::int64_t report_steps = 0;
    // For the coordinator's live view: link use per interval and each step's time.
    std::uint64_t last_pushed = 0, last_pulled = 0;
    nlohmann::json step_ms = nlohmann::json::array();
    std::int64_t done_steps = 0;
    std::int64_t first_step = 0;  // a resumed run's first
    double last_step_end = 0;
    std::vector<double> step_end_us;  // for the steady window of a run cut short
  };

  int run_joined(ps::NodeLink& link, const ModelSpec& local, const std::string& replay,
                 const std::optional<Profile>& profile) {
    const std::unique_ptr<workloads::Split> data = join_cluster(link, local);
    set_up(link, replay, profile);
    const ModelSpec& spec = map_.spec;
    const int workers = int(map_.workers.size());
    const auto& exp = map_.exp;
    const ps::LinkOptions shaping = ps::parse_link(opt_.node.bandwidth, opt_.node.latency);
    // A straggler's own link (both directions) at its rate; the trace's "link" stays the
    // cluster's, which the predictor reads from worker-0.
    ps::LinkOptions own = shaping;
    if (slow_.bandwidth_bytes_per_sec > 0) own.bandwidth_bps = slow_.bandwidth_bytes_per_sec * 8;
    const auto buckets = ps::LinkBuckets::make(own);  // one NIC: shards and peers share it
    ps::PsClient client(map_, id_, link_id_, buckets, keys_);
    sfb_->start(map_, id_, comm_, buckets);
    client_ = &client;
    fail_over_with(&client);
    struct Unset {
      PsWorker* self;
      ~Unset() { self->client_ = nullptr, self->fail_over_with(nullptr); }
    } unset{this};
    // Declared after the client: it ends first.
    struct Watch {
      PsWorker* self;
      std::thread thread;
      ~Watch() {
        {
          std::lock_guard<std::mutex> lock(self->watch_mu_);
          self->watch_done_ = true;
        }
        self->watch_cv_.notify_all();
        if (thread.joinable()) thread.join();
      }
    } watch{this, std::thread([this, &client, &link] { watch_for_stuck(client, link); })};
    // A shard whose advertised address leads nowhere would leave the first step waiting forever.
    // Nothing is in flight yet: a stop ends this wait at once.
    client.check_shards(opt_.node.connect_timeout_s, [&] {
      const std::string why = stop_reason(link);
      return why.empty() ? link.stopped() : why;
    });
    trace_.set_metadata("link", shaping.str());
    net_->set_trace(&trace_, [this] { return step_.load(); });  // GPU copies: h2d/d2h lanes
    Batcher batcher(data->train, id_, workers, exp.batch, exp.seed);
    batcher.skip(exp.resume_step);  // a resumed run: the batches it would have seen next
    spdlog::info(
        "{} (worker {} of {}): {} on {}, {} steps of batch {} from a shard of {} samples, mode {}",
        opt_.node.name, id_, workers, spec.name, opt_.device, exp.steps, exp.batch,
        batcher.shard_size(), exp.mode.str());

    size_layers();
    // Every transfer goes through the policy; completions count floats per layer (a policy may
    // slice parts), and are traced.
    TransmissionScheduler sched(
        client, policy::make_policy(exp.policy),
        [this](const policy::Transfer& t) {
          const Part& p = map_.plan.parts[t.part];
          float* base = t.dir == policy::Direction::kPull ? net_->param(p.key)
                                                          : const_cast<float*>(net_->grad(p.key));
          return base + p.offset + t.offset;
        },
        [this](const policy::Transfer& t, double t0, std::uint64_t clock) {
          if (t.dir != policy::Direction::kFactors) record_transfer(t, t0, clock);
          (t.dir == policy::Direction::kPull ? pulls_ : pushes_).done(t.layer, t.count);
        });
    sched.set_trace(&trace_);
    // Ends before `sched`: no answer still on its way (bsp push-pull) reaches a freed scheduler.
    struct StopClient {
      ps::PsClient& client;
      ~StopClient() { client.stop(); }
    } stop_client{client};
    if (exp.push_pull)  // bsp, ssp: answers on their way at a step's start are awaited
      sched.set_push_pull(
          [this](const policy::Transfer& t) {
            const Part& p = map_.plan.parts[t.part];
            return net_->param(p.key) + p.offset + t.offset;
          },
          exp.mode.kind != Consistency::Kind::kAsync,
          [this](int layer, std::int64_t floats) { pulls_.done(layer, floats); });
    sched.set_factor_sender(
        [this](const policy::Transfer& t, std::uint64_t clock, std::function<void()> left) {
          sfb_->send_to(t, std::int64_t(clock), std::move(left));
        });
    const std::int64_t first = exp.resume_step;  // > 0: resumed from a checkpoint
    Training tr(link, client, sched, batcher, first + warmup_steps(exp.steps - first),
                std::size_t(spec.input.numel()) * exp.batch, std::size_t(exp.batch));
    trace_.set_metadata("policy", sched.policy().name());
    if (opt_.start_stagger_ms > 0) {
      const double t0 = now_us();
      const double delay_ms = opt_.start_stagger_ms * id_ / workers;
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
      trace_.complete("start-delay", "compute", t0, -1);
    }
    TraceOnError trace_on_error{this};
    tr.last_step_end = now_us();
    tr.step_end_us.reserve(std::size_t(std::min<std::int64_t>(exp.steps, 1 << 20)));
    // An interrupted run (the coordinator's shutdown says "interrupted") ends the step in flight
    // at once; the steps done before it are reported.
    tr.first_step = tr.done_steps = first;
    if (first > 0) spdlog::info("{} resumes at step {}", opt_.node.name, first);
    for (std::int64_t s = first; s < exp.steps && !link.shutdown_requested(); ++s) try {
        train_step(tr, s);
      } catch (const Error&) {
        if (!link.stopped().empty()) break;  // a stop signal: the step in flight is not counted
        if (!link.shutdown_requested() || link.shutdown_reason() != "interrupted") throw;
        break;
      }
    return finish(tr, trace_on_error, data->test);
  }

  // A straggler's real compute (--straggler compute=Kx): after what started at t0, a sleep of
  // (K - 1) x what it took, inside that layer's trace event. Replay scales its sleeps instead.
  void stretch(double t0) const {
    if (replay_ || slow_.compute_factor <= 1) return;
    std::this_thread::sleep_for(
        std::chrono::duration<double, std::micro>((slow_.compute_factor - 1) * (now_us() - t0)));
  }

  // One training step: pull (as the policy sends), forward layer by layer as the parameters
  // arrive, backward handing each layer's gradients over, then wait for the pushes' acks.
  void train_step(Training& tr, std::int64_t s) {
    const ModelSpec& spec = map_.spec;
    const auto& exp = map_.exp;
    if (s == tr.warmup) tr.steady_start = now_us(), tr.steady_cpu = process_cpu_s();
    step_ = s;
    if (auto j = take_pending_policy()) {
      switch_policy(tr.sched, tr.link, *j, s);
      tr.pull_all_first = tr.sched.policy().pull_all_before_forward();
    }
    if (comm_switch_.at_boundary(tr.link, tr.client, *sfb_, *net_, s, comm_)) size_layers();
    const double step_t0 = now_us();
    pulls_.reset(layer_floats_);
    pushes_.reset(sfb_->with_factor_sends(layer_floats_));  // the factors leave in the step
    std::vector<policy::Transfer> parts;
    for (int i = 0; i < int(map_.plan.parts.size()); ++i)
      if (!sfb_->exchanges(layer_of(i)))
        parts.push_back({policy::Direction::kPull, i, layer_of(i), 0, map_.plan.parts[i].numel});
    // --push-pull: last step's pushes brought parts back, or will (bsp, ssp).
    parts = tr.sched.still_to_pull(parts, std::uint64_t(s),
                                   [this](int l, std::int64_t n) { pulls_.done(l, n); });
    {
      // Sends wait for room on a full link: a wait on the servers, as for their answers.
      Progress::Waiting waiting(progress_, kRoomToSend);
      tr.sched.begin_step(std::uint64_t(s));
      tr.sched.need(parts);
    }
    if (tr.pull_all_first) pulls_.wait_all("every parameter (the policy pulls all before forward)");
    const double batch_t0 = now_us();
    tr.batcher.next(tr.images.data(), tr.labels.data());
    net_->set_batch(tr.images.data(), tr.labels.data(), exp.batch);
    stretch(batch_t0);
    for (int l = 0; l < net_->num_layers(); ++l) {
      pulls_.wait_layer(l, "the parameters of layer " + spec.layers[l].name);
      if (sfb_->exchanges(l)) sfb_->apply_until(l, s - staleness_, *net_);
      for (int t : spec.layers[l].tensors) net_->params_updated(t);
      const double t0 = now_us();
      net_->forward(l);
      stretch(t0);
      trace_.complete("fwd:" + spec.layers[l].name, "compute", t0, s);
    }
    tr.loss = net_->compute_loss().loss;
    if (s == tr.first_step) tr.first_loss = tr.loss;
    for (int l = net_->num_layers() - 1; l >= 0; --l) {
      const double t0 = now_us();
      net_->backward(l);
      stretch(t0);
      trace_.complete("bwd:" + spec.layers[l].name, "compute", t0, s);
      parts.clear();
      if (sfb_->exchanges(l))
        parts = sfb_->stage(l, s, *net_);  // one transfer per peer
      else
        for (int t : spec.layers[l].tensors)
          for (int i : map_.plan.parts_of_key[t])
            parts.push_back({policy::Direction::kPush, i, l, 0, map_.plan.parts[i].numel});
      if (!parts.empty()) {
        Progress::Waiting waiting(progress_, kRoomToSend);
        tr.sched.ready(parts);
      }
    }
    if (opt_.straggle_ms > 0) {
      const double t0 = now_us();
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt_.straggle_ms));
      trace_.complete("straggle", "compute", t0, s);
    }
    {
      Progress::Waiting waiting(progress_, kRoomToSend);
      tr.sched.backward_done();
    }
    pushes_.wait_all("the acks of its pushes");
    trace_.complete("step", "step", step_t0, s);
    tr.step_ms.push_back(std::round((now_us() - step_t0) / 10) / 100);
    ++tr.report_steps;
    if (now_us() - tr.last_report >= opt_.progress_every_s * 1e6 || s + 1 == exp.steps)
      report_progress(tr, s);
    tr.done_steps = s + 1;
    done_steps_ = tr.done_steps;
    tr.last_step_end = now_us();
    tr.step_end_us.push_back(tr.last_step_end);
  }

  // The coordinator's live view, every progress_every_s and after the last step.
  void report_progress(Training& tr, std::int64_t s) {
    const auto& exp = map_.exp;
    const double dt = (now_us() - tr.last_report) / 1e6;
    const std::uint64_t pushed = tr.client.bytes_pushed(), pulled = tr.client.bytes_pulled();
    tr.link.send_control({{"event", "progress"},
                          {"step", s + 1},
                          {"loss", tr.loss},
                          {"policy", tr.sched.policy().name()},
                          {"steps_per_sec", tr.report_steps / dt},
                          {"images_per_sec", tr.report_steps * exp.batch / dt},
                          {"bytes_pushed", pushed},
                          {"bytes_pulled", pulled},
                          {"bytes_pushed_per_sec", (pushed - tr.last_pushed) / dt},
                          {"bytes_pulled_per_sec", (pulled - tr.last_pulled) / dt},
                          {"step_ms", std::move(tr.step_ms)}});
    tr.last_report = now_us();
    tr.report_steps = 0;
    tr.last_pushed = pushed, tr.last_pulled = pulled;
    tr.step_ms = nlohmann::json::array();
  }

  // After the steps: the report to the coordinator, the evaluation, the wait for the shutdown,
  // the trace.
  int finish(Training& tr, TraceOnError& trace_on_error, const workloads::Dataset& test) {
    ps::NodeLink& link = tr.link;
    ps::PsClient& client = tr.client;
    const auto& exp = map_.exp;
    const std::int64_t done_steps = tr.done_steps;
    trace_.set_metadata("steps_done", done_steps);  // fewer than planned in a run cut short
    if (done_steps < exp.steps && link.stopped().empty() && link.coordinator_lost().empty())
      spdlog::warn("{} stopped after {} of {} steps: {}", opt_.node.name, done_steps, exp.steps,
                   link.ended_because().empty()
                       ? std::string("the coordinator ended the run")
                       : "the coordinator ended the run: " + link.ended_because());
    const double end = tr.last_step_end;
    double steady_start = tr.steady_start;
    // What this process spent over the steady steps (compute, transfers, everything): the
    // profile's host cost per message comes from it.
    if (done_steps > tr.warmup)
      trace_.set_metadata(
          "cpu_steady",
          {{"from_us", steady_start}, {"to_us", end}, {"cpu_s", process_cpu_s() - tr.steady_cpu}});
    // A run cut short before its warm-up ended: the same rule over the steps it did.
    std::int64_t first_steady = tr.warmup;
    if (const std::int64_t did = done_steps - tr.first_step; done_steps <= tr.warmup && did >= 2) {
      const std::int64_t k = std::min<std::int64_t>(std::max<std::int64_t>(1, did / 20), did / 2);
      first_steady = tr.first_step + k;
      steady_start = tr.step_end_us[std::size_t(k - 1)];
    }
    const std::int64_t steady_steps = std::max<std::int64_t>(0, done_steps - first_steady);
    const double steady_s = steady_steps > 0 ? (end - steady_start) / 1e6 : 0.0;
    nlohmann::json report = {
        {"event", "report"},
        {"steps", done_steps},
        {"first_loss", tr.first_loss},
        {"final_loss", tr.loss},
        {"steady_steps", steady_steps},
        {"steps_per_sec", steady_s > 0 ? steady_steps / steady_s : 0.0},
        {"images_per_sec", steady_s > 0 ? steady_steps * exp.batch / steady_s : 0.0},
        {"bytes_pushed", client.bytes_pushed()},
        {"bytes_pulled", client.bytes_pulled()},
        {"policy_switches", switches_},
        {"comm", comm_json(comm_, map_.spec)},
        {"comm_switches", comm_switch_.switches()},
        {"bytes_factors", sfb_->bytes_sent()},
        {"factors_refused", sfb_->refused().total()}};
    // Stopped by a signal, at any point from here on: the coordinator gets what this worker
    // measured and that it is leaving, without waiting on a coordinator that may be gone.
    auto stop_now = [&] {
      link.leave(link.stopped() + " after " + std::to_string(done_steps) + " steps", 0.5, report);
      client.stop();
      write_trace();
      trace_on_error.armed = false;
      return ps::kStoppedStatus;
    };
    if (!link.stopped().empty()) return stop_now();
    link.send_control(report);
    spdlog::info("{} trained {} steps: {:.1f} steps/s, {:.0f} images/s steady", opt_.node.name,
                 done_steps, report["steps_per_sec"].get<double>(),
                 report["images_per_sec"].get<double>());
    link.barrier("trained");
    if (!link.stopped().empty()) return stop_now();
    if (link.evaluator() == id_) evaluate(client, link, test);
    link.wait_shutdown(600);
    if (!link.stopped().empty()) return stop_now();
    client.stop();
    write_trace();
    trace_on_error.armed = false;  // written: an evaluation cut short above still writes it
    if (const std::string lost = link.coordinator_lost(); !lost.empty())  // the trace is kept
      throw Error(lost + "; stopped after " + std::to_string(done_steps) + " of " +
                  std::to_string(exp.steps) + " steps");
    return 0;
  }

  void write_trace() {
    if (opt_.node.trace_dir.empty()) return;
    std::filesystem::create_directories(opt_.node.trace_dir);
    const std::string path = opt_.node.trace_dir + "/" + opt_.node.name + ".trace.json";
    trace_.write(path);
    trace_path_ = path;
  }

  // The one line a worker stopped after it joined leaves.
  void log_stopped(const ps::NodeLink& link) {
    spdlog::warn(
        "{} {} after {} steps (of {}){}{}", opt_.node.name, link.stopped(), done_steps_,
        map_.exp.steps,
        gave_up_ ? "; the step in flight cut short: nothing arrived from the servers for 1 s" : "",
        trace_path_.empty() ? std::string() : "; trace in " + trace_path_);
  }

  std::optional<nlohmann::json> take_pending_policy() {
    std::lock_guard<std::mutex> lock(ctl_mu_);
    auto j = std::move(pending_policy_);
    pending_policy_.reset();
    return j;
  }

  // --replicas 2: shard `dead` is gone and shard `to` serves its parts; the requests it did not
  // answer go there (from the coordinator's thread, or when the client exists).
  // `address`: where `to` serves, when it rejoined at another address than the map's.
  void fail_over(int dead, int to, const std::string& address) {
    std::lock_guard<std::mutex> lock(client_mu_);
    failovers_.emplace_back(dead, to, address);
    if (live_client_) fail_over_now(dead, to, address);
  }
  void fail_over_with(ps::PsClient* c) {
    std::lock_guard<std::mutex> lock(client_mu_);
    live_client_ = c;
    if (c)
      for (const auto& [dead, to, address] : failovers_) fail_over_now(dead, to, address);
  }
  void fail_over_now(int dead, int to, const std::string& address) {
    const std::size_t resent = live_client_->fail_over(dead, to, address);
    const auto name = [this](int s) {
      return s >= 0 && s < int(map_.servers.size()) ? map_.servers[std::size_t(s)].name
                                                    : "shard " + std::to_string(s);
    };
    const std::string note = name(to) + " serves " + name(dead) + "'s parts; " +
                             std::to_string(resent) + " request(s) resent to it";
    TraceEvent e;
    e.name = "failover:" + name(dead), e.lane = "control", e.ts_us = now_us(), e.dur_us = 0;
    e.step = step_.load(), e.note = note;
    trace_.record(std::move(e));
    spdlog::warn("{}: {}", opt_.node.name, note);
  }

  // Nothing is in flight between steps, so the new policy starts on a clean slate. The trace
  // gets a mark on the control lane; the coordinator hears the step.
  void switch_policy(TransmissionScheduler& sched, ps::NodeLink& link, const nlohmann::json& j,
                     std::int64_t step) {
    const std::uint64_t seq = j.value("seq", std::uint64_t(0));
    try {
      const policy::PolicyOptions o = ps::policy_from_json(j.at("policy"));
      const std::string was = sched.policy().name();
      sched.set_policy(policy::make_policy(o));
      TraceEvent e;
      e.name = "policy:" + o.name, e.lane = "control", e.ts_us = now_us(), e.dur_us = 0,
      e.step = step;
      e.note = "switched from " + was + " to " + ps::describe_policy(o);
      trace_.record(std::move(e));
      switches_.push_back({{"step", step}, {"policy", o.name}, {"seq", seq}});
      spdlog::info("{}: policy {} from step {} (was {})", opt_.node.name, ps::describe_policy(o),
                   step, was);
      link.send_control(
          {{"event", "policy_switched"}, {"seq", seq}, {"step", step}, {"policy", o.name}});
    } catch (const std::exception& e) {
      spdlog::error("{}: policy switch {} refused: {}", opt_.node.name, seq, e.what());
    }
  }

  int layer_of(int part_index) const {
    return map_.spec.tensors[map_.plan.parts[part_index].key].layer;
  }

  // "pull:conv1.weight#0" on the pull lane, from request to arrival (push: to acknowledgment);
  // a slice of a part keeps the part's name and carries its own bytes.
  void record_transfer(const policy::Transfer& t, double t0, std::uint64_t clock) {
    if (!trace_.enabled()) return;
    const Part& part = map_.plan.parts[t.part];
    const char* lane = t.dir == policy::Direction::kPull ? "pull" : "push";
    TraceEvent e;
    e.name = std::string(lane) + ":" + map_.spec.tensors[part.key].name + "#" +
             std::to_string(part.part);
    e.lane = lane, e.ts_us = t0, e.dur_us = now_us() - t0, e.step = step_;
    e.bytes = t.bytes(), e.key = part.key, e.part = part.part, e.priority = t.layer,
    e.has_priority = true;
    // A push starts the flow of this step's update; a pull ends the flow of the last step's.
    if (t.dir == policy::Direction::kPush) {
      e.flow = transfer_flow_id(id_, part.key, part.part, t.offset, std::int64_t(clock));
      e.flow_out = true;
    } else if (clock > 0) {
      e.flow = transfer_flow_id(id_, part.key, part.part, t.offset, std::int64_t(clock) - 1);
      e.flow_in = true;
    }
    trace_.record(std::move(e));
  }

  void evaluate(ps::PsClient& client, ps::NodeLink& link, const workloads::Dataset& test) {
    if (replay_) {
      spdlog::info("{}: compute replay trains nothing; no test accuracy", opt_.node.name);
      link.send_control({{"event", "evaluated"}, {"note", "compute replay: no accuracy"}});
      return;
    }
    pulls_.reset(layer_floats_);
    // The factor layers' parameters are this worker's own, once the last step's are applied.
    for (int l = 0; l < net_->num_layers(); ++l)
      if (sfb_->exchanges(l)) sfb_->apply_until(l, map_.exp.steps, *net_);
    {
      Progress::Waiting waiting(progress_, kRoomToSend);  // a pull may wait for room
      for (int i = 0; i < int(map_.plan.parts.size()); ++i) {
        const Part& p = map_.plan.parts[i];
        const int layer = layer_of(i);
        if (sfb_->exchanges(layer)) continue;
        client.pull(i, net_->param(p.key) + p.offset, 0, p.numel, std::uint64_t(map_.exp.steps),
                    layer, [this, layer, n = p.numel] { pulls_.done(layer, n); });
      }
    }
    pulls_.wait_all("the final parameters, to evaluate them");
    net_->all_params_updated();
    const double acc = evaluate_accuracy(*net_, test);
    spdlog::info("{}: test accuracy of the final parameters {:.2f}% on {} samples", opt_.node.name,
                 100 * acc, test.size());
    if (!opt_.save_params.empty()) {
      std::vector<std::vector<float>> tensors;
      for (int t = 0; t < int(map_.spec.tensors.size()); ++t)
        tensors.emplace_back(net_->param(t), net_->param(t) + map_.spec.tensors[t].numel);
      save_params(opt_.save_params, tensors);
    }
    link.send_control({{"event", "evaluated"}, {"test_accuracy", acc}});
  }

  // --comm against the cluster's, then the per-layer route (core/comm.hpp), said once.
  void choose_route() {
    const auto& exp = map_.exp;
    if (!opt_.comm.empty() && opt_.comm != exp.comm)
      throw Error("this worker's --comm " + opt_.comm + " is not the cluster's " + exp.comm +
                  " (leave --comm out to take the cluster's)");
    const CommMode mode = parse_comm(exp.comm);
    if (const std::string why = comm_problem(mode, exp.mode); !why.empty()) throw Error(why);
    comm_ = choose_comm(map_.spec, mode, int(map_.workers.size()), int(map_.servers.size()),
                        exp.batch, exp.comm_cost());
    staleness_ = exp.mode.kind == Consistency::Kind::kSsp ? exp.mode.staleness : 0;
    if (const std::string why = comm_refusal(comm_, keys_.on(), opt_.device, opt_.compute);
        !why.empty())
      throw Error(why);
    spdlog::info("{}: comm {}: {}", opt_.node.name, exp.comm, comm_.describe(map_.spec));
    trace_.set_metadata("comm", comm_json(comm_, map_.spec));
  }

  // Floats per layer that go through the shards (the rest go as factors).
  void size_layers() {
    layer_floats_.assign(map_.spec.layers.size(), 0);
    for (const auto& p : map_.plan.parts)
      if (!sfb_->exchanges(map_.spec.tensors[p.key].layer))
        layer_floats_[map_.spec.tensors[p.key].layer] += p.numel;
  }

  WorkerOptions opt_;
  ps::StopSignals& signals_;
  TraceRecorder trace_;
  std::string trace_path_;  // once written
  bool joined_ = false;
  std::int64_t done_steps_ = 0;
  // The watch for a stop stuck on the servers (watch_for_stuck).
  Progress progress_;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stop_signalled_ = false;  // guarded by watch_mu_
  bool watch_done_ = false;      // guarded by watch_mu_
  std::atomic<bool> gave_up_{false};
  ps::ClusterMap map_;
  std::string link_id_;                               // this worker's identity towards the shards
  std::atomic<const ps::PsClient*> client_{nullptr};  // while run_joined's client lives
  ps::CurveKeys keys_;                                // --keys: CURVE on every link
  std::unique_ptr<Net> net_;
  int id_ = 0;
  std::vector<std::int64_t> layer_floats_;
  std::unique_ptr<FactorExchange> sfb_;  // the fc layers sent as factors (--comm sfb, hybrid)
  CommPlan comm_;
  CommSwitch comm_switch_;      // a live --comm switch (psbed ctl comm)
  std::int64_t staleness_ = 0;  // ssp:K's K: forward of step s needs factors up to s - K - 1
  std::atomic<std::int64_t> step_{0};
  Arrivals pulls_, pushes_;
  bool replay_ = false;
  Straggler slow_;  // --straggler: this worker's compute factor and own link rate
  std::mutex ctl_mu_;
  std::mutex client_mu_;  // live_client_ and failovers_
  ps::PsClient* live_client_ = nullptr;
  std::vector<std::tuple<int, int, std::string>> failovers_;  // (dead, successor, its address)
  std::optional<nlohmann::json> pending_policy_;
  nlohmann::json switches_ = nlohmann::json::array();
};

}  // namespace

int run_worker(const WorkerOptions& in) {
  WorkerOptions opt = in;
  if (opt.node.name.empty()) opt.node.name = "worker-" + std::to_string(::getpid());
  ps::parse_link(opt.node.bandwidth,
                 opt.node.latency);  // a bad --bandwidth/--latency fails before joining
  ps::StopSignals signals;           // before any thread starts: they all leave the signals to it
  PsWorker w(opt, signals);
  return w.run();
}

}  // namespace psbed::worker
