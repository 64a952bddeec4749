#!/usr/bin/python3
"""tests/deploy/test_manifests.py - the deployment files agree with each other.

No cluster and no Docker engine here: every YAML document of
deploy/kubernetes/ is parsed (Debian's python3-yaml) and the fields that must
agree are checked against the ConfigMap's verbproxy.conf, the image's
deploy/docker/verbproxy.conf, the Dockerfile and bench/RESULTS.md:

- container ports = the conf's `port` and `metrics-port`; the Dockerfile
  EXPOSEs both and its HEALTHCHECK asks the metrics port's /healthz;
- readiness /readyz, liveness and startup /healthz, all on the metrics port,
  which listens on 0.0.0.0 (kubelet comes from outside the pod's loopback);
- the ConfigMap is mounted as a directory (no subPath) at the directory of
  the --config path, which is the Dockerfile's too;
- the Secret's key lands at `upstream-pass-file`;
- terminationGracePeriodSeconds > shutdown-timeout;
- the classic sidecar sets shutdown-min-drain (it gets SIGTERM together with
  the application, which may connect only during its own shutdown), above 0
  and below shutdown-timeout; wherever it is set, it is below
  shutdown-timeout (the timeout would cut it). Each Deployment's settings are
  the ConfigMap's file, then its VERBPROXY_* env, then its --flags, as the
  proxy stacks them;
- runAsNonRoot, runAsUser = the Dockerfile's numeric USER, read-only root,
  no privilege escalation, every capability dropped;
- the native sidecar is an init container with restartPolicy Always, the
  classic one a plain container without it;
- one verbproxy image name everywhere;
- the memory request covers the measured idle RSS + maxclients x the
  measured bytes per idle client (bench/idle_memory.sh's block), and
  the limit is at least the request.

Then it proves it can fail: each of a list of single-field mutations of the
real files must produce a complaint (a check that cannot fail is no check).
Exit 0 when the files agree and every mutation is caught.
"""
import copy
import os
import posixpath
import re
import sys

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
K8S = os.path.join(ROOT, "deploy", "kubernetes")
CONF_KEY = "verbproxy.conf"


def read(path):
    with open(path) as f:
        return f.read()


def load_bundle():
    docs = []
    for name in sorted(os.listdir(K8S)):
        if name.endswith((".yaml", ".yml")):
            for doc in yaml.safe_load_all(read(os.path.join(K8S, name))):
                if doc is not None:
                    docs.append({"file": name, "doc": doc})
    return {
        "docs": docs,
        "dockerfile": read(os.path.join(ROOT, "Dockerfile")),
        "image_conf": read(os.path.join(ROOT, "deploy", "docker", "verbproxy.conf")),
        "results": read(os.path.join(ROOT, "bench", "RESULTS.md")),
    }


def parse_conf(text):
    """verbproxy.conf: `directive value` lines (the last one wins)."""
    conf = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split(None, 1)
        conf[words[0].lower()] = words[1].strip().strip('"') if len(words) > 1 else ""
    return conf


def effective_conf(conf, container):
    """The settings one container's proxy runs with: the file, then its
    VERBPROXY_<DIRECTIVE> env (upper case, '_' for '-'), then its --flags."""
    eff = dict(conf)
    for e in container.get("env") or []:
        name = e.get("name", "")
        if name.startswith("VERBPROXY_") and name != "VERBPROXY_UPSTREAM_PASS" and "value" in e:
            eff[name[len("VERBPROXY_"):].lower().replace("_", "-")] = str(e["value"])
    words = (container.get("command") or []) + (container.get("args") or [])
    for i, w in enumerate(words):
        if w.startswith("--") and w != "--config" and i + 1 < len(words):
            eff[w[2:].lower()] = words[i + 1]
    return eff


def k8s_bytes(q):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?", str(q))
    if not m:
        return None
    mul = {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "k": 1000, "M": 1000**2, "G": 1000**3}
    return float(m.group(1)) * mul[m.group(2)]


