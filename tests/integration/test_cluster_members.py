#!/usr/bin/env python3
"""Cluster membership with a real etcd and real datanodes (docs/cluster.md): three
zest-datanode --cluster --node register /zest/nodes/<name> under a lease and
/zest/members/<name> without one; a datanode killed with SIGKILL drops out of /zest/nodes/
within the lease TTL while /zest/members/ keeps it, and is back once restarted; SIGTERM
revokes the lease at once; with etcd gone longer than the TTL the nodes lose their leases,
keep serving and register again when it is back; each node's /metrics counts the live nodes (and passes promtool
when it is installed); with etcd unreachable a datanode refuses to start, with a message.
etcd is read with etcdctl (Debian's etcd-client). Exits 77 without etcd or etcdctl.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402

ETCD = os.environ.get("ZEST_ETCD", "/usr/bin/etcd")
TTL = 10  # DN_CLUSTER_TTL_S


class Etcd:
    def __init__(self, root, certs=None):
        """certs: a zest-certs.sh folder with ca.pem and etcd.pem/.key: serve https and
        demand client certificates the CA signed."""
        self.root = root
        self.certs = certs
        self.client, self.peer = zh.free_port(), zh.free_port()
        self.endpoint = f"127.0.0.1:{self.client}"
        self.scheme = "https" if certs else "http"
        self.start()

    def start(self):
        """(Again) on the same ports and data dir: its leases come back with it."""
        root = self.root
        self.log = open(os.path.join(root, "etcd.log"), "ab")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "n0", "--data-dir", os.path.join(root, "etcd"),
             "--listen-client-urls", f"{self.scheme}://{self.endpoint}",
             "--advertise-client-urls", f"{self.scheme}://{self.endpoint}",
             *self.tls_server_args(),
             "--listen-peer-urls", f"http://127.0.0.1:{self.peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer}",
             "--initial-cluster", f"n0=http://127.0.0.1:{self.peer}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while self.ctl("endpoint", "health", check=False).returncode != 0:
            assert self.proc.poll() is None, "etcd exited"
            assert time.time() < deadline, "etcd did not come up"
            time.sleep(0.2)

    def tls_server_args(self):
        if not self.certs:
            return []
        c = self.certs
        return ["--cert-file", f"{c}/etcd.pem", "--key-file", f"{c}/etcd.key",
                "--trusted-ca-file", f"{c}/ca.pem", "--client-cert-auth"]

    def ctl(self, *args, check=True):
        tls = []
        if self.certs:
            c = self.certs
            tls = ["--cacert", f"{c}/ca.pem", "--cert", f"{c}/ctl.pem", "--key", f"{c}/ctl.key"]
        return subprocess.run(["etcdctl", "--endpoints", f"{self.scheme}://{self.endpoint}",
                               *tls, *args],
                              env=dict(os.environ, ETCDCTL_API="3"), capture_output=True,
                              check=check, timeout=20)

    def keys(self, prefix):
        out = self.ctl("get", "--prefix", prefix, "--keys-only").stdout.decode()
        return sorted(k for k in out.splitlines() if k)

    def kvs(self, prefix):
        """{key: (value bytes, lease)} through etcdctl's JSON (keys and values base64)."""
        j = json.loads(self.ctl("get", "--prefix", prefix, "-w", "json").stdout)
        return {base64.b64decode(kv["key"]).decode(): (base64.b64decode(kv.get("value", "")),
                                                       kv.get("lease", 0))
                for kv in j.get("kvs", [])}

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def tls_args():
    """Plaintext internal gRPC: --insecure once the datanode has TLS flags (it then
    requires one or the other), nothing before."""
    h = subprocess.run([zh.DATANODE, "--help"], capture_output=True, timeout=10).stdout
    return ["--insecure"] if b"--insecure" in h else []


def start_node(root, name, endpoint, drives=None):
    mport = zh.free_port()
    drives = drives or [os.path.join(root, name, f"d{i}") for i in range(3)]
    argv = [zh.DATANODE, "--listen", "127.0.0.1:0", "--metrics", f"127.0.0.1:{mport}",
            "--ec", "2+1", "--cluster", endpoint, "--node", name] + tls_args()
    for d in drives:
        os.makedirs(d, exist_ok=True)
        argv += ["--drive", d]
    return zh.Daemon(argv, os.path.join(root, f"{name}.log"), mport)


