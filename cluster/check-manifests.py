#!/usr/bin/env python3
"""Checks the Kubernetes manifests (cluster/k8s/) and the compose file against each other and
against cluster/entrypoint.sh, without a cluster or a Docker engine.

  cluster/check-manifests.py [--k8s DIR] [--compose FILE] [--entrypoint FILE]

Kubernetes: every document parses and has apiVersion/kind/metadata.name; the expected objects
are there (coordinator Deployment + Service, server StatefulSet + headless Service, Indexed
worker Job, runs PVC, one ConfigMap); selectors match their pod labels and every Service selects
some pod; every container takes the ConfigMap, sets a PSBED_ROLE fitting its workload, mounts
the PVC at PSBED_RUNS; the counts agree (PSBED_SERVERS = StatefulSet replicas, PSBED_WORKERS =
Job completions = parallelism); the coordinator Service serves PSBED_COORDINATOR's port.
Every pod spec: app.kubernetes.io/{name,instance,component,part-of,version} labels (selectors
hold the instance, so two runs never select each other's pods), the image tagged with the
project's version, requests and limits of cpu and memory (whole cores, requests = limits, for
shards and workers: a throughput testbed must not share cores silently), non-root with no
privilege escalation and every capability dropped, NET_ADMIN only where PSBED_SHAPE=tc,
a readiness probe (tcpSocket or httpGet where the role listens) and no liveness probe on a pod
that holds after its run, a writable /tmp under a read-only root; the Job has a TTL.
A folder with a kustomization.yaml is rendered first (resources, namespace, commonLabels,
images, strategic-merge patches: what the shipped overlays use); every overlay under
k8s/overlays/ is checked as rendered.
Compose: services coordinator/server/worker with their roles, healthchecks, the runs volume,
no fixed container_name, workers and servers pointed at the coordinator service, NET_ADMIN only
in the tc overlay (docker-compose.tc.yml), a non-root user and a read-only root.
Both: every PSBED_* variable named is one the entrypoint knows (asked from the entrypoint
itself: `entrypoint.sh --list-vars`). Prints one line a problem; exit status 1 if any.
"""
import argparse
import copy
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    sys.exit("check-manifests: PyYAML not found, expected the Debian package python3-yaml "
             "(cluster/install-deps.sh) for " + sys.executable)