def dockerfile_runtime(text):
    """The last stage's instructions, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    lines = [l.strip() for l in joined.splitlines() if l.strip() and not l.strip().startswith("#")]
    last = max(i for i, l in enumerate(lines) if l.upper().startswith("FROM "))
    return lines[last:]


def json_words(arg):
    m = re.search(r"\[(.*)\]", arg)
    return re.findall(r'"([^"]*)"', m.group(1)) if m else arg.split()


def dockerfile_facts(text):
    facts = {"expose": set(), "healthcheck": None, "user": None, "entrypoint": [], "copies": []}
    for l in dockerfile_runtime(text):
        op, _, arg = l.partition(" ")
        op = op.upper()
        if op == "EXPOSE":
            facts["expose"] |= {int(p.split("/")[0]) for p in arg.split()}
        elif op == "HEALTHCHECK":
            facts["healthcheck"] = json_words(arg[arg.index("CMD") + 3:]) if "CMD" in arg else None
        elif op == "USER":
            facts["user"] = arg.strip()
        elif op == "ENTRYPOINT":
            facts["entrypoint"] = json_words(arg)
        elif op == "COPY":
            facts["copies"].append(arg.split()[-1])
    return facts


def config_path(words):
    return words[words.index("--config") + 1] if "--config" in words and words.index("--config") + 1 < len(words) else None


def measured_sizing(results):
    """(idle RSS bytes, bytes per idle client) of verbproxy on the shared
    connection: the largest over bench/idle_memory.sh's rows."""
    m = re.search(r"<!-- bench/idle_memory.sh: begin -->(.*?)<!-- bench/idle_memory.sh: end -->", results, re.S)
    if not m:
        return None
    idle, per = 0.0, 0.0
    for row in m.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0] == "verbproxy (shared connection)":
            idle = max(idle, float(cells[2]) * 1024 * 1024)
            per = max(per, float(cells[4].split()[0]), float(cells[5].split()[0]))
    return (idle, per) if per else None


