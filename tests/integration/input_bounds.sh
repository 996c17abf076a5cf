#!/usr/bin/env bash
# Inputs at the edges are bounded and checked, each refusal one line naming what was wrong, and a
# server that refuses goes on serving: numbers that overflow (--credit 1e19, "credit": "1e300"),
# a --config value with a NUL character, a profile whose host.cpus would make a prediction run
# for minutes, the HTTP API reached under a foreign Host or from a foreign Origin (a DNS-rebinding
# page), a policy name that is not UTF-8. A summary that cannot be written is an error that says
# so, and launch still prints the results the coordinator and the workers reported.
source "$(dirname "$0")/lib.sh"
need_data
type -P curl >/dev/null || skip "no curl"
unset PSBED_HTTP_TOKEN
refused() {  # refused EXPECTED-TEXT ARGS...: psbed ARGS fails within 30 s, saying EXPECTED-TEXT
  local want=$1; shift
  if timeout 30 "$PSBED" "$@" >"$WORK/refused.out" 2>&1; then fail "psbed $* was accepted"; fi
  grep -qF -- "$want" "$WORK/refused.out" || { cat "$WORK/refused.out"; fail "psbed $*: no '$want' in the error"; }
  [ "$(grep -c . "$WORK/refused.out")" -le 2 ] || { cat "$WORK/refused.out"; fail "psbed $*: more than a short error"; }
}

# Numbers past their bounds: refused, not wrapped round (1e19 bytes became -9223372036854775808).
refused "--credit: bad size '1e19': at most 1 PiB" launch --policy p3 --credit 1e19 --out "$WORK/x"
refused "--credit: bad size '1e19': at most 1 PiB" coordinator --policy p3 --credit 1e19
refused "--partition-bytes: bad size '1e300': at most 1 PiB" launch --partition-bytes 1e300 --out "$WORK/x"
refused "--latency: bad duration '1e300s': at most 86400s" launch --netns --latency 1e300s --out "$WORK/x"
refused "--steps: Value 99999999999999999999 not in range 0 to 1099511627776" launch --steps 99999999999999999999 --out "$WORK/x"
refused "--slice-params: Value 99999999999999999999 not in range 1 to 1000000000" coordinator --slice-params 99999999999999999999
refused "--progress-every: expected a number of seconds, above 0 and below 10^9, got '1e300'" train --progress-every 1e300
printf 'credit = "1e300"\npolicy = "p3"\n' >"$WORK/credit.toml"
refused "bad size '1e300': at most 1 PiB" launch --config "$WORK/credit.toml" --out "$WORK/x"

# A NUL character in a --config value: a path would end there and name another file.
printf 'out = "%s/a\\u0000b"\n' "$WORK" >"$WORK/nul.toml"
refused "'$WORK/nul.toml' line 1: 'out' holds a NUL character" launch --config "$WORK/nul.toml"
[ ! -e "$WORK/a" ] || fail "the cut-short path $WORK/a was written"

# host.cpus of 10^7 made every simulated message scan ten million cores: refused when read.
profile=$SRC/tests/fixtures/predictor/regression/profile.json
python3 - "$profile" "$WORK/cpus.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p.setdefault("host", {"cpu_per_message_us": 50.0, "cpu_per_byte_ns": 0.5})["cpus"] = 10**7
json.dump(p, open(sys.argv[2], "w"))
PY
refused "host: cpus is 10000000, expected 0 to 1024 (0: not measured)" predict --profile "$WORK/cpus.json" --workers 2
refused "host: cpus is 10000000, expected 0 to 1024" launch --profile "$WORK/cpus.json" --http :0 --out "$WORK/x"

# A live cluster with its API on loopback, predicting from a profile.
cp "$profile" "$WORK/profile.json"
timeout 150 "$PSBED" launch --servers 1 --workers 1 --model lenet5 --data mnist --steps 100000 --batch 32 \
  --lr 0.02 --http :0 --profile "$WORK/profile.json" --out "$WORK/run" >"$WORK/run.out" 2>&1 &
