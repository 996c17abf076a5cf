#!/usr/bin/env bash
# The container files, checked without a Docker engine or a cluster: docker-compose.yml with
# `docker-compose config -q` (every profile, and as the swarm stack file), the Kubernetes
# manifests and the compose file with cluster/check-manifests.py (which also has to catch broken
# copies), the Dockerfile's COPY sources, and cluster/runtime-packages.sh on the built binary.
source "$(dirname "$0")/lib.sh"
command -v docker-compose >/dev/null 2>&1 || fail "docker-compose not found: run cluster/install-deps.sh (Debian package docker-compose)"
PY=python3
$PY -c 'import yaml' 2>/dev/null || PY=/usr/bin/python3
$PY -c 'import yaml' 2>/dev/null || fail "no python3 with PyYAML: run cluster/install-deps.sh (Debian package python3-yaml)"
COMPOSE="$SRC/docker-compose.yml"
# compose as a user with nothing set sees it, and with settings of their own.
dc() { env -i PATH="$PATH" HOME="$WORK" "$@"; }

dc docker-compose -f "$COMPOSE" config -q || fail "docker-compose config -q rejects docker-compose.yml"
dc docker-compose -f "$COMPOSE" --profile gpu --profile predict --profile monitoring config -q ||
  fail "config -q rejects the gpu/predict/monitoring profiles"
dc PSBED_WORKERS=8 PSBED_MODE=ssp:2 PSBED_BANDWIDTH=1gbit PSBED_SHAPE=tc docker-compose -f "$COMPOSE" config -q ||
  fail "config -q rejects docker-compose.yml with settings"
dc docker-compose -f "$COMPOSE" config >"$WORK/resolved.yml" || fail "docker-compose config failed"
echo "docker-compose config -q: ok (default, the gpu, predict and monitoring profiles, with settings)"
services=$($PY -c 'import sys, yaml; print(" ".join(sorted(yaml.safe_load(open(sys.argv[1]))["services"])))' "$WORK/resolved.yml")
for s in coordinator server worker; do [[ " $services " == *" $s "* ]] || fail "resolved compose file lacks service $s (has: $services)"; done

# config -q does validate: a wrong type is refused.
sed 's/^      replicas: 2$/      replicas: many/' "$COMPOSE" >"$WORK/bad-compose.yml"
grep -q 'replicas: many' "$WORK/bad-compose.yml" || fail "could not make the bad compose file"
if dc docker-compose -f "$WORK/bad-compose.yml" config -q 2>"$WORK/bad.err"; then fail "config -q accepted replicas: many"; fi

# The swarm form.
$PY "$SRC/cluster/compose-to-stack.py" "$COMPOSE" >"$WORK/stack.yml" || fail "compose-to-stack.py failed"
dc docker-compose -f "$WORK/stack.yml" config -q || fail "docker-compose config -q rejects the stack file"
stack_services=$($PY -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); print(" ".join(sorted(d["services"])), d["version"])' "$WORK/stack.yml")
[ "$stack_services" = "coordinator server worker 3.8" ] || fail "stack file: expected services coordinator server worker, version 3.8; got $stack_services"
grep -q 'profiles:\|build:\|&id' "$WORK/stack.yml" && fail "stack file still has profiles, build or anchors"
echo "stack file: $stack_services"

# The checker on the real files (raw and resolved compose).
$PY "$SRC/cluster/check-manifests.py" || fail "check-manifests rejects the shipped files"
$PY "$SRC/cluster/check-manifests.py" --compose "$WORK/resolved.yml" >/dev/null || fail "check-manifests rejects the resolved compose file"

# ... and on broken copies: each must be refused with a line naming the problem.
# mutate NAME PYTHON: copy cluster/k8s and docker-compose.yml, apply PYTHON (docs: {file: [docs]},
# compose: the compose dict), and expect check-manifests to fail with a line matching NAME's pattern.
mutate() {
  local what=$1 pattern=$2 code=$3 dir="$WORK/mut-$1"
  mkdir -p "$dir/k8s"
  $PY - "$SRC" "$dir" "$code" <<'EOF' || fail "mutation $1 failed"
import os, sys, yaml
src, out, code = sys.argv[1:4]
docs = {f: [d for d in yaml.safe_load_all(open(os.path.join(src, "cluster/k8s", f))) if d]
        for f in os.listdir(os.path.join(src, "cluster/k8s")) if f.endswith(".yaml")}
compose = yaml.safe_load(open(os.path.join(src, "docker-compose.yml")))
def find(kind, name):
    return next(d for ds in docs.values() for d in ds if d["kind"] == kind and d["metadata"]["name"] == name)
def pod(kind, name):
    return find(kind, name)["spec"]["template"]["spec"]
def vol(kind, name, volume):
    return next(v for v in pod(kind, name)["volumes"] if v["name"] == volume)
exec(code)
for f, ds in docs.items():
    yaml.safe_dump_all(ds, open(os.path.join(out, "k8s", f), "w"))
yaml.safe_dump(compose, open(os.path.join(out, "docker-compose.yml"), "w"))
EOF
  if $PY "$SRC/cluster/check-manifests.py" --k8s "$dir/k8s" --compose "$dir/docker-compose.yml" 2>"$dir/err"; then
    fail "check-manifests accepted the broken copy '$what'"
  fi
  grep -q -- "$pattern" "$dir/err" || { cat "$dir/err"; fail "check-manifests on '$what': no line matching '$pattern'"; }
  echo "check-manifests refuses $what: $(grep -m1 -- "$pattern" "$dir/err")"
}
mutate unknown-var "PSBED_WOKERS is not a variable" 'find("ConfigMap", "psbed")["data"]["PSBED_WOKERS"] = "4"'
mutate selector "selector .* does not match the pod labels" \
  'find("StatefulSet", "server")["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] = "shard"'
