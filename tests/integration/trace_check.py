"""The rules a trace viewer relies on, checked on psbed's traces (Perfetto's trace processor is
not packaged here). Usage: trace_check.py FILE... [--flows] [--counters]

- complete events ("X") of one thread nest or follow one another, never overlap otherwise;
- every async begin ("b") has one end ("e") of the same process, category and id, not before it;
- with --flows: a push that starts a flow reaches a shard's apply of the same id, and the pull of
  the next step ends it (for all but the last step's pushes);
- with --counters: the workers carry the "bytes in flight" and "bytes queued" counter tracks.
Prints one line of figures; exits 1 naming the first broken rule."""
import json
import sys
from collections import defaultdict

EPS = 1e-3  # microseconds: times are written as doubles from the same numbers


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


files = [a for a in sys.argv[1:] if not a.startswith("--")]
events = []
for f in files:
    events += json.load(open(f))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}

# Complete events: per thread, a stack of open ends.
threads = defaultdict(list)
for e in events:
    if e.get("ph") == "X":
        threads[(e["pid"], e["tid"])].append(e)
nested = 0
for (pid, tid), evs in threads.items():
    evs.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in evs:
        end = e["ts"] + e["dur"]
        while stack and stack[-1] <= e["ts"] + EPS:
            stack.pop()
        if stack:
            if end > stack[-1] + EPS:
                fail(f"{names.get(pid, pid)} thread {tid}: '{e['name']}' at {e['ts']} overlaps the "
                     f"slice before it without nesting (ends {end}, the enclosing one {stack[-1]})")
            nested += 1
        stack.append(end)

# Async events: begins and ends pair up.
def aid(e):
    return (e["pid"], e.get("cat"), json.dumps(e.get("id2", e.get("id"))))

begins, overlapping = {}, 0
for e in events:
    if e.get("ph") == "b":
        if aid(e) in begins:
            fail(f"{names.get(e['pid'])}: async id {aid(e)} begun twice")
        begins[aid(e)] = e
for e in events:
    if e.get("ph") == "e":
        b = begins.pop(aid(e), None)
        if b is None:
            fail(f"{names.get(e['pid'])}: an async end with no begin ({aid(e)})")
        if e["ts"] + EPS < b["ts"]:
            fail(f"{names.get(e['pid'])}: '{b['name']}' ends before it begins")
        b["end"] = e["ts"]
        begins[("done",) + aid(e)] = b
if any(k[0] != "done" for k in begins):
    fail("an async begin with no end")
transfers = defaultdict(list)
for k, b in begins.items():
    transfers[(b["pid"], b["cat"])].append((b["ts"], b["end"]))
for spans in transfers.values():
    spans.sort()
    last_end = -1e300
    for s, t in spans:
        overlapping += s < last_end - EPS
        last_end = max(last_end, t)
n_async = len(begins)

flows_ok = flows_total = 0
if "--flows" in sys.argv:
    applies = {e["bind_id"] for e in events if e.get("ph") == "X" and "bind_id" in e and e.get("flow_in") and e.get("flow_out")}
    pulls = {e["bind_id"] for e in events if e.get("ph") == "b" and e.get("cat") == "pull" and e.get("flow_in")}
    pushes = [e for e in events if e.get("ph") == "b" and e.get("cat") == "push" and e.get("flow_out")]
    if not pushes:
        fail("no push starts a flow")
    last = max(p["args"].get("step", 0) for p in pushes)
    for p in pushes:
        if p["args"].get("step", 0) >= last - 1:
            continue
        flows_total += 1
        flows_ok += p["bind_id"] in applies and p["bind_id"] in pulls
    if flows_total == 0 or flows_ok < 0.9 * flows_total:
        fail(f"only {flows_ok} of {flows_total} pushes reach a shard's apply and the next pull")

if "--counters" in sys.argv:
    for pid, name in names.items():
        if name.startswith("worker-"):
            tracks = {e["name"] for e in events if e.get("ph") == "C" and e["pid"] == pid}
            for want in ("bytes in flight", "bytes queued"):
                if want not in tracks:
                    fail(f"{name} has no '{want}' counter track")

print(f"{len(files)} file(s): {sum(len(v) for v in threads.values())} complete events on "
      f"{len(threads)} threads ({nested} nested), {n_async} async transfers ({overlapping} in flight "
      f"with an earlier one), flows {flows_ok}/{flows_total}")
