#!/bin/bash
# The Kubernetes manifests (contrib/k8s/*.yaml) and the OCI hook definition
# (contrib/oci/tierd-hook.json) against what make install ships and what
# tierd accepts: every document parses; both DaemonSets are node-critical
# and Guaranteed; tierd is privileged with hostPID, its views' hostPath is
# Bidirectional; the bus address, the holder socket and the installed paths
# agree everywhere they are named; the example policy passes
# `tierd --check-policy`; the bus config starts a dbus-daemon; the init
# container's script, run in a scratch root, installs the hook; the example
# pod's tenant admits its namespace.
set -u
source "$(dirname "$0")/../lib/lib.sh"
tl_init
ROOT=$TL_DIR/root

# m CHECK ARGS...: one check on the parsed manifests; says why on stderr.
cat >"$TL_DIR/m.py" <<'PY'
import glob, json, os, re, sys
import xml.etree.ElementTree as ET
import yaml

TOP = os.environ["TL_ROOT"]
HOOK = os.path.join(TOP, "contrib/oci/tierd-hook.json")
BUS_ADDRESS_ENV = "DBUS_SYSTEM_BUS_ADDRESS"

class Fail(Exception):
    pass

def need(cond, why):
    if not cond:
        raise Fail(why)

def manifests():
    out = {}
    for f in sorted(glob.glob(os.path.join(TOP, "contrib/k8s/*.yaml"))):
        with open(f) as fh:
            out[os.path.basename(f)] = [d for d in yaml.safe_load_all(fh) if d is not None]
    return out

def docs():
    return [d for ds in manifests().values() for d in ds]

def obj(kind, name):
    found = [d for d in docs() if d.get("kind") == kind and d.get("metadata", {}).get("name") == name]
    need(len(found) == 1, "%d %s named %s in contrib/k8s/*.yaml" % (len(found), kind, name))
    return found[0]

def pod_spec(ds):
    return obj("DaemonSet", ds)["spec"]["template"]["spec"]

def containers(spec, init=True):
    return spec.get("containers", []) + (spec.get("initContainers", []) if init else [])

def ctr(ds, name):
    found = [c for c in containers(pod_spec(ds)) if c["name"] == name]
    need(len(found) == 1, "DaemonSet %s has %d containers named %s" % (ds, len(found), name))
    return found[0]

def argv(c):
    return list(c.get("command", [])) + list(c.get("args", []))

def option(c, opt):
    a = argv(c)
    need(opt in a[:-1], "%s has no %s VALUE: %s" % (c["name"], opt, a))
    return a[a.index(opt) + 1]

def env(c, name):
    v = [e.get("value") for e in c.get("env", []) if e["name"] == name]
    need(len(v) == 1, "container %s: %s set %d times" % (c["name"], name, len(v)))
    return v[0]

def volume(spec, name):
    v = [v for v in spec.get("volumes", []) if v["name"] == name]
    need(len(v) == 1, "no volume %s" % name)
    return v[0]

def mount_at(spec, c, path):
    """The volumeMount of container c at path and its volume."""
    m = [m for m in c.get("volumeMounts", []) if m["mountPath"].rstrip("/") == path.rstrip("/")]
    need(len(m) == 1, "container %s mounts nothing at %s" % (c["name"], path))
    return m[0], volume(spec, m[0]["name"])

def covering_mount(spec, c, path):
    """The deepest volumeMount of container c that holds path."""
    best = None
    for m in c.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/") + "/"
        if (path.rstrip("/") + "/").startswith(mp) and (best is None or len(mp) > len(best["mountPath"])):
            best = m
    need(best is not None, "container %s: nothing mounted over %s" % (c["name"], path))
    return best, volume(spec, best["name"])

def bus_conf():
    return obj("ConfigMap", "tierd-bus")["data"]["bus.conf"]

def policy():
    return json.loads(obj("ConfigMap", "tierd-policy")["data"]["policy.json"])

def hook():
    """make install's hook definition: for a host, on the host's bus."""
    with open(HOOK) as f:
        return json.load(f)

def k8s_hook():
    """The DaemonSet's: the ConfigMap tierd-hook, on the pod's bus."""
    return json.loads(obj("ConfigMap", "tierd-hook")["data"]["tierd.json"])