mutate service-selects-nothing "Service/server: selector .* matches no workload" \
  'find("Service", "server")["spec"]["selector"]["app.kubernetes.io/component"] = "servers"'
mutate job-parallelism "completions 4 and parallelism 3 differ" 'find("Job", "worker")["spec"]["parallelism"] = 3'
mutate worker-count "but the ConfigMap's PSBED_WORKERS is '8'" 'find("ConfigMap", "psbed")["data"]["PSBED_WORKERS"] = "8"'
mutate role "PSBED_ROLE is 'worker', expected 'server'" \
  'find("StatefulSet", "server")["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "worker"'
mutate no-pvc "does not mount PersistentVolumeClaim/psbed-runs" \
  'find("Job", "worker")["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] = "/data"'
mutate missing-kind "expected exactly one Deployment" 'docs["coordinator.yaml"] = docs["coordinator.yaml"][1:]'
mutate compose-var "service worker: PSBED_THREAD is not a variable" 'compose["services"]["worker"]["environment"]["PSBED_THREAD"] = "2"'
mutate compose-name "has a container_name" 'compose["services"]["worker"]["container_name"] = "w"'
mutate compose-coordinator "names no service of this file" \
  'compose["services"]["server"]["environment"]["PSBED_COORDINATOR"] = "tcp://coord:7000"'

mutate key-missing "lacks worker.key of Secret/psbed-keys" \
  'v = vol("Job", "worker", "keys"); v["secret"]["items"] = v["secret"]["items"][:1]'
mutate key-of-another-role "mounts coordinator.key, another role's secret key" \
  'vol("Job", "worker", "keys")["secret"]["items"].append({"key": "coordinator.key", "path": "coordinator.key"})'

# Hygiene of every pod spec: each broken copy refused with its reason.
mutate no-limits "has no memory limit" 'del pod("StatefulSet", "server")["containers"][0]["resources"]["limits"]["memory"]'
mutate shared-cores "are not the same whole number of cores" \
  'pod("Job", "worker")["containers"][0]["resources"]["requests"]["cpu"] = "500m"'
mutate root "does not set runAsNonRoot: true" 'pod("Deployment", "coordinator")["securityContext"]["runAsUser"] = 0'
mutate net-admin "adds NET_ADMIN without PSBED_SHAPE=tc" \
  'pod("Job", "worker")["containers"][0]["securityContext"]["capabilities"]["add"] = ["NET_ADMIN"]'
mutate escalation "allows privilege escalation" \
  'pod("StatefulSet", "server")["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True'
mutate no-probe "has no readinessProbe" 'del pod("StatefulSet", "server")["containers"][0]["readinessProbe"]'
mutate exec-probe "readinessProbe is not tcpSocket or httpGet" \
  'pod("Deployment", "coordinator")["containers"][0]["readinessProbe"] = {"exec": {"command": ["true"]}}'
mutate liveness "has a livenessProbe but holds after its run" \
  'pod("StatefulSet", "server")["containers"][0]["livenessProbe"] = {"tcpSocket": {"port": 7100}}'
mutate no-instance "lacks the label app.kubernetes.io/instance" \
  'del find("Job", "worker")["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/instance"]'
mutate selector-instance "selector lacks app.kubernetes.io/instance" \
  'd = find("StatefulSet", "server"); del d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"]'
mutate image-tag "is not tagged with the project's version" \
  'pod("Job", "worker")["containers"][0]["image"] = "psbed:latest"'