def problems(b):
    out = []
    say = out.append
    by_kind = {}
    for d in b["docs"]:
        by_kind.setdefault(d["doc"].get("kind"), []).append(d)
    cms = [d["doc"] for d in by_kind.get("ConfigMap", []) if CONF_KEY in (d["doc"].get("data") or {})]
    if len(cms) != 1:
        return ["expected one ConfigMap with %s, found %d" % (CONF_KEY, len(cms))]
    cm = cms[0]
    conf = parse_conf(cm["data"][CONF_KEY])
    image_conf = parse_conf(b["image_conf"])
    secrets = {d["doc"]["metadata"]["name"]: d["doc"] for d in by_kind.get("Secret", [])}
    deps = by_kind.get("Deployment", [])
    df = dockerfile_facts(b["dockerfile"])

    def num(c, key):
        try:
            return int(c.get(key, ""))
        except ValueError:
            say("%s: '%s' missing or not a number" % ("conf", key))
            return None

    port, mport, stimeout = num(conf, "port"), num(conf, "metrics-port"), num(conf, "shutdown-timeout")
    if not mport:
        say("ConfigMap conf: metrics-port must be set (the probes need it)")
    if conf.get("metrics-bind") != "0.0.0.0":
        say("ConfigMap conf: metrics-bind %r: kubelet probes come to the pod IP, it must be 0.0.0.0" % conf.get("metrics-bind"))
    for key in ("port", "metrics-port"):
        if image_conf.get(key) != conf.get(key):
            say("image conf %s %r != ConfigMap conf %s %r" % (key, image_conf.get(key), key, conf.get(key)))
    if image_conf.get("metrics-bind") != "0.0.0.0":
        say("image conf: metrics-bind must be 0.0.0.0 (probes from outside the container)")

    # The Dockerfile.
    if {port, mport} - df["expose"]:
        say("Dockerfile EXPOSE %s lacks %s" % (sorted(df["expose"]), sorted({port, mport} - df["expose"])))
    hc = df["healthcheck"] or []
    want_hc = "127.0.0.1:%s/healthz" % mport
    if "--healthcheck" not in hc or hc[hc.index("--healthcheck") + 1:][:1] != [want_hc]:
        say("Dockerfile HEALTHCHECK %s does not ask %s" % (hc, want_hc))
    m = re.fullmatch(r"(\d+)(?::(\d+))?", df["user"] or "")
    uid = int(m.group(1)) if m else None
    if uid is None or uid == 0:
        say("Dockerfile USER %r: must be a numeric non-root uid (runAsNonRoot checks it)" % df["user"])
    docker_conf = config_path(df["entrypoint"])
    if not docker_conf or docker_conf not in df["copies"]:
        say("Dockerfile: ENTRYPOINT's --config %r is not where the conf is COPYed %s" % (docker_conf, df["copies"]))

    sizing = measured_sizing(b["results"])
    if not sizing:
        say("bench/RESULTS.md has no bench/idle_memory.sh figures for verbproxy (shared connection)")

    kinds_seen = set()
    images = set()
    for d in deps:
        name = d["doc"]["metadata"]["name"]
        spec = d["doc"]["spec"]["template"]["spec"]
        where = None
        for field in ("initContainers", "containers"):
            for c in spec.get(field) or []:
                if "verbproxy" in c.get("image", ""):
                    where, vp = field, c
        if not where:
            say("%s: no verbproxy container" % name)
            continue
        ctx = "%s/%s" % (name, vp.get("name"))
        images.add(vp["image"])
        native = where == "initContainers"
        kinds_seen.add("native" if native else "classic")
        if native and vp.get("restartPolicy") != "Always":
            say("%s: a native sidecar is an init container with restartPolicy: Always" % ctx)
        if not native and "restartPolicy" in vp:
            say("%s: a classic sidecar container has no restartPolicy" % ctx)
        if ("native" in name) != native:
            say("%s: the name says %s but verbproxy is in %s" % (ctx, "native" if "native" in name else "classic", where))

        cports = {p.get("name"): p.get("containerPort") for p in vp.get("ports") or []}
        if set(cports.values()) != {port, mport}:
            say("%s: containerPorts %s != conf port %s and metrics-port %s" % (ctx, sorted(cports.values()), port, mport))

        def probe_port(p):
            v = p.get("port")
            return cports.get(v) if isinstance(v, str) else v

        for kind, path in (("startupProbe", "/healthz"), ("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            p = (vp.get(kind) or {}).get("httpGet")
            if not p:
                say("%s: no httpGet %s" % (ctx, kind))
                continue
            if p.get("path") != path:
                say("%s: %s path %r, want %s" % (ctx, kind, p.get("path"), path))
            if probe_port(p) != mport:
                say("%s: %s port %r is not metrics-port %s" % (ctx, kind, p.get("port"), mport))

        words = (vp.get("command") or []) + (vp.get("args") or [])
        cfg = config_path(words) if "--config" in words else docker_conf
        if cfg != docker_conf:
            say("%s: --config %s differs from the Dockerfile's %s" % (ctx, cfg, docker_conf))
        vols = {v["name"]: v for v in spec.get("volumes") or []}
        mounts = vp.get("volumeMounts") or []

        def mounted_file(vol_pred, key):
            """Paths in the container where `key` of a matching volume appears."""
            paths = []
            for mnt in mounts:
                v = vols.get(mnt["name"])
                if not v or not vol_pred(v):
                    continue
                if "subPath" in mnt:
                    say("%s: volume %s mounted with subPath: updates never arrive" % (ctx, mnt["name"]))
                src = v.get("configMap") or v.get("secret") or {}
                items = src.get("items")
                if items is None:
                    paths.append(posixpath.join(mnt["mountPath"], key))
                else:
                    paths += [posixpath.join(mnt["mountPath"], i["path"]) for i in items if i["key"] == key]
            return paths

        cm_paths = mounted_file(lambda v: (v.get("configMap") or {}).get("name") == cm["metadata"]["name"], CONF_KEY)
        if cfg not in cm_paths:
            say("%s: --config %s is not where the ConfigMap's %s is mounted (%s)" % (ctx, cfg, CONF_KEY, cm_paths))
        pass_file = conf.get("upstream-pass-file")
        found = False
        for sname, sdoc in secrets.items():
            keys = set((sdoc.get("data") or {}).keys()) | set((sdoc.get("stringData") or {}).keys())
            for key in keys:
                if pass_file in mounted_file(lambda v, s=sname: (v.get("secret") or {}).get("secretName") == s, key):
                    found = True
        if not found:
            say("%s: no Secret key is mounted at upstream-pass-file %s" % (ctx, pass_file))

        eff = effective_conf(conf, vp)
        try:
            timeout = int(eff.get("shutdown-timeout", "30"))
        except ValueError:
            say("%s: shutdown-timeout %r is not a number" % (ctx, eff.get("shutdown-timeout")))
            timeout = stimeout
        grace = d["doc"]["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        if timeout is not None and not grace > timeout:
            say("%s: terminationGracePeriodSeconds %s is not above shutdown-timeout %s" % (name, grace, timeout))
        min_drain = eff.get("shutdown-min-drain")
        if min_drain is not None and not re.fullmatch(r"\d+", min_drain):
            say("%s: shutdown-min-drain %r is not a number of seconds" % (ctx, min_drain))
            min_drain = None
        if not native and (min_drain is None or int(min_drain) == 0):
            say("%s: a classic sidecar needs shutdown-min-drain above 0: it gets SIGTERM together with the "
                "application, which may connect only during its own shutdown" % ctx)
        if min_drain is not None and int(min_drain) > 0 and timeout is not None and not int(min_drain) < timeout:
            say("%s: shutdown-min-drain %s is not below shutdown-timeout %s (the timeout would cut it)"
                % (ctx, min_drain, timeout))

        sc = dict(spec.get("securityContext") or {})
        sc.update(vp.get("securityContext") or {})
        if sc.get("runAsNonRoot") is not True:
            say("%s: runAsNonRoot is not true" % ctx)
        if sc.get("runAsUser") != uid:
            say("%s: runAsUser %r != the Dockerfile's uid %r" % (ctx, sc.get("runAsUser"), uid))
        vsc = vp.get("securityContext") or {}
        if vsc.get("readOnlyRootFilesystem") is not True:
            say("%s: readOnlyRootFilesystem is not true" % ctx)
        if vsc.get("allowPrivilegeEscalation") is not False:
            say("%s: allowPrivilegeEscalation is not false" % ctx)
        if "ALL" not in ((vsc.get("capabilities") or {}).get("drop") or []):
            say("%s: capabilities.drop lacks ALL" % ctx)

        res = vp.get("resources") or {}
        req = k8s_bytes((res.get("requests") or {}).get("memory"))
        lim = k8s_bytes((res.get("limits") or {}).get("memory"))
        if not (res.get("requests") or {}).get("cpu"):
            say("%s: no cpu request" % ctx)
        if req is None or lim is None or lim < req:
            say("%s: memory request %r / limit %r: both needed, limit >= request" % (ctx, req, lim))
        elif sizing:
            need = sizing[0] + sizing[1] * int(conf.get("maxclients", "10000"))
            if req < need:
                say("%s: memory request %.0f bytes < measured idle RSS + maxclients x per-client = %.0f" % (ctx, req, need))

    if kinds_seen != {"native", "classic"}:
        say("expected a native and a classic sidecar Deployment, found %s" % sorted(kinds_seen))
    if len(images) > 1:
        say("verbproxy image names differ: %s" % sorted(images))
    return out


def the_proxy(b, dep_name):
    for d in b["docs"]:
        if d["doc"].get("kind") == "Deployment" and d["doc"]["metadata"]["name"].endswith(dep_name):
            spec = d["doc"]["spec"]["template"]["spec"]
            for field in ("initContainers", "containers"):
                for c in spec.get(field) or []:
                    if "verbproxy" in c.get("image", ""):
                        return c, spec
    raise KeyError(dep_name)


def the_conf_map(b):
    for d in b["docs"]:
        if d["doc"].get("kind") == "ConfigMap":
            return d["doc"]["data"]


def sub_conf(b, old, new):
    data = the_conf_map(b)
    assert old in data[CONF_KEY], old
    data[CONF_KEY] = data[CONF_KEY].replace(old, new)


def mutations():
    """(what, how) pairs: each changes one field of a copy of the files."""
    def native(b):
        return the_proxy(b, "native")

    def classic(b):
        return the_proxy(b, "classic")

    def classic_env(b):
        return {e["name"]: e for e in classic(b)[0].get("env") or []}

    def drop_min_drain(b):
        c = classic(b)[0]
        c["env"] = [e for e in c.get("env") or [] if e["name"] != "VERBPROXY_SHUTDOWN_MIN_DRAIN"]

    def move_to_containers(b):
        c, spec = native(b)
        spec["initContainers"].remove(c)
        del c["restartPolicy"]
        spec["containers"].append(c)

    return [
        ("conf port changed", lambda b: sub_conf(b, "port 6380", "port 6381")),
        ("conf metrics-port changed", lambda b: sub_conf(b, "metrics-port 9380", "metrics-port 9381")),
        ("metrics-bind loopback", lambda b: sub_conf(b, "metrics-bind 0.0.0.0", "metrics-bind 127.0.0.1")),
        ("shutdown-timeout above the grace period", lambda b: sub_conf(b, "shutdown-timeout 30", "shutdown-timeout 60")),
        ("upstream-pass-file elsewhere", lambda b: sub_conf(b, "/var/run/secrets/redis/password", "/run/secrets/pw")),
        ("maxclients beyond the memory request", lambda b: sub_conf(b, "maxclients 1000", "maxclients 100000")),
        ("containerPort changed", lambda b: native(b)[0]["ports"][1].update(containerPort=9999)),
        ("readiness probe on /healthz", lambda b: native(b)[0]["readinessProbe"]["httpGet"].update(path="/healthz")),
        ("liveness probe path typo", lambda b: classic(b)[0]["livenessProbe"]["httpGet"].update(path="/health")),
        ("startup probe on the RESP port", lambda b: native(b)[0]["startupProbe"]["httpGet"].update(port="redis")),
        ("readiness probe port number", lambda b: classic(b)[0]["readinessProbe"]["httpGet"].update(port=6380)),
        ("config mounted elsewhere", lambda b: native(b)[0]["volumeMounts"][0].update(mountPath="/config")),
        ("config mounted with subPath", lambda b: native(b)[0]["volumeMounts"][0].update(subPath=CONF_KEY)),
        ("--config path changed", lambda b: native(b)[0].update(command=["/usr/local/bin/verbproxy", "--config", "/etc/vp.conf"])),
        ("secret item path changed", lambda b: native(b)[1]["volumes"][1]["secret"]["items"][0].update(path="pw")),
        ("grace period too short", lambda b: classic(b)[1].update(terminationGracePeriodSeconds=30)),
        ("classic sidecar without shutdown-min-drain", drop_min_drain),
        ("classic shutdown-min-drain 0", lambda b: classic_env(b)["VERBPROXY_SHUTDOWN_MIN_DRAIN"].update(value="0")),
        ("classic shutdown-min-drain not below shutdown-timeout",
         lambda b: classic_env(b)["VERBPROXY_SHUTDOWN_MIN_DRAIN"].update(value="30")),
        ("classic shutdown-min-drain not a number",
         lambda b: classic_env(b)["VERBPROXY_SHUTDOWN_MIN_DRAIN"].update(value="5s")),
        ("classic shutdown-timeout flag below shutdown-min-drain",
         lambda b: classic(b)[0].update(args=["--shutdown-timeout", "4"])),
        ("native shutdown-min-drain above the ConfigMap's shutdown-timeout",
         lambda b: native(b)[0].update(env=[{"name": "VERBPROXY_SHUTDOWN_MIN_DRAIN", "value": "60"}])),
        ("classic grace period below an env shutdown-timeout",
         lambda b: classic(b)[0]["env"].append({"name": "VERBPROXY_SHUTDOWN_TIMEOUT", "value": "50"})),
        ("runAsUser differs", lambda b: native(b)[0]["securityContext"].update(runAsUser=1000)),
        ("runAsNonRoot off", lambda b: classic(b)[0]["securityContext"].update(runAsNonRoot=False)),
        ("writable root", lambda b: native(b)[0]["securityContext"].update(readOnlyRootFilesystem=False)),
        ("privilege escalation", lambda b: native(b)[0]["securityContext"].update(allowPrivilegeEscalation=True)),
        ("capabilities kept", lambda b: classic(b)[0]["securityContext"]["capabilities"].update(drop=["NET_RAW"])),
        ("native sidecar without restartPolicy", lambda b: native(b)[0].pop("restartPolicy")),
        ("native sidecar as a plain container", move_to_containers),
        ("image names differ", lambda b: classic(b)[0].update(image="registry.example.com/verbproxy:0.2.0")),
        ("memory request below the measured figure", lambda b: native(b)[0]["resources"]["requests"].update(memory="4Mi")),
        ("memory limit below the request", lambda b: native(b)[0]["resources"]["limits"].update(memory="16Mi")),
        ("Dockerfile EXPOSE without the admin port", lambda b: b.update(dockerfile=b["dockerfile"].replace("EXPOSE 6380 9380", "EXPOSE 6380"))),
        ("Dockerfile HEALTHCHECK on another port", lambda b: b.update(dockerfile=b["dockerfile"].replace("127.0.0.1:9380/healthz", "127.0.0.1:9090/healthz"))),
        ("Dockerfile USER by name", lambda b: b.update(dockerfile=b["dockerfile"].replace("USER 10001:10001", "USER verbproxy"))),
        ("Dockerfile uid changed", lambda b: b.update(dockerfile=b["dockerfile"].replace("USER 10001:10001", "USER 10002:10002"))),
        ("image conf metrics-port differs", lambda b: b.update(image_conf=b["image_conf"].replace("metrics-port 9380", "metrics-port 9100"))),
        ("no measured figures", lambda b: b.update(results="")),
    ]


def main():
    bundle = load_bundle()
    found = problems(bundle)
    for p in found:
        print("DISAGREE: " + p)
    ndocs = len(bundle["docs"])
    print("%d YAML documents parsed; %d disagreements" % (ndocs, len(found)))
    missed = []
    for what, how in mutations():
        b = copy.deepcopy(bundle)
        how(b)
        got = problems(b)
        if not got:
            missed.append(what)
        else:
            print("mutation caught: %s -> %s" % (what, got[0]))
    for m in missed:
        print("MUTATION NOT CAUGHT: " + m)
    if found or missed or ndocs < 4:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