def init_script():
    c = ctr("tierd", "install-hook")
    a = argv(c)
    need(a[:2] == ["sh", "-c"] and len(a) == 3, "install-hook does not run sh -c SCRIPT: %s" % a)
    return a[2]

# --- checks ---

def parse(path):
    with open(path) as f:
        n = len([d for d in yaml.safe_load_all(f) if d is not None])
    need(n > 0, "no document")
    for d in manifests()[os.path.basename(path)]:
        need(isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"),
             "a document without apiVersion, kind or metadata.name")

def parse_hook():
    hook()

def namespace(kind, name, ns):
    got = obj(kind, name)["metadata"].get("namespace")
    need(got == ns, "namespace %s" % got)

def priority(ds):
    got = pod_spec(ds).get("priorityClassName")
    need(got == "system-node-critical", "priorityClassName %s" % got)

def guaranteed(ds):
    for c in containers(pod_spec(ds)):
        r = c.get("resources", {})
        req, lim = r.get("requests", {}), r.get("limits", {})
        for k in ("cpu", "memory"):
            need(k in req and k in lim and str(req[k]) == str(lim[k]),
                 "container %s: %s request %s, limit %s" % (c["name"], k, req.get(k), lim.get(k)))

def host_pid(ds):
    need(pod_spec(ds).get("hostPID") is True, "hostPID is not true")

def privileged(ds, name):
    need(ctr(ds, name).get("securityContext", {}).get("privileged") is True, "not privileged")

def strategy(ds, kind):
    got = obj("DaemonSet", ds)["spec"].get("updateStrategy", {}).get("type", "RollingUpdate")
    need(got == kind, "updateStrategy %s" % got)

def tierd_command():
    want = ["/usr/sbin/tierd", "--policy", "/etc/tierd", "--holder", "/run/tierd/holder.sock",
            "--state-dir", "/var/lib/tierd"]
    need(argv(ctr("tierd", "tierd")) == want, "command %s" % argv(ctr("tierd", "tierd")))

def policy_mounted():
    spec, c = pod_spec("tierd"), ctr("tierd", "tierd")
    _, v = mount_at(spec, c, option(c, "--policy"))
    need(v.get("configMap", {}).get("name") == "tierd-policy", "--policy is not the ConfigMap tierd-policy: %s" % v)
    need("policy.json" in obj("ConfigMap", "tierd-policy")["data"], "tierd-policy has no policy.json")

def credentials_mounted():
    spec, c = pod_spec("tierd"), ctr("tierd", "tierd")
    for t in policy()["tenants"]:
        if "credentials" not in t:
            continue
        m, v = covering_mount(spec, c, t["credentials"])
        need(v.get("secret", {}).get("secretName") == "tierd-credentials",
             "%s: %s is not in the Secret tierd-credentials" % (t["name"], t["credentials"]))
        mode = v["secret"].get("defaultMode")
        need(mode is not None and mode & 0o077 == 0, "credentials mode %s (tierd wants 0600)" % mode)

def host_path(ds, ctr_name, path, host, kind):
    spec = pod_spec(ds)
    _, v = mount_at(spec, ctr(ds, ctr_name), path)
    hp = v.get("hostPath", {})
    need(hp.get("path") == host and hp.get("type", "") == kind, "volume at %s: %s" % (path, v))

def views_bidirectional():
    spec, c = pod_spec("tierd"), ctr("tierd", "tierd")
    m, v = mount_at(spec, c, "/srv/tierd")
    need(v.get("hostPath", {}).get("path") == "/srv/tierd", "/srv/tierd is not the host's: %s" % v)
    need(m.get("mountPropagation") == "Bidirectional", "mountPropagation %s" % m.get("mountPropagation"))

def policy_under_views():
    """tierd's own mounts (filesystems, views) land on the Bidirectional mount."""
    spec, c = pod_spec("tierd"), ctr("tierd", "tierd")
    p = policy()
    paths = [f["mountpoint"] for f in p.get("filesystems", [])] + [t["mount"] for t in p["tenants"]]
    need(any(f["mountpoint"] for f in p.get("filesystems", [])), "the policy names no filesystem")
    for path in paths:
        m, _ = covering_mount(spec, c, path)
        need(m.get("mountPropagation") == "Bidirectional", "%s is not under a Bidirectional mount" % path)