mutate job-ttl "Job has no ttlSecondsAfterFinished" 'del find("Job", "worker")["spec"]["ttlSecondsAfterFinished"]'
mutate compose-net-admin "adds NET_ADMIN: only tc shaping needs it" 'compose["services"]["worker"]["cap_add"] = ["NET_ADMIN"]'
mutate compose-root "runs as root" 'compose["services"]["server"]["user"] = "0:0"'

# The CURVE overlay (docs/security.md) over keys `psbed keys` made: compose takes it, and every
# role gets PSBED_KEYS and exactly its files (its own secret key, no other role's).
"$PSBED" keys --out "$WORK/keys" --servers 0 --workers 0 --name server --name worker >/dev/null || fail "psbed keys failed"
dc PSBED_KEYS_HOST="$WORK/keys" docker-compose -f "$COMPOSE" -f "$SRC/docker-compose.secure.yml" config >"$WORK/secure.yml" ||
  fail "docker-compose config rejects docker-compose.yml with docker-compose.secure.yml"
$PY - "$WORK/secure.yml" "$WORK/keys" <<'EOF' || fail "the CURVE overlay gives a role the wrong key files"
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
want = {"coordinator": {"authorized_keys", "coordinator.pub", "coordinator.key"},
        "server": {"authorized_keys", "coordinator.pub", "server.key"},
        "worker": {"coordinator.pub", "worker.key"}}
for name, files in want.items():
    svc = d["services"][name]
    got = {s["target"] for s in svc.get("secrets", [])}
    assert svc["environment"].get("PSBED_KEYS") == "/run/secrets", f"{name}: PSBED_KEYS not /run/secrets"
    assert got == files, f"{name}: secrets {sorted(got)}, expected {sorted(files)}"
    for s in svc["secrets"]:
        assert d["secrets"][s["source"]]["file"] == sys.argv[2] + "/" + s["target"], s
print("compose CURVE overlay: each role mounts its own key files")
EOF

# The Dockerfile: what it copies from the tree exists, and it installs the entrypoint it runs.
DF="$SRC/cluster/Dockerfile"
grep -q '^ARG PSBED_BASE=debian:bookworm$' "$DF" && grep -q '^FROM ${PSBED_BASE} AS build' "$DF" ||
  fail "Dockerfile: no build stage FROM \${PSBED_BASE}, debian:bookworm by default"
while read -r path; do
  [ -e "$SRC/$path" ] || fail "Dockerfile copies $path, which is not in the tree"
done < <(awk '/^COPY / && !/--from/ { for (i = 2; i < NF; i++) print $i }' "$DF" | grep -v '^\.$')
grep -q '^COPY cluster/entrypoint.sh /usr/local/bin/psbed-entrypoint' "$DF" || fail "Dockerfile does not install cluster/entrypoint.sh as psbed-entrypoint"
grep -q '^ENTRYPOINT \["psbed-entrypoint"\]' "$DF" || fail "Dockerfile's ENTRYPOINT is not psbed-entrypoint"
grep -q 'ARG PSBED_GPU' "$DF" || fail "Dockerfile has no PSBED_GPU build argument"
# Image hygiene: a non-root user, tc usable by it, OCI labels, the project's version.
version=$(sed -n 's/^project(psbed VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
grep -qx "ARG PSBED_VERSION=$version" "$DF" || fail "Dockerfile's PSBED_VERSION is not the project's $version (CMakeLists.txt)"
user=$(awk '$1 == "USER" {u = $2} END {print u}' "$DF")
[[ -n $user && ! $user =~ ^(0|root)(:|$) ]] || fail "Dockerfile's last USER is '$user', expected a non-root user"
grep -q 'setcap cap_net_admin+ep' "$DF" || fail "Dockerfile does not give tc the file capability cap_net_admin"
for l in title description version revision licenses; do
  grep -q "org.opencontainers.image.$l=" "$DF" || fail "Dockerfile lacks the OCI label org.opencontainers.image.$l"
done
echo "Dockerfile: user $user, version $version, OCI labels"
dc PSBED_BANDWIDTH=1gbit docker-compose -f "$COMPOSE" -f "$SRC/docker-compose.tc.yml" config -q ||
  fail "config -q rejects docker-compose.yml with docker-compose.tc.yml"

# The runtime stage installs what runtime-packages.sh finds: it must resolve the built binary.
pkgs=$(bash "$SRC/cluster/runtime-packages.sh" "$PSBED") || fail "runtime-packages.sh failed on $PSBED"
for p in libzmq5 libdnnl2 libgomp1; do grep -qx "$p" <<<"$pkgs" || fail "runtime-packages.sh: $p missing from: $(tr '\n' ' ' <<<"$pkgs")"; done
for p in $pkgs; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || fail "runtime-packages.sh named $p, which is not an installed package"; done
echo "runtime packages: $(tr '\n' ' ' <<<"$pkgs")"
echo "PASS"