HERE = os.path.dirname(os.path.abspath(__file__))
API = {"Namespace": "v1", "ConfigMap": "v1", "Service": "v1", "PersistentVolumeClaim": "v1",
       "Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}
# The files of the Secret psbed-keys each role mounts (docs/security.md): its own secret key and
# nothing of another role's.
KEY_FILES = {"coordinator": {"authorized_keys", "coordinator.pub", "coordinator.key"},
             "server": {"authorized_keys", "coordinator.pub", "server.key"},
             "worker": {"coordinator.pub", "worker.key"}}
# Which workload runs which role.
ROLE_OF_KIND = {"Deployment": "coordinator", "StatefulSet": "server", "Job": "worker"}
VAR_RE = re.compile(r"\bPSBED_[A-Z0-9_]+\b")

problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


def known_vars(entrypoint):
    out = subprocess.run(["bash", entrypoint, "--list-vars"], capture_output=True, text=True)
    names = set(out.stdout.split())
    if out.returncode != 0 or not names:
        sys.exit(f"check-manifests: '{entrypoint} --list-vars' failed ({out.stderr.strip()}), "
                 "expected the variable names")
    return names


def check_vars(where, names, known):
    for n in sorted(set(names)):
        if n not in known:
            problem(where, f"{n} is not a variable cluster/entrypoint.sh knows")


def vars_in(obj):
    """Every PSBED_* name in keys and string values of a parsed document."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += VAR_RE.findall(str(k)) + vars_in(v)
    elif isinstance(obj, list):
        for v in obj:
            found += vars_in(v)
    elif isinstance(obj, str):
        found += VAR_RE.findall(obj)
    return found


def subset(small, big):
    return bool(small) and all(big.get(k) == v for k, v in small.items())


def as_int(v):
    try:
        return int(str(v))
    except ValueError:
        return None


def check_key_mount(where, role, mounts, volumes, keys_dir):
    """The CURVE keys: Secret psbed-keys mounted at PSBED_KEYS with this role's files only."""
    secret = [(m, volumes[m.get("name")]["secret"]) for m in mounts
              if "secret" in (volumes.get(m.get("name")) or {})]
    at = [s for m, s in secret if m.get("mountPath") == keys_dir and s.get("secretName") == "psbed-keys"]
    if not at:
        problem(where, f"does not mount Secret/psbed-keys at PSBED_KEYS ({keys_dir})")
        return
    files = {i.get("key") for i in at[0].get("items") or []}
    for f in sorted(KEY_FILES[role] - files):
        problem(where, f"lacks {f} of Secret/psbed-keys (a {role} needs it with PSBED_KEYS)")
    for f in sorted(files - KEY_FILES[role]):
        if f.endswith(".key"):
            problem(where, f"mounts {f}, another role's secret key")


def merge(base, patch):
    """Strategic merge as kustomize does it for these files: mappings merge, lists of mappings
    with a name merge by name, other lists and values are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    if (isinstance(base, list) and isinstance(patch, list) and patch
            and all(isinstance(x, dict) and "name" in x for x in base + patch)):
        out = [copy.deepcopy(x) for x in base]
        for item in patch:
            at = [i for i, x in enumerate(out) if x["name"] == item["name"]]
            if at:
                out[at[0]] = merge(out[at[0]], item)
            else:
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(patch)


def add_labels(d, labels):
    """commonLabels: on every object, its pod template, and its selector."""
    d.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    spec = d.get("spec")
    if not isinstance(spec, dict):
        return
    if d["kind"] == "Service" and isinstance(spec.get("selector"), dict):
        spec["selector"].update(labels)
    if d["kind"] in ("Deployment", "StatefulSet"):
        spec.setdefault("selector", {}).setdefault("matchLabels", {}).update(labels)
    if isinstance(spec.get("template"), dict):
        spec["template"].setdefault("metadata", {}).setdefault("labels", {}).update(labels)


def read_yaml_docs(path):
    with open(path) as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


def render(directory):
    """(file, document) of a folder: its .yaml files, or what its kustomization.yaml makes."""
    kfile = os.path.join(directory, "kustomization.yaml")
    if not os.path.exists(kfile):
        files = sorted(f for f in os.listdir(directory) if f.endswith((".yaml", ".yml")))
        return [(f, d) for f in files for d in read_yaml_docs(os.path.join(directory, f))]
    k = read_yaml_docs(kfile)[0]
    where = os.path.relpath(kfile)
    known = {"apiVersion", "kind", "resources", "namespace", "commonLabels", "images", "patches"}
    for key in sorted(set(k) - known):
        problem(where, f"uses '{key}', which this check does not render (expected only {', '.join(sorted(known))})")
    out = []
    for r in k.get("resources") or []:
        path = os.path.normpath(os.path.join(directory, r))
        if os.path.isdir(path):
            out += render(path)
        elif os.path.exists(path):
            out += [(r, d) for d in read_yaml_docs(path)]
        else:
            problem(where, f"resource {r} does not exist")
    out = [(f, copy.deepcopy(d)) for f, d in out]
    for p in k.get("patches") or []:
        path = os.path.join(directory, p.get("path", ""))
        if not os.path.isfile(path):
            problem(where, f"patch {p} names no file")
            continue
        for patch in read_yaml_docs(path):
            key = (patch.get("kind"), (patch.get("metadata") or {}).get("name"))
            hits = [i for i, (_, d) in enumerate(out) if (d.get("kind"), d.get("metadata", {}).get("name")) == key]
            if not hits:
                problem(where, f"patch {p['path']} targets {key[0]}/{key[1]}, which the resources lack")
            for i in hits:
                out[i] = (out[i][0], merge(out[i][1], patch))
    for f, d in out:
        if k.get("namespace") and d.get("kind") != "Namespace":
            d.setdefault("metadata", {})["namespace"] = k["namespace"]
        if k.get("commonLabels"):
            add_labels(d, {str(a): str(b) for a, b in k["commonLabels"].items()})
        for c in pod_containers(d):
            for img in k.get("images") or []:
                name, _, tag = c.get("image", "").partition(":")
                if name == img.get("name"):
                    c["image"] = f"{img.get('newName', name)}:{img.get('newTag', tag)}"
    return out


def pod_containers(d):
    pod = ((d.get("spec") or {}).get("template") or {}).get("spec") or {}
    return pod.get("containers") or []


def project_version():
    with open(os.path.join(os.path.dirname(HERE), "CMakeLists.txt")) as fh:
        m = re.search(r"project\(psbed VERSION ([0-9.]+)", fh.read())
    return m.group(1) if m else None


def cores(v):
    """A Kubernetes cpu quantity in cores ("2", 2, "500m")."""
    t = str(v)
    try:
        return float(t[:-1]) / 1000 if t.endswith("m") else float(t)
    except ValueError:
        return None


def check_pod_hygiene(where, kind, role, spec, labels, data, version):
    """Labels, image tag, resources, non-root, capabilities, probes, /tmp: one pod template."""
    for key in ("name", "instance", "component", "part-of", "version"):
        if not labels.get(f"app.kubernetes.io/{key}"):
            problem(where, f"pod template lacks the label app.kubernetes.io/{key}")
    if labels.get("app.kubernetes.io/component") not in (None, role):
        problem(where, f"label app.kubernetes.io/component is {labels['app.kubernetes.io/component']!r}, expected {role!r}")
    if version and labels.get("app.kubernetes.io/version") not in (None, version):
        problem(where, f"label app.kubernetes.io/version is {labels['app.kubernetes.io/version']!r}, expected the project's {version}")
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    if kind != "Job" and "app.kubernetes.io/instance" not in selector:
        problem(where, "selector lacks app.kubernetes.io/instance: two runs would select each other's pods")
    pod = (spec.get("template") or {}).get("spec") or {}
    psc = pod.get("securityContext") or {}
    if psc.get("runAsNonRoot") is not True or psc.get("runAsUser") in (None, 0):
        problem(where, "pod securityContext does not set runAsNonRoot: true and a runAsUser other than 0")
    shaped = data.get("PSBED_SHAPE") == "tc"
    threads = as_int(data.get("PSBED_THREADS", "1")) or 1
    mounts_tmp = {v.get("name") for v in pod.get("volumes") or [] if "emptyDir" in v}
    for c in pod.get("containers") or []:
        cwhere = f"{where} container {c.get('name')}"
        tag = c.get("image", "").rpartition(":")[2] if ":" in c.get("image", "") else ""
        if version and tag != version:
            problem(cwhere, f"image {c.get('image')!r} is not tagged with the project's version {version}")
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            for r in ("cpu", "memory"):
                if r not in (res.get(part) or {}):
                    problem(cwhere, f"has no {r} {part[:-1]} (resources.{part}.{r})")
        req, lim = cores((res.get("requests") or {}).get("cpu")), cores((res.get("limits") or {}).get("cpu"))
        if role != "coordinator" and req is not None and lim is not None:
            if req != lim or req != int(req):
                problem(cwhere, f"cpu request {req} and limit {lim} are not the same whole number of cores: it would share cores silently")
            if role == "worker" and req < threads:
                problem(cwhere, f"cpu {req} is less than PSBED_THREADS {threads}")
        sc = c.get("securityContext") or {}
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problem(cwhere, "does not drop every capability (capabilities.drop: [ALL])")
        net_admin = "NET_ADMIN" in (caps.get("add") or [])
        if shaped and role != "coordinator" and not net_admin:
            problem(cwhere, "lacks capability NET_ADMIN, which PSBED_SHAPE=tc needs")
        if net_admin and not (shaped and role != "coordinator"):
            problem(cwhere, "adds NET_ADMIN without PSBED_SHAPE=tc: only shaping needs it")
        if sc.get("allowPrivilegeEscalation") is not False and not net_admin:
            problem(cwhere, "allows privilege escalation (allowPrivilegeEscalation: false expected)")
        if sc.get("readOnlyRootFilesystem") is True:
            if not any(m.get("mountPath") == "/tmp" and m.get("name") in mounts_tmp for m in c.get("volumeMounts") or []):
                problem(cwhere, "has a read-only root but no emptyDir at /tmp")
        else:
            problem(cwhere, "root filesystem is writable (readOnlyRootFilesystem: true expected)")
        ready = c.get("readinessProbe") or {}
        if not ready:
            problem(cwhere, "has no readinessProbe")
        elif role != "worker" and not ("tcpSocket" in ready or "httpGet" in ready):
            problem(cwhere, "readinessProbe is not tcpSocket or httpGet (the role listens)")
        env = {e.get("name"): e.get("value") for e in c.get("env") or []}
        if c.get("livenessProbe") and env.get("PSBED_AFTER_RUN", data.get("PSBED_AFTER_RUN")) == "hold":
            problem(cwhere, "has a livenessProbe but holds after its run with nothing listening: it would restart into a new run")
    if kind == "Job" and not isinstance(spec.get("ttlSecondsAfterFinished"), int):
        problem(where, "Job has no ttlSecondsAfterFinished: finished Jobs would pile up")


def check_k8s(directory, known):
    docs = []
    try:
        rendered = render(directory)
    except (OSError, yaml.YAMLError) as e:
        problem(directory, f"cannot be read as YAML ({str(e).splitlines()[0]})")
        return
    if not rendered:
        problem(directory, "no .yaml manifests")
        return
    # Problems name the folder too: the same file appears in the base and in every overlay.
    tag = os.path.basename(os.path.normpath(directory))
    rendered = [(f"{tag}/{f}", d) for f, d in rendered]
    version = project_version()
    namespaces = set()
    for f, d in rendered:
        if not isinstance(d, dict):
            problem(f, "a document is not a mapping")
            continue
        kind, name = d.get("kind"), (d.get("metadata") or {}).get("name")
        if not kind or not name or not d.get("apiVersion"):
            problem(f, "a document lacks apiVersion, kind or metadata.name")
            continue
        where = f"{f}: {kind}/{name}"
        if kind not in API:
            problem(where, f"unexpected kind, expected one of {', '.join(sorted(API))}")
        elif d["apiVersion"] != API[kind]:
            problem(where, f"apiVersion {d['apiVersion']}, expected {API[kind]}")
        if kind != "Namespace":
            namespaces.add(d["metadata"].get("namespace"))
        docs.append((f, kind, name, d))
        check_vars(where, vars_in(d), known)
    if len(namespaces) > 1:
        problem(directory, f"objects in several namespaces: {sorted(map(str, namespaces))}")

    by_kind = {}
    for f, kind, name, d in docs:
        if (kind, name) in by_kind:
            problem(f"{f}: {kind}/{name}", "defined twice")
        by_kind[(kind, name)] = (f, d)

    def one(kind, what):
        found = [(n, by_kind[(k, n)]) for (k, n) in by_kind if k == kind]
        if len(found) != 1:
            problem(directory, f"expected exactly one {kind} ({what}), found {len(found)}")
            return None, None, {}
        name, (f, d) = found[0]
        return name, f, d

    cm_name, _, cm = one("ConfigMap", "the PSBED_* variables")
    pvc_name, _, _ = one("PersistentVolumeClaim", "runs/")
    data = {k: str(v) for k, v in (cm.get("data") or {}).items()}
    for k in data:
        if not k.startswith("PSBED_"):
            problem(f"ConfigMap/{cm_name}", f"key {k} is not a PSBED_* variable")

    pod_labels = []  # (kind/name, labels) of every workload's pods
    role_labels = {}  # role -> its pods' labels
    for kind, role in ROLE_OF_KIND.items():
        name, f, d = one(kind, role + "s" if role != "coordinator" else role)
        if not d:
            continue
        where = f"{f}: {kind}/{name}"
        spec = d.get("spec") or {}
        tmpl = spec.get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        pod_labels.append((f"{kind}/{name}", labels))
        role_labels[role] = labels
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        if kind != "Job" and not subset(selector, labels):
            problem(where, f"selector {selector} does not match the pod labels {labels}")
        if kind == "Job" and selector and not subset(selector, labels):
            problem(where, f"selector {selector} does not match the pod labels {labels}")
        check_pod_hygiene(where, kind, role, spec, labels, data, version)
        pod = tmpl.get("spec") or {}
        volumes = {v.get("name"): v for v in pod.get("volumes") or []}
        containers = pod.get("containers") or []
        if not containers:
            problem(where, "no containers")
        for c in containers:
            cwhere = f"{where} container {c.get('name')}"
            refs = [e.get("configMapRef", {}).get("name") for e in c.get("envFrom") or []]
            if cm_name not in refs:
                problem(cwhere, f"does not take its variables from ConfigMap/{cm_name} (envFrom)")
            for r in refs:
                if r and r != cm_name:
                    problem(cwhere, f"envFrom names ConfigMap/{r}, which is not defined")
            env = {e.get("name"): e.get("value") for e in c.get("env") or []}
            if env.get("PSBED_ROLE") != role:
                problem(cwhere, f"PSBED_ROLE is {env.get('PSBED_ROLE')!r}, expected {role!r} for a {kind}")
            runs_mount = data.get("PSBED_RUNS", "/runs")
            mounts = c.get("volumeMounts") or []
            for m in mounts:
                if m.get("name") not in volumes:
                    problem(cwhere, f"mounts volume {m.get('name')!r}, which the pod does not define")
            pvc_mounts = [m for m in mounts
                          if (volumes.get(m.get("name")) or {}).get("persistentVolumeClaim", {}).get("claimName") == pvc_name]
            if not any(m.get("mountPath") == runs_mount for m in pvc_mounts):
                problem(cwhere, f"does not mount PersistentVolumeClaim/{pvc_name} at PSBED_RUNS ({runs_mount})")
            check_key_mount(cwhere, role, mounts, volumes, data.get("PSBED_KEYS") or "/keys")
        for v in volumes.values():
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and claim != pvc_name:
                problem(where, f"volume {v.get('name')} claims PersistentVolumeClaim/{claim}, which is not defined")
        if kind == "StatefulSet":
            replicas = spec.get("replicas", 1)
            if as_int(data.get("PSBED_SERVERS")) != replicas:
                problem(where, f"replicas {replicas} but the ConfigMap's PSBED_SERVERS is {data.get('PSBED_SERVERS')!r}")
            svc = by_kind.get(("Service", spec.get("serviceName")))
            if not svc:
                problem(where, f"serviceName {spec.get('serviceName')!r} is not a Service defined here")
            elif svc[1].get("spec", {}).get("clusterIP") != "None":
                problem(where, f"its Service/{spec.get('serviceName')} is not headless (clusterIP: None)")
        if kind == "Job":
            if spec.get("completionMode") != "Indexed":
                problem(where, "completionMode is not Indexed (workers are named after their index)")
            comp, par = spec.get("completions"), spec.get("parallelism")
            if comp != par:
                problem(where, f"completions {comp} and parallelism {par} differ: all workers must run at once")
            if as_int(data.get("PSBED_WORKERS")) != comp:
                problem(where, f"completions {comp} but the ConfigMap's PSBED_WORKERS is {data.get('PSBED_WORKERS')!r}")
            if pod.get("restartPolicy") not in ("Never", "OnFailure"):
                problem(where, "restartPolicy must be Never or OnFailure for a Job")
            for c in containers:
                env = {e.get("name"): e.get("value") for e in c.get("env") or []}
                after = env.get("PSBED_AFTER_RUN", data.get("PSBED_AFTER_RUN", "exit"))
                if after != "exit":
                    problem(where, f"PSBED_AFTER_RUN is {after!r}: a worker that holds never lets the Job complete")

    services = [(n, by_kind[("Service", n)]) for (k, n) in by_kind if k == "Service"]
    for name, (f, d) in services:
        sel = (d.get("spec") or {}).get("selector") or {}
        matched = [w for w, labels in pod_labels if subset(sel, labels)]
        if not matched:
            problem(f"{f}: Service/{name}", f"selector {sel} matches no workload's pods")
    coord = re.match(r"^(?:tcp://)?([A-Za-z0-9.-]+)(?::(\d+))?$", data.get("PSBED_COORDINATOR", ""))
    if not coord:
        problem(f"ConfigMap/{cm_name}", f"PSBED_COORDINATOR {data.get('PSBED_COORDINATOR')!r} is not tcp://HOST:PORT")
    else:
        host, port = coord.group(1).split(".")[0], int(coord.group(2) or data.get("PSBED_PORT", 7000))
        svc = by_kind.get(("Service", host))
        if not svc:
            problem(f"ConfigMap/{cm_name}", f"PSBED_COORDINATOR names host {host!r}, which is no Service here")
        else:
            ports = svc[1].get("spec", {}).get("ports") or []
            if not any(p.get("port") == port and str(p.get("targetPort", port)) == data.get("PSBED_PORT", "7000")
                       for p in ports):
                problem(f"Service/{host}", f"does not serve port {port} to the coordinator's PSBED_PORT "
                        f"{data.get('PSBED_PORT', '7000')}")
            if not subset(svc[1].get("spec", {}).get("selector") or {}, role_labels.get("coordinator", {})):
                problem(f"Service/{host}", "does not select the coordinator Deployment's pods")


def check_compose(path, known):
    try:
        with open(path) as fh:
            doc = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as e:
        problem(path, f"cannot be read as YAML ({str(e).splitlines()[0]})")
        return
    services = (doc or {}).get("services") or {}
    # The containers' variables: environment keys and the ${...} defaults they are set from
    # (other ${...} in the file, like the image name, are settings of compose itself).
    for name, s in services.items():
        env = (s or {}).get("environment") or {}
        check_vars(f"{path}: service {name}", vars_in(env), known)
    for name, role in (("coordinator", "coordinator"), ("server", "server"), ("worker", "worker")):
        s = services.get(name)
        if not s:
            problem(path, f"no service {name!r}")
            continue
        where = f"{path}: service {name}"
        env = s.get("environment") or {}
        if isinstance(env, list):
            env = dict(e.split("=", 1) if "=" in e else (e, None) for e in env)
        if env.get("PSBED_ROLE") != role:
            problem(where, f"PSBED_ROLE is {env.get('PSBED_ROLE')!r}, expected {role!r}")
        if "container_name" in s:
            problem(where, "has a container_name, which makes --scale impossible")
        if "NET_ADMIN" in (s.get("cap_add") or []):
            problem(where, "adds NET_ADMIN: only tc shaping needs it (docker-compose.tc.yml adds it)")
        if "user" in s and re.match(r"^(0|root)(:|$)", str(s["user"])):
            problem(where, f"runs as root (user {s['user']!r})")
        if s.get("read_only") is not True:
            problem(where, "root filesystem is writable (read_only: true expected, with a tmpfs at /tmp)")
        if not s.get("healthcheck"):
            problem(where, "has no healthcheck")
        runs = env.get("PSBED_RUNS", "/runs")
        targets = [v.get("target") if isinstance(v, dict) else
                   (re.search(r":(/[^:]*)(?::(?:ro|rw|z|Z))?$", str(v)) or [None, None])[1]
                   for v in s.get("volumes") or []]
        if runs not in targets:
            problem(where, f"mounts nothing at PSBED_RUNS ({runs})")
        if role != "coordinator":
            m = re.match(r"^(?:tcp://)?([A-Za-z0-9_.-]+)", str(env.get("PSBED_COORDINATOR", "")))
            if not m or m.group(1) not in services:
                problem(where, f"PSBED_COORDINATOR {env.get('PSBED_COORDINATOR')!r} names no service of this file")
    monitoring = [n for n, v in services.items() if "monitoring" in ((v or {}).get("profiles") or [])]
    if sorted(monitoring) != ["grafana", "prometheus"]:
        problem(path, f"profile 'monitoring' has services {sorted(monitoring)}, expected grafana and prometheus")
    predict = services.get("predict")
    if not predict or "predict" not in (predict.get("profiles") or []):
        problem(path, "no one-shot service 'predict' under the compose profile 'predict'")


def check_compose_tc(path):
    """The tc overlay: server and worker shape with tc and get NET_ADMIN, the coordinator not."""
    try:
        with open(path) as fh:
            services = (yaml.safe_load(fh) or {}).get("services") or {}
    except (OSError, yaml.YAMLError) as e:
        problem(path, f"cannot be read as YAML ({str(e).splitlines()[0]})")
        return
    for name in ("server", "worker"):
        s = services.get(name) or {}
        if "NET_ADMIN" not in (s.get("cap_add") or []):
            problem(f"{path}: service {name}", "lacks cap_add NET_ADMIN, which PSBED_SHAPE=tc needs")
        if (s.get("environment") or {}).get("PSBED_SHAPE") != "tc":
            problem(f"{path}: service {name}", "does not set PSBED_SHAPE: tc")
    if "NET_ADMIN" in ((services.get("coordinator") or {}).get("cap_add") or []):
        problem(f"{path}: service coordinator", "adds NET_ADMIN, which the coordinator never needs")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k8s", default=os.path.join(HERE, "k8s"), help="folder of Kubernetes manifests")
    ap.add_argument("--compose", default=os.path.join(os.path.dirname(HERE), "docker-compose.yml"),
                    help="compose file ('' to skip)")
    ap.add_argument("--compose-tc", default=os.path.join(os.path.dirname(HERE), "docker-compose.tc.yml"),
                    help="compose overlay for tc shaping ('' to skip)")
    ap.add_argument("--entrypoint", default=os.path.join(HERE, "entrypoint.sh"))
    a = ap.parse_args()
    known = known_vars(a.entrypoint)
    if a.k8s:
        check_k8s(a.k8s, known)
        overlays = os.path.join(a.k8s, "overlays")
        for o in sorted(os.listdir(overlays)) if os.path.isdir(overlays) else []:
            check_k8s(os.path.join(overlays, o), known)
    if a.compose:
        check_compose(a.compose, known)
    if a.compose_tc:
        check_compose_tc(a.compose_tc)
    for p in problems:
        print(f"check-manifests: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-manifests: ok ({a.k8s or 'no manifests'}; {a.compose or 'no compose file'}; "
          f"{len(known)} variables known to the entrypoint)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