def bus_listen():
    root = ET.fromstring(bus_conf())
    listens = [e.text.strip() for e in root.findall("listen")]
    need(len(listens) == 1, "listen: %s" % listens)
    return listens[0]

def bus_address():
    addrs = {
        "tierd container": env(ctr("tierd", "tierd"), BUS_ADDRESS_ENV),
        "dbus container": env(ctr("tierd", "dbus"), BUS_ADDRESS_ENV),
        "hook JSON": [e.split("=", 1)[1] for e in k8s_hook()["hook"]["env"] if e.startswith(BUS_ADDRESS_ENV + "=")][0],
        "bus.conf listen": bus_listen(),
    }
    need(len(set(addrs.values())) == 1, "they differ: %s" % addrs)
    a = addrs["bus.conf listen"]
    need(a.startswith("unix:path=/run/tierd/"), "%s is not on the shared /run/tierd" % a)

def bus_config():
    root = ET.fromstring(bus_conf())
    need(root.findtext("type", "").strip() == "system", "type is not system")
    need([e.text.strip() for e in root.findall("auth")] == ["EXTERNAL"], "auth is not EXTERNAL only")
    need("/usr/share/dbus-1/system.d" in [e.text.strip() for e in root.findall("includedir")],
         "no <includedir>/usr/share/dbus-1/system.d</includedir>")
    default = [p for p in root.findall("policy") if p.get("context") == "default"]
    need(len(default) == 1, "no default policy")
    rules = [(r.tag, dict(r.attrib)) for r in default[0]]
    need(("deny", {"own": "*"}) in rules and ("deny", {"send_type": "method_call"}) in rules,
         "the default policy does not deny owning names and method calls")

def dbus_container():
    spec, c = pod_spec("tierd"), ctr("tierd", "dbus")
    a = argv(c)
    need(a[:3] == ["dbus-daemon", "--nofork", "--nopidfile"], "command %s" % a)
    conf = [x.split("=", 1)[1] for x in a if x.startswith("--config-file=")]
    need(len(conf) == 1, "no --config-file=")
    _, v = mount_at(spec, c, os.path.dirname(conf[0]))
    need(v.get("configMap", {}).get("name") == "tierd-bus", "%s is not from the ConfigMap tierd-bus" % conf[0])
    need(os.path.basename(conf[0]) in obj("ConfigMap", "tierd-bus")["data"], "tierd-bus has no %s" % conf[0])
    sock = bus_listen().split("=", 1)[1]
    m, _ = covering_mount(spec, c, sock)
    m2, _ = covering_mount(spec, ctr("tierd", "tierd"), sock)
    need(m["name"] == m2["name"] == "run", "the bus socket is not on the shared /run/tierd volume")

def liveness(probe="livenessProbe"):
    p = ctr("tierd", "tierd").get(probe, {}).get("exec", {}).get("command", [])
    need(len(p) == 2 and os.path.basename(p[0]) == "tierctl" and p[1] == "ping", "%s %s" % (probe, p))

def readiness():
    liveness("readinessProbe")