def drive_args(root, sub):
    out = []
    for i in range(3):
        d = os.path.join(root, sub, f"d{i}")
        os.makedirs(d, exist_ok=True)
        out += ["--drive", d]
    return out


def wait_for(what, cond, timeout):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def granted_ttl(etcd, lease):
    """The TTL etcd granted lease (an id as the key's JSON gives it), in seconds."""
    out = etcd.ctl("lease", "timetolive", format(lease, "x")).stdout.decode()
    m = re.search(r"granted with TTL\((\d+)s\)", out)
    assert m, out
    return int(m[1])


def live(node):
    return zh.metrics(node.metrics_port).get("zest_cluster_live_nodes")


def promtool(node):
    if not shutil.which("promtool"):
        return
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
        text = r.read()
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


def test_membership():
    root = tempfile.mkdtemp(prefix="zest-members-")
    etcd = Etcd(root)
    nodes = {}
    ok = False
    try:
        for name in ("dn-1", "dn-2", "dn-3"):
            nodes[name] = start_node(root, name, etcd.endpoint)
        assert etcd.keys("/zest/nodes/") == ["/zest/nodes/dn-1", "/zest/nodes/dn-2",
                                             "/zest/nodes/dn-3"]
        assert etcd.keys("/zest/members/") == ["/zest/members/dn-1", "/zest/members/dn-2",
                                               "/zest/members/dn-3"]
        kv = etcd.kvs("/zest/")
        for name in nodes:
            value, lease = kv[f"/zest/nodes/{name}"]
            assert lease != 0 and name.encode() in value and b"127.0.0.1:" in value
            assert kv[f"/zest/members/{name}"][1] == 0  # no lease
        for n in nodes.values():
            wait_for("3 live nodes in /metrics", lambda n=n: live(n) == 3, 60)
            assert zh.metrics(n.metrics_port)["zest_cluster_registered"] == 1
        promtool(nodes["dn-1"])

        # SIGKILL: the key stays until the lease runs out, then goes; members/ keeps it.
        # The lease is the node's TTL (etcd's own record of it: the time it takes to go
        # is etcd's expiry under whatever load the machine has, not ours to bound)
        lease = etcd.kvs("/zest/nodes/dn-2")["/zest/nodes/dn-2"][1]
        assert granted_ttl(etcd, lease) == TTL
        nodes["dn-2"].kill9()
        t0 = time.time()
        wait_for("dn-2's lease to expire",
                 lambda: "/zest/nodes/dn-2" not in etcd.keys("/zest/nodes/"), TTL + 60)
        gone = time.time() - t0
        print(f"dn-2 gone from /zest/nodes/ {gone:.1f} s after SIGKILL (TTL {TTL} s)")
        assert "/zest/members/dn-2" in etcd.keys("/zest/members/")
        wait_for("2 live nodes", lambda: live(nodes["dn-1"]) == 2, 60)

        # restarted on its drives: registered again, same member record
        first = etcd.kvs("/zest/members/dn-2")["/zest/members/dn-2"][0]
        nodes["dn-2"] = start_node(root, "dn-2", etcd.endpoint)
        assert "/zest/nodes/dn-2" in etcd.keys("/zest/nodes/")
        wait_for("3 live nodes again", lambda: live(nodes["dn-1"]) == 3, 60)
        assert etcd.kvs("/zest/members/dn-2")["/zest/members/dn-2"][0] != first

        # SIGTERM: the lease is revoked, the key goes at once
        assert nodes["dn-3"].stop() == 0
        assert "/zest/nodes/dn-3" not in etcd.keys("/zest/nodes/")
        assert "/zest/members/dn-3" in etcd.keys("/zest/members/")
        del nodes["dn-3"]

        # etcd gone for longer than the TTL: the nodes give their leases up, keep serving,
        # and register again once etcd is back (the path that re-registers from the keeper)
        for n in nodes.values():
            wait_for("2 live nodes", lambda n=n: live(n) == 2, 60)
        etcd.stop()
        for name, n in nodes.items():
            wait_for(f"{name} to give its lease up",
                     lambda n=n: zh.metrics(n.metrics_port)["zest_cluster_registered"] == 0,
                     TTL + 60)
            assert zh.metrics(n.metrics_port)["zest_cluster_live_nodes"] == 2
        etcd.start()
        for name, n in nodes.items():
            wait_for(f"{name} registered again",
                     lambda n=n: zh.metrics(n.metrics_port)["zest_cluster_registered"] == 1, 60)
            assert zh.metrics(n.metrics_port)["zest_cluster_registrations_total"] >= 2
        assert etcd.keys("/zest/nodes/") == ["/zest/nodes/dn-1", "/zest/nodes/dn-2"]

        # the same name twice: refused once the other's lease proves live (one TTL)
        dup = subprocess.run([zh.DATANODE, "--listen", "127.0.0.1:0", "--ec", "2+1",
                              "--cluster", etcd.endpoint, "--node", "dn-1"] +
                             drive_args(root, "dup") + tls_args(),
                             capture_output=True, timeout=TTL + 20)
        assert dup.returncode == 1, dup
        assert b"node name dn-1 is registered by a live process" in dup.stderr, dup.stderr

        # etcd unreachable at start: a clear refusal, not a hang
        t0 = time.time()
        down = subprocess.run([zh.DATANODE, "--listen", "127.0.0.1:0", "--ec", "2+1",
                               "--cluster", f"127.0.0.1:{zh.free_port()}", "--node", "dn-9"] +
                              drive_args(root, "down") + tls_args(),
                              capture_output=True, timeout=30)
        assert down.returncode == 1, down
        assert b"cannot register node=dn-9 in etcd at" in down.stderr, down.stderr
        print(f"etcd down: refused in {time.time() - t0:.1f} s")

        for name in list(nodes):
            assert nodes.pop(name).stop() == 0, f"{name} exited non-zero"
        assert etcd.keys("/zest/nodes/") == []
        ok = True
    finally:
        for n in nodes.values():
            n.kill9()
        etcd.stop()
        if ok:
            shutil.rmtree(root, ignore_errors=True)
        else:
            for f in sorted(os.listdir(root)):
                if f.endswith(".log"):
                    with open(os.path.join(root, f), "rb") as fh:
                        sys.stderr.write(f"----- {f} -----\n"
                                         f"{fh.read()[-4000:].decode(errors='replace')}\n")