live=$!
PIDS+=($live)
[ -n "$(node_pid worker-0)" ] || { tail -5 "$WORK/run.out"; fail "worker-0 never started"; }
url=$(cat "$WORK/run/logs/coordinator.http")
port=${url##*:}; port=${port%/}
# code METHOD PATH [curl args...]: prints the status code, the body goes to $WORK/body
code() { local m=$1 p=$2; shift 2; curl -s -o "$WORK/body" -w '%{http_code}' -X "$m" "$@" "http://127.0.0.1:$port$p"; }
expect() { [ "$1" = "$2" ] || { cat "$WORK/body"; fail "$3: expected $2, got $1"; }; }
said() { grep -qF -- "$1" "$WORK/body" || { cat "$WORK/body"; fail "no '$1' in the answer"; }; }

expect "$(code GET /api/status)" 200 "status under 127.0.0.1"
expect "$(code GET /api/status -H "Host: localhost:$port")" 200 "status under localhost"
# What a DNS-rebinding page sends: its own name as Host and as Origin.
expect "$(code GET /api/status -H "Host: rebind.example:$port" -H "Origin: http://rebind.example:$port")" 403 "a foreign Host"
said "Host 'rebind.example:$port'"
expect "$(code POST /api/policy -H "Host: rebind.example:$port" -d '{"policy":"p3"}')" 403 "a switch under a foreign Host"
expect "$(code GET /api/status -H "Host: localhost:1")" 403 "another port"
expect "$(code POST /api/policy -H "Origin: https://evil.example" -d '{"policy":"p3"}')" 403 "a switch from a foreign page"
said "https://evil.example"
expect "$(code GET / -H "Origin: null")" 403 "a page from an opaque origin"
# A policy name that is not UTF-8: 400 naming the fault (it was a 500).
printf '{"policy":"\xff\xfe"}' >"$WORK/latin.json"
expect "$(code POST /api/policy --data-binary @"$WORK/latin.json")" 400 "a policy name that is not UTF-8"
said "UTF-8"
expect "$(code POST /api/policy -d '{"policy":"p3","credit":"1e300"}')" 400 "a credit of 1e300 bytes"
said "field 'credit': bad size '1e300': at most 1 PiB"
# The prediction is computed away from the HTTP thread; status answers throughout.
code GET /api/prediction >"$WORK/prediction.code" &
pred=$!
expect "$(code GET /api/status)" 200 "status while a prediction runs"
wait "$pred"
[ "$(cat "$WORK/prediction.code")" = 200 ] || fail "/api/prediction: $(cat "$WORK/prediction.code")"
expect "$(code GET /api/prediction)" 200 "the prediction again"
json "$WORK/body" 'sys.exit(0 if s["images_per_sec"] > 0 else 1)' || { cat "$WORK/body"; fail "no predicted images/s"; }
expect "$(code GET /api/status)" 200 "status after every refusal"
kill -INT "$live"
wait "$live" || true

# A summary that cannot be written (its path taken by a folder mid-run): said, naming the file and
# the reason; launch exits non-zero and still prints what the run measured.
timeout 150 "$PSBED" launch --servers 1 --workers 1 --model lenet5 --data mnist --steps 1000 --batch 32 \
  --lr 0.02 --out "$WORK/ro" >"$WORK/ro.out" 2>&1 &
launcher=$!
PIDS+=($launcher)
for _ in $(seq 1 100); do grep -q "steps of batch" "$WORK/ro/logs/worker-0.log" 2>/dev/null && break; sleep 0.1; done
mkdir "$WORK/ro/summary.json"
rc=0; wait "$launcher" || rc=$?
[ "$rc" != 0 ] || { cat "$WORK/ro.out"; fail "launch exited 0 without its summary"; }
grep -qF "cannot write '$WORK/ro/summary.json': Is a directory" "$WORK/ro.out" ||
  { cat "$WORK/ro.out"; fail "the unwritten summary is not named with its reason"; }
grep -qF "== results (not written: $WORK/ro/summary.json could not be) ==" "$WORK/ro.out" ||
  { cat "$WORK/ro.out"; fail "no results heading"; }
grep -qF "== summary (" "$WORK/ro.out" && { cat "$WORK/ro.out"; fail "a summary heading for a summary never written"; }
grep -q "^test accuracy: [0-9.]*%" "$WORK/ro.out" || { cat "$WORK/ro.out"; fail "the accuracy worker-0 reported was dropped"; }
echo "input bounds: every refusal named, the server kept serving, the unwritten summary said"