def metrics_endpoint():
    c, spec = ctr("tierd", "metrics"), pod_spec("tierd")
    a = argv(c)
    need(len(a) == 4 and os.path.basename(a[0]) == "tierctl" and a[1:3] == ["metrics", "--listen"],
         "command %s is not tierctl metrics --listen ADDRESS" % a)
    port = int(a[3].rsplit(":", 1)[1])
    ports = [p for p in c.get("ports", []) if p.get("name") == "metrics"]
    need(len(ports) == 1 and ports[0]["containerPort"] == port, "port metrics %s, --listen %s" % (ports, a[3]))
    sc = c.get("securityContext", {})
    need(sc.get("runAsUser") not in (None, 0) and sc.get("runAsNonRoot") is True, "it runs as root")
    need(sc.get("capabilities", {}).get("drop") == ["ALL"] and sc.get("allowPrivilegeEscalation") is False,
         "capabilities %s" % sc.get("capabilities"))
    need(not sc.get("privileged"), "privileged")
    need(env(c, BUS_ADDRESS_ENV) == env(ctr("tierd", "tierd"), BUS_ADDRESS_ENV), "not tierd's bus")
    sock = env(c, BUS_ADDRESS_ENV).split("=", 1)[1]
    m, _ = covering_mount(spec, c, sock)
    need(m["name"] == "run", "the bus socket is not on the shared /run/tierd volume")
    pm = obj("PodMonitor", "tierd")["spec"]
    labels = obj("DaemonSet", "tierd")["spec"]["template"]["metadata"]["labels"]
    need(all(labels.get(k) == v for k, v in pm["selector"]["matchLabels"].items()),
         "the PodMonitor's selector %s does not match the pods' labels %s" % (pm["selector"], labels))
    eps = pm["podMetricsEndpoints"]
    need(len(eps) == 1 and eps[0]["port"] == "metrics" and eps[0].get("path", "/metrics") == "/metrics",
         "podMetricsEndpoints %s" % eps)

def holder_socket():
    a = option(ctr("tierd", "tierd"), "--holder")
    b = option(ctr("tierd-holder", "holder"), "--socket")
    need(a == b, "tierd --holder %s, tierd-holder --socket %s" % (a, b))
    for ds, name in (("tierd", "tierd"), ("tierd-holder", "holder")):
        m, v = covering_mount(pod_spec(ds), ctr(ds, name), a)
        need(v.get("hostPath", {}).get("path") == "/run/tierd", "%s: %s is not on the host's /run/tierd" % (ds, a))

def walk_strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from walk_strings(k)
            yield from walk_strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from walk_strings(v)

def usr_paths():
    """Every /usr/... path named in the manifests' values (commands,
    probes, scripts, ConfigMaps; not YAML comments) and in the hook JSON."""
    found = set()
    for s in list(walk_strings(docs())) + list(walk_strings(hook())):
        for p in re.findall(r"(?<![\w./-])/usr/[\w.+@/-]*[\w.+@-]", s):
            found.add(p)
    for p in sorted(found):
        print(p)

def policy_json(out):
    with open(out, "w") as f:
        f.write(obj("ConfigMap", "tierd-policy")["data"]["policy.json"])

def hook_fields():
    h = hook()
    need(h.get("version") == "1.0.0", "version %s" % h.get("version"))
    need(h["hook"]["args"][:2] == ["tierctl", "oci-hook"], "args %s" % h["hook"]["args"])
    need(h["hook"]["path"] == "/usr/bin/tierctl", "path %s" % h["hook"]["path"])
    need(not any(e.startswith(BUS_ADDRESS_ENV + "=") for e in h["hook"].get("env", [])),
         "it names a bus: on a host, tierd.service is on the host's system bus")
    t = h["hook"].get("timeout")
    need(isinstance(t, int) and not isinstance(t, bool) and 0 < t <= 60, "timeout %s" % t)
    need({"createRuntime", "poststop"} <= set(h.get("stages", [])), "stages %s" % h.get("stages"))

def hook_when():
    """The runtime's match: Go regexp.MatchString on key and value."""
    ann = hook()["when"]["annotations"]
    def matches(k, v):
        return any(re.search(kr, k) and re.search(vr, v) for kr, vr in ann.items())
    need(matches("tierd.io/tenant", "team-a"), "a pod with tierd.io/tenant gets no hook")
    need(not matches("tierd.io/tenant-x", "team-a") and not matches("tierd.io/tenant", ""),
         "the hook runs for containers without a tenant")

def init_mounts():
    """install-hook's /host/X is the host's X; /etc/tierd-hook the hook."""
    spec, c = pod_spec("tierd"), ctr("tierd", "install-hook")
    _, v = mount_at(spec, c, "/etc/tierd-hook")
    need(v.get("configMap", {}).get("name") == "tierd-hook", "/etc/tierd-hook is not the ConfigMap tierd-hook")
    for m in c.get("volumeMounts", []):
        if m["mountPath"] == "/etc/tierd-hook":
            continue
        need(m["mountPath"].startswith("/host/"), "%s is not under /host" % m["mountPath"])
        hp = volume(spec, m["name"]).get("hostPath", {})
        need(hp.get("path") == m["mountPath"][len("/host"):] and hp.get("type") == "DirectoryOrCreate",
             "%s is not the host's %s: %s" % (m["mountPath"], m["mountPath"][5:], hp))
    for d in ("/opt/tierd", "/etc/containers/oci/hooks.d", "/run/tierd"):
        mount_at(spec, c, "/host" + d)