def test_etcd_over_tls():
    """https etcd that demands client certificates: a datanode registers with its own
    --tls-* files (the cluster CA and its certificate), one without them is refused."""
    root = tempfile.mkdtemp(prefix="zest-members-tls-")
    certs = os.path.join(root, "certs")
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                        "zest-certs.sh")
    for args in (["ca", certs], ["server", certs, "etcd"], ["server", certs, "dn-1"],
                 ["client", certs, "ctl"]):
        subprocess.run([tool, *args], check=True, timeout=60)
    etcd = Etcd(root, certs)
    nodes = []
    ok = False
    try:
        url = f"https://{etcd.endpoint}"
        mport = zh.free_port()
        argv = [zh.DATANODE, "--listen", "127.0.0.1:0", "--metrics", f"127.0.0.1:{mport}",
                "--ec", "2+1", "--cluster", url, "--node", "dn-1",
                "--tls-ca", f"{certs}/ca.pem", "--tls-cert", f"{certs}/dn-1.pem",
                "--tls-key", f"{certs}/dn-1.key"] + drive_args(root, "dn-1")
        nodes.append(zh.Daemon(argv, os.path.join(root, "dn-1.log"), mport))
        wait_for("dn-1 registered over https", lambda: etcd.keys("/zest/nodes/") ==
                 ["/zest/nodes/dn-1"], 60)
        # no client certificate: etcd refuses the handshake, the node cannot register
        p = subprocess.run([zh.DATANODE, "--listen", "127.0.0.1:0", "--insecure",
                            "--ec", "2+1", "--cluster", url, "--node", "dn-2"] +
                           drive_args(root, "dn-2"), capture_output=True, timeout=60)
        assert p.returncode != 0, p.stderr.decode()
        assert etcd.keys("/zest/nodes/") == ["/zest/nodes/dn-1"]
        for n in nodes:
            assert n.stop() == 0
        nodes = []
        ok = True
    finally:
        for n in nodes:
            n.stop()
        etcd.stop()
        if ok and not os.environ.get("ZEST_KEEP"):
            shutil.rmtree(root, ignore_errors=True)
        elif not ok:
            print("kept", root)


if __name__ == "__main__":
    if not os.access(ETCD, os.X_OK) or not shutil.which("etcdctl"):
        print("skip: etcd (etcd-server) or etcdctl (etcd-client) is not installed")
        sys.exit(77)
    zh.run_tests([test_membership, test_etcd_over_tls])
