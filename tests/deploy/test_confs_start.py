#!/usr/bin/python3
"""tests/deploy/test_confs_start.py BINARY - every conf we ship starts the real
binary: the image's deploy/docker/verbproxy.conf, the ConfigMap's
verbproxy.conf (deploy/kubernetes/configmap.yaml) and the documented example
conf/verbproxy.conf. test_manifests.py checks that the files agree; this one
checks that the binary takes them (a directive the binary does not know, or a
value it refuses, stops start-up, and the pod would crash-loop).

Each runs as `verbproxy --config CONF` plus flags that move what the local
machine cannot give it (flags override the file): the client and admin
ports to free ones on 127.0.0.1, the upstream to a port nobody listens on
(start-up does not need Redis), and the ConfigMap's upstream-pass-file to a
temporary file (the Secret's mount is not here). Started means /healthz
answers 200 (`verbproxy --healthcheck`, what the image's HEALTHCHECK runs);
then SIGTERM must end it with status 0 (no client: the drain is immediate).

It then proves it can fail: the image's conf with one unknown directive
added must not start.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEADLINE_S = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def starts(binary, conf_text, tmp, name):
    """None when the conf starts and stops cleanly, else the reason."""
    conf = os.path.join(tmp, name)
    with open(conf, "w") as f:
        f.write(conf_text)
    pw = os.path.join(tmp, "password")
    with open(pw, "w") as f:
        f.write("unused\n")
    port, mport = free_port(), free_port()
    args = [binary, "--config", conf, "--bind", "127.0.0.1", "--port", str(port),
            "--metrics-port", str(mport), "--metrics-bind", "127.0.0.1",
            "--upstream", "127.0.0.1:%d" % free_port()]
    if "upstream-pass-file" in conf_text:
        args += ["--upstream-pass-file", pw]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERBPROXY_")}
    log = open(os.path.join(tmp, name + ".log"), "w+")
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        end = time.monotonic() + DEADLINE_S
        while True:
            if p.poll() is not None:
                log.seek(0)
                return "exited %d at start: %s" % (p.returncode, log.read().strip())
            hc = subprocess.run([binary, "--healthcheck", "127.0.0.1:%d/healthz" % mport],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if hc.returncode == 0:
                break
            if time.monotonic() > end:
                return "/healthz never answered 200 within %ds" % DEADLINE_S
            time.sleep(0.05)  # polling a condition with a deadline, not a sync sleep
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(DEADLINE_S)
        except subprocess.TimeoutExpired:
            return "still running %ds after SIGTERM" % DEADLINE_S
        if rc != 0:
            log.seek(0)
            return "SIGTERM: exit status %d: %s" % (rc, log.read().strip())
        return None
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()


def shipped_confs():
    with open(os.path.join(ROOT, "deploy", "docker", "verbproxy.conf")) as f:
        image = f.read()
    configmap = None
    with open(os.path.join(ROOT, "deploy", "kubernetes", "configmap.yaml")) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc.get("kind") == "ConfigMap":
                configmap = doc["data"]["verbproxy.conf"]
    with open(os.path.join(ROOT, "conf", "verbproxy.conf")) as f:
        example = f.read()
    return [("image.conf", image), ("configmap.conf", configmap), ("example.conf", example)]


def main():
    binary = os.path.abspath(sys.argv[1])
    bad = 0
    with tempfile.TemporaryDirectory(prefix="vt-confs-") as tmp:
        confs = shipped_confs()
        for name, text in confs:
            if text is None:
                print("FAIL %s: not found" % name)
                bad += 1
                continue
            why = starts(binary, text, tmp, name)
            print("%s %s%s" % ("FAIL" if why else "ok  ", name, ": " + why if why else ""))
            bad += why is not None
        # The check can fail: an unknown directive must stop start-up.
        why = starts(binary, confs[0][1] + "\nno-such-directive 1\n", tmp, "mutated.conf")
        if why is None or "exited" not in why:
            print("FAIL the mutation (an unknown directive) was not caught: %s" % why)
            bad += 1
        else:
            print("ok   an unknown directive stops start-up")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