def init_script_at(root, dest, hookdir, out):
    """The script with /host, /usr and /etc/tierd-hook moved under scratch
    directories; it must name no other absolute path."""
    s = init_script()
    rest = re.sub(r"(?<![\w./-])/(host|usr|etc/tierd-hook)/", "", s)
    others = re.findall(r"(?<![\w./-])/[\w.-]+", rest)
    need(not others, "the script names paths outside /host, /usr and /etc/tierd-hook: %s" % others)
    s = re.sub(r"(?<![\w./-])/host/", dest.rstrip("/") + "/", s)
    s = re.sub(r"(?<![\w./-])/usr/", root.rstrip("/") + "/usr/", s)
    s = re.sub(r"(?<![\w./-])/etc/tierd-hook/", hookdir.rstrip("/") + "/", s)
    with open(out, "w") as f:
        f.write(s)

def installed_hook(path):
    with open(path) as f:
        need(json.load(f) == k8s_hook(), "differs from the ConfigMap tierd-hook")

def k8s_hook_fields():
    """The DaemonSet's hook is make install's with the host path of tierctl
    and the pod's bus, nothing else changed."""
    h = k8s_hook()
    need(h["hook"].get("path") == "/opt/tierd/bin/tierctl", "path %s" % h["hook"].get("path"))
    env = h["hook"].get("env", [])
    need(len(env) == 1 and env[0].startswith(BUS_ADDRESS_ENV + "="), "env %s" % env)
    h["hook"]["path"] = "/usr/bin/tierctl"
    del h["hook"]["env"]
    need(h == hook(), "differs from contrib/oci/tierd-hook.json in more than path and env")

def k8s_hook_json(out):
    with open(out, "w") as f:
        f.write(obj("ConfigMap", "tierd-hook")["data"]["tierd.json"])

def kernel_affinity(ds):
    """Scheduled on nodes labelled (by Node Feature Discovery) with a kernel
    of 6.14 or later, any taint tolerated."""
    spec = pod_spec(ds)
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    def admits(major, minor):
        labels = {"feature.node.kubernetes.io/kernel-version.major": str(major),
                  "feature.node.kubernetes.io/kernel-version.minor": str(minor)}
        def one(e):
            v = labels.get(e["key"])
            if v is None:
                return False
            if e["operator"] == "In":
                return v in e["values"]
            if e["operator"] == "Gt":
                return int(v) > int(e["values"][0])
            raise Fail("operator %s" % e["operator"])
        return any(all(one(e) for e in t["matchExpressions"]) for t in terms)
    for k in ((6, 14), (6, 18), (7, 0), (10, 1)):
        need(admits(*k), "refuses a node with kernel %d.%d" % k)
    for k in ((6, 13), (6, 1), (5, 19), (4, 20)):
        need(not admits(*k), "admits a node with kernel %d.%d" % k)
    need({"operator": "Exists"} in spec.get("tolerations", []), "tolerations %s" % spec.get("tolerations"))

def images(version):
    """Every tierd image is tagged with the Makefile's version."""
    for ds in ("tierd", "tierd-holder"):
        for c in containers(pod_spec(ds)):
            need(c["image"] == "tierd:" + version, "%s/%s: image %s" % (ds, c["name"], c["image"]))

def bus_conf_at(dest, root, out):
    s = bus_conf().replace("/usr/share/dbus-1/system.d", root.rstrip("/") + "/usr/share/dbus-1/system.d")
    s = s.replace(bus_listen(), "unix:path=" + dest)
    with open(out, "w") as f:
        f.write(s)

