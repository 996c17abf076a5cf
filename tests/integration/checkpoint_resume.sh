#!/usr/bin/env bash
# --checkpoint-every and --resume: a bsp run whose every process is SIGKILLed mid-run restarts
# from the newest step both shards checkpointed, and finishes the steps left; a truncated or
# damaged checkpoint is refused in one line naming the file.
source "$(dirname "$0")/lib.sh"
need_data

run="$WORK/run"
"$PSBED" launch --servers 2 --workers 2 --model lenet5 --data mnist --steps 3000 --batch 32 \
  --lr 0.05 --mode bsp --checkpoint-every 100 --timeout 300 --out "$run" >"$WORK/first.out" 2>&1 &
launch=$!
PIDS+=($launch)
ready=""
for _ in $(seq 1 400); do  # 40 s at most for two checkpoints of both shards (a loaded host)
  n=$(ls "$run/checkpoints" 2>/dev/null | grep -c '\.ckpt$' || true)
  [ "$n" -ge 4 ] && { ready=1; break; }
  sleep 0.1
done
[ -n "$ready" ] || { tail -20 "$WORK/first.out"; fail "no two checkpoints of both shards within 40 s"; }
# Every process at once: the launcher and each node (each in a process group of its own).
pids="$(pgrep -f -- "exe (coordinator|server|worker) .*$run/" | tr '\n' ' ') $launch"
kill -KILL $pids
wait "$launch" 2>/dev/null || true
[ ! -s "$run/summary.json" ] || { echo "pids: $pids"; cat "$WORK/first.out"; head -c 600 "$run/summary.json"; fail "a run killed mid-way wrote a summary"; }
step=$(ls "$run/checkpoints" | sed -n 's/^shard-1\.step-\([0-9]*\)\.ckpt$/\1/p' | sort -n | tail -1)
[ -f "$run/checkpoints/shard-0.step-$step.ckpt" ] || step=$((step - 100))
[ "$step" -gt 0 ] || fail "no checkpoint step found"
ls "$run/checkpoints" | grep -q '\.tmp$' && echo "(a checkpoint was being written at the kill)"

# --- a damaged, a truncated and an oversized copy are refused, naming the file ---
for how in truncated damaged oversized; do
  cp -r "$run" "$WORK/$how"
  rm -rf "$WORK/$how/attempt-"*
  f="$WORK/$how/checkpoints/shard-1.step-$step.ckpt"
  # The newest complete step is the one refused: later files of one shard only are ignored.
  ls "$WORK/$how/checkpoints" | sed -n 's/^\(shard-[0-9]*\.step-\)\([0-9]*\)\.ckpt$/\2 &/p' |
    awk -v s="$step" '$1 > s {print $2}' | while read -r later; do rm "$WORK/$how/checkpoints/$later"; done
  if [ "$how" = truncated ]; then
    truncate -s 1000 "$f"
  elif [ "$how" = oversized ]; then
    # A well-formed file (length and checksum right) whose part says 2^62 floats: n * 4 wraps.
    python3 - "$f" <<'PY'
import struct, sys
body = b"PSBDCKPT" + struct.pack("<IIIIQQI", 1, 1, 2, 1, 100, 0, 6) + b"lenet5"
body += struct.pack("<IIQQ", 0, 0, 0, 1 << 62)
h = 1469598103934665603
for byte in body:
    h = ((h ^ byte) * 1099511628211) % (1 << 64)
open(sys.argv[1], "wb").write(body + struct.pack("<QQ", len(body), h))
PY
  else
    printf '\x01' | dd of="$f" bs=1 seek=200 conv=notrunc status=none
  fi
  rc=0
  timeout 30 "$PSBED" launch --resume "$WORK/$how" >"$WORK/$how.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || { cat "$WORK/$how.out"; fail "a $how checkpoint: launch exited $rc, expected 1"; }
  [ "$(wc -l <"$WORK/$how.out")" = 1 ] || { cat "$WORK/$how.out"; fail "a $how checkpoint: not one line"; }
  want=$how
  [ "$how" = oversized ] && want="damaged: its contents run past its length"
  grep -q "checkpoint $f is .*$want" "$WORK/$how.out" || { cat "$WORK/$how.out"; fail "the $how file is not named"; }
done

# --- checkpoints need --comm ps: under sfb the workers hold the fc layers ---
rc=0
"$PSBED" launch --comm sfb --mode bsp --checkpoint-every 100 --out "$WORK/sfb" >"$WORK/sfb.out" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "checkpoint-every and --resume need --comm ps" "$WORK/sfb.out" ||
  { cat "$WORK/sfb.out"; fail "--comm sfb with --checkpoint-every was not refused (exit $rc)"; }

# --- other flags with --resume are refused: the run's own settings are kept ---
rc=0
"$PSBED" launch --resume "$run" --workers 3 >"$WORK/flags.out" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/flags.out"; fail "--resume with --workers: exit $rc, expected 2"; }

# --- the resumed run goes on from the checkpoint's step and finishes ---
timeout 300 "$PSBED" launch --resume "$run" >"$WORK/resume.out" 2>&1 ||
  { tail -20 "$WORK/resume.out"; fail "the resumed run failed"; }
grep -q "resuming $run from step $step" "$WORK/resume.out" || fail "launch did not say the step it resumes from"
for w in worker-0 worker-1; do
  grep -q "$w resumes at step $step" "$run/logs/$w.log" || fail "$w did not resume at step $step"
done
for s in 0 1; do
  grep -q "shard $s resumed from $run/checkpoints/shard-$s.step-$step.ckpt" "$run/logs/server-$s.log" ||
    fail "server-$s did not load its checkpoint"
done
s="$run/summary.json"
json "$s" 'sys.exit(0 if s["ok"] else 1)' || fail "the resumed run's summary is not ok"
json "$s" 'sys.exit(0 if s["checkpoints"]["resumed_from_step"] == '"$step"' else 1)' ||
  fail "the summary does not say the step it resumed from"
json "$s" 'sys.exit(0 if all(w["steps"] == 3000 for w in s["per_worker"]) else 1)' ||
  fail "the workers did not reach the run's last step"
[ -d "$run/attempt-1/logs" ] || fail "the killed attempt's logs were not kept aside"

# --- a finished run is not resumed (its tail would be trained again) ---
rc=0
timeout 30 "$PSBED" launch --resume "$run" >"$WORK/again.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "the run finished (its summary.json says ok): nothing to resume" "$WORK/again.out" ||
  { cat "$WORK/again.out"; fail "resuming a finished run: exit $rc, expected 1 and the reason"; }
[ -f "$run/summary.json" ] || fail "refusing to resume moved the finished run's summary"
echo "PASS"