def pod_tenant():
    pod = obj("Pod", "tierd-example")
    md = pod["metadata"]
    ann, ns = md.get("annotations", {}), md.get("namespace")
    t = [t for t in policy()["tenants"] if t["name"] == ann.get("tierd.io/tenant")]
    need(len(t) == 1, "tenant %s is not in the example policy" % ann.get("tierd.io/tenant"))
    need(ns in t[0].get("namespaces", []), "namespace %s is not in %s's namespaces" % (ns, t[0]["name"]))
    mp = ann.get("tierd.io/mount-path", "/data")
    need(mp.startswith("/"), "tierd.io/mount-path %s is not absolute" % mp)
    need(ann.get("tierd.io/read-only", "false") in ("true", "false"), "tierd.io/read-only must be true or false")
    need(any(mp in " ".join(argv(c)) for c in pod["spec"]["containers"]), "no container reads %s" % mp)

if __name__ == "__main__":
    try:
        r = globals()[sys.argv[1].replace("-", "_")](*sys.argv[2:])
    except Fail as e:
        print("# %s: %s" % (sys.argv[1], e), file=sys.stderr)
        sys.exit(1)
    except Exception as e:
        print("# %s: %s: %s" % (sys.argv[1], type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
PY
export TL_ROOT
m() { python3 "$TL_DIR/m.py" "$@"; }

for f in "$TL_ROOT"/contrib/k8s/*.yaml; do
	check "contrib/k8s/$(basename "$f") parses (every YAML document)" m parse "$f"
done
check "contrib/oci/tierd-hook.json parses" m parse-hook
install_root() { make -s -C "$TL_ROOT" install DESTDIR="$ROOT" BUILD="$BUILD" >/dev/null; }
check "make install DESTDIR=..." install_root

for ds in tierd tierd-holder; do
	check "DaemonSet $ds: namespace kube-system" m namespace DaemonSet "$ds" kube-system
	check "DaemonSet $ds: priorityClassName system-node-critical" m priority "$ds"
	check "DaemonSet $ds: Guaranteed QoS (requests == limits, cpu and memory, every (init) container)" m guaranteed "$ds"
done
check "DaemonSet tierd: hostPID" m host-pid tierd
check "DaemonSet tierd: container tierd is privileged" m privileged tierd tierd
check "DaemonSet tierd: updateStrategy RollingUpdate" m strategy tierd RollingUpdate
check "DaemonSet tierd-holder: updateStrategy OnDelete (a rollout never restarts it)" m strategy tierd-holder OnDelete
check "tierd runs /usr/sbin/tierd --policy /etc/tierd --holder ... --state-dir /var/lib/tierd" m tierd-command
check "tierd's --policy is the ConfigMap tierd-policy (policy.json)" m policy-mounted
check "the policy's credentials files are in the Secret tierd-credentials, mode 0600" m credentials-mounted
check "tierd: hostPath /run/tierd (DirectoryOrCreate)" m host-path tierd tierd /run/tierd /run/tierd DirectoryOrCreate
check "tierd-holder: hostPath /run/tierd (DirectoryOrCreate)" \
	m host-path tierd-holder holder /run/tierd /run/tierd DirectoryOrCreate
check "tierd: hostPath /var/lib/tierd, its --state-dir" m host-path tierd tierd /var/lib/tierd /var/lib/tierd DirectoryOrCreate
check "tierd: hostPath /dev" m host-path tierd tierd /dev /dev Directory
check "tierd: the views' hostPath /srv/tierd has mountPropagation Bidirectional" m views-bidirectional
check "the policy's filesystems and views are under that Bidirectional mount" m policy-under-views
check "the holder socket is the same in both DaemonSets (--holder, --socket), on the host's /run/tierd" m holder-socket
check "DBUS_SYSTEM_BUS_ADDRESS: the same in the tierd and dbus containers, the hook JSON and bus.conf's <listen>" \
	m bus-address
check "bus.conf: a system bus, EXTERNAL auth, default deny, includes /usr/share/dbus-1/system.d" m bus-config
check "the dbus container runs dbus-daemon on bus.conf from the ConfigMap tierd-bus, socket on /run/tierd" \
	m dbus-container
check "tierd's liveness probe runs tierctl ping (answered at once, nothing counted)" m liveness
check "tierd's readiness probe too" m readiness
check "the metrics container: tierctl metrics --listen on its port metrics, non-root, no capabilities, tierd's bus; the PodMonitor selects the pods and that port" \
	m metrics-endpoint
for ds in tierd tierd-holder; do
	check "DaemonSet $ds: nodes with a 6.14+ kernel (NFD labels: 6.14, 7.0 in; 6.13, 5.19 out), every taint tolerated" \
		m kernel-affinity "$ds"
done
version=$(sed -n 's/^VERSION := //p' "$TL_ROOT/Makefile")
check "every tierd image is tierd:$version (the Makefile's version, not :latest)" m images "$version"

# Every binary and installed file the manifests and the hook name.
paths=$(m usr-paths)
check "the manifests and the hook name installed paths under /usr" test -n "$paths"
for p in $paths; do
	check "$p (named in the manifests or the hook) is installed by make install" test -e "$ROOT$p"
done
check "the bus policy is installed where bus.conf includes it" test -f "$ROOT/usr/share/dbus-1/system.d/org.tierd1.conf"

m policy-json "$TL_DIR/policy.json"
check "the example policy (ConfigMap tierd-policy) passes tierd --check-policy" \
	"$BUILD/tierd" --check-policy "$TL_DIR/policy.json"

# The bus config as the dbus container runs it, moved to a scratch socket
# and the installed bus policy.
bus_ok() {
	local out pid rc
	m bus-conf-at "$TL_DIR/bus/system_bus_socket" "$ROOT" "$TL_DIR/bus.conf" || return 1
	mkdir -p "$TL_DIR/bus"
	out=$(dbus-daemon --fork --nopidfile --print-pid=1 --config-file="$TL_DIR/bus.conf") || return 1
	pid=$(echo "$out" | sed -n 1p)
	TL_PIDS+=("$pid")
	DBUS_SYSTEM_BUS_ADDRESS=unix:path=$TL_DIR/bus/system_bus_socket dbus-send --system --print-reply \
		--dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.GetId >/dev/null
	rc=$?
	kill -TERM "$pid" 2>/dev/null
	return $rc
}
check "dbus-daemon starts on bus.conf (with the installed bus policy) and answers" bus_ok

check "hook JSON: version 1.0.0, tierctl oci-hook at /usr/bin/tierctl, a timeout, createRuntime and poststop" \
	m hook-fields
check "hook JSON: runs for a tierd.io/tenant annotation only" m hook-when
check "the DaemonSet's hook (ConfigMap tierd-hook): make install's, with /opt/tierd/bin/tierctl and the pod's bus" \
	m k8s-hook-fields

# The init container's script, run with /host and /usr moved to scratch
# directories: it installs tierctl and the hook (path /opt/tierd/bin/tierctl).
check "install-hook: /host/opt/tierd, /host/etc/containers/oci/hooks.d, /host/run/tierd are the host's" m init-mounts
HOST=$TL_DIR/host
mkdir -p "$HOST/opt/tierd" "$HOST/etc/containers/oci/hooks.d" "$HOST/run/tierd"
mkdir -p "$TL_DIR/hookcm" && m k8s-hook-json "$TL_DIR/hookcm/tierd.json"
check "install-hook's script names only /host, installed paths and its hook ConfigMap" \
	m init-script-at "$ROOT" "$HOST" "$TL_DIR/hookcm" "$TL_DIR/init.sh"
check "install-hook's script runs" sh "$TL_DIR/init.sh"
check "... it copies tierctl to the host's /opt/tierd/bin/tierctl" cmp -s "$ROOT/usr/bin/tierctl" "$HOST/opt/tierd/bin/tierctl"
check "... executable" test -x "$HOST/opt/tierd/bin/tierctl"
check "... it writes /etc/containers/oci/hooks.d/tierd.json: the ConfigMap's hook (the pod's bus)" \
	m installed-hook "$HOST/etc/containers/oci/hooks.d/tierd.json"
check "... it creates the bus socket's directory" test -d "$HOST/run/tierd/dbus"

check "the example pod's tierd.io/tenant is in the example policy and admits the pod's namespace" m pod-tenant
tl_summary
