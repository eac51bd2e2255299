#!/usr/bin/env python3
"""Membership only for the cluster's own nodes (docs/cluster.md, "Membership"): a
registration in etcd is a claim, and a node counts as live for placement only once its
peers and the gateway reached it over mutual TLS with a certificate of the cluster CA that
names it. A real etcd (https, client certificates), four datanodes dn-1..dn-4 of the
cluster CA, RS(2,1), the gateway --cluster, and two registrations that are not the
cluster's own:

- dn-7, a real zest-datanode whose certificate comes from another CA. It holds etcd
  credentials (etcd also trusts its CA, and its --tls-ca names both), so it registers, but
  no genuine node or gateway accepts its certificate;
- dn-8, a NodeInfo written into etcd by hand under a lease, whose address is dn-1's: the
  datanode there shows a certificate of the right CA that names dn-1, not dn-8.

Before the fix both counted live (6 of 4 nodes) and were placed on: PUTs were acknowledged
with a cell on dn-7 missing, and cells "on dn-8" were really dn-1's. Now: neither is ever
placed (no record names a cell on them), no record has a missing bit and /zest/heal/ stays
empty, every object reads back; every datanode and the gateway count 4 live nodes and
report 2 in zest_cluster_unverified_nodes, and each logs each of them once.
Then dn-8 moves to dn-2's address (a new registration, probed again): still left out,
dn-2 still live, the next PUTs as clean. Also: a datanode given a certificate that does
not name its --node refuses to start (exit 2), naming the names the certificate has.
Exits 77 without etcd, etcdctl or openssl, or with ZEST_INSECURE=1 (nothing to verify).
"""
import base64
import json
import os
import ssl
import struct
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

GENUINE = ["dn-1", "dn-2", "dn-3", "dn-4"]
BAD = ["dn-7", "dn-8"]
CELL = 64 << 10
SPG = 2
OBJECTS = 24


def pb_bytes(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def node_info(name, address, incarnation):
    """cluster/cluster.proto's NodeInfo: name, address, incarnation, state UP, capacity."""
    return (pb_bytes(1, name.encode()) + pb_bytes(2, address.encode()) +
            varint(3 << 3 | 1) + struct.pack("<Q", incarnation) +
            varint(4 << 3) + varint(1) +
            varint(6 << 3) + varint(1 << 40) + varint(7 << 3) + varint(1 << 40))


class EtcdJson:
    """etcd's JSON gateway over https with the etcdctl client certificate: a lease and a
    put of binary values (etcdctl takes values as arguments)."""

    def __init__(self, c):
        d = c.certs["dir"]
        self.url = c.etcd.member_endpoint(0)
        self.ctx = ssl.create_default_context(cafile=f"{d}/ca.pem")
        self.ctx.check_hostname = False  # etcd's certificate names its IP; checked by CA
        self.ctx.load_cert_chain(f"{d}/etcdctl.pem", f"{d}/etcdctl.key")

    def call(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
            return json.loads(r.read())

    def lease(self, ttl):
        return self.call("/v3/lease/grant", {"TTL": ttl})["ID"]

    def put(self, key, value, lease):
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        self.call("/v3/kv/put", {"key": b64(key.encode()), "value": b64(value),
                                 "lease": lease})


def foreign_ca(c):
    """Another CA and a certificate of it naming dn-7: (CA bundle, pem, key)."""
    d = os.path.join(c.root, "foreign")
    subprocess.run([ch.CERTS_SH, "ca", d], check=True, timeout=60)
    host = f"{ch.NET}.{c.dn_base + 7}"
    subprocess.run([ch.CERTS_SH, "server", d, "dn-7", f"IP:{host},DNS:localhost"],
                   check=True, timeout=60)
    bundle = os.path.join(d, "both.pem")
    with open(bundle, "wb") as out:  # it trusts etcd (the cluster CA) and its own CA
        for f in (f"{d}/ca.pem", c.certs["ca"]):
            with open(f, "rb") as src:
                out.write(src.read())
    return bundle, f"{d}/dn-7.pem", f"{d}/dn-7.key"


def views(c):
    """[(daemon, live, unverified)] of every genuine datanode and the gateway."""
    out = []
    for i in range(1, 5):
        m = c.node_metrics(i)
        out.append((f"dn-{i}", m.get("zest_cluster_live_nodes"),
                    m.get("zest_cluster_unverified_nodes")))
    m = c.gw_metrics_now()
    out.append(("s3gw", m.get("zest_cluster_live_nodes"), m.get("zest_cluster_unverified_nodes")))
    return out


def log_count(path, text):
    with open(path, errors="replace") as f:
        return f.read().count(text)


def left_out_logged(c, name):
    """{log file: how often that genuine daemon logged `name` left out of its view}."""
    logs = [c.node(i).log_path for i in range(1, 5)] + [c.gw.log_path]
    return {p: log_count(p, f"members: node={name} address=") for p in logs}


def check_records(c, keys):
    for key in keys:
        rec = c.record("idb", key)
        assert rec, key
        for e in rec["extents"]:
            assert set(e["nodes"]) <= set(GENUINE), (key, e["nodes"])
            for g, grp in enumerate(e["groups"]):
                assert grp["missing"] == 0, (key, g, grp)
    assert c.etcd.keys("/zest/heal/") == [], c.etcd.keys("/zest/heal/")


def test_start_needs_own_name():
    """A datanode whose certificate names another node does not start (before etcd)."""
    if ch.zh.INSECURE:
        raise ch.Skip("ZEST_INSECURE=1: no certificates")
    d = ch.zh.certs()["dir"]
    subprocess.run([ch.CERTS_SH, "server", d, "dn-1", "IP:127.0.0.1"], check=True, timeout=60)
    drive = os.path.join(d, "id-drive")
    os.makedirs(drive, exist_ok=True)
    p = subprocess.run([ch.zh.DATANODE, "--drive", drive, "--listen", "127.0.0.1:0",
                        "--tls-ca", f"{d}/ca.pem", "--tls-cert", f"{d}/dn-1.pem",
                        "--tls-key", f"{d}/dn-1.key", "--cluster", "https://127.0.0.1:1",
                        "--node", "dn-9"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert 'does not name node "dn-9"' in p.stderr and "DNS entries: " in p.stderr, p.stderr
    assert "dn-1" in p.stderr, p.stderr


def test_foreign_nodes_never_placed():
    if ch.zh.INSECURE:
        raise ch.Skip("ZEST_INSECURE=1: plaintext authenticates nothing")
    root = tempfile.mkdtemp(prefix="zest-cl-id-")
    # the other CA exists before etcd starts, so etcd takes its client certificates too
    pre = os.path.join(root, "foreign")
    subprocess.run([ch.CERTS_SH, "ca", pre], check=True, timeout=60)
    with ch.cluster(nodes=4, ec="2+1", cell_size=CELL, stripes_per_group=SPG, root=root,
                    etcd_trust=[f"{pre}/ca.pem"]) as c:
        s3 = c.s3()
        s3.create_bucket(Bucket="idb")
        bundle, pem, key = foreign_ca(c)
        # ---- dn-7: a real datanode of another CA, registered
        c.add_node(7, tls_files=(bundle, pem, key))
        # ---- dn-8: a registration by hand at dn-1's address (dn-1's certificate there)
        ej = EtcdJson(c)
        lease = ej.lease(600)
        ej.put("/zest/nodes/dn-8", node_info("dn-8", c.node(1).address, 0x1234567890abcdef),
               lease)
        c.wait_registered(GENUINE + BAD)
        ch.wait_for("every genuine view: 4 live, 2 unverified",
                    lambda: all(v[1:] == (4, 2) for v in views(c)), 60)
        # ---- PUTs with every genuine node live: none on them, none missing
        keys = []
        for i in range(OBJECTS):
            k = f"o{i}"
            s3.put_object(Bucket="idb", Key=k, Body=ch.body(i, 2 * CELL * SPG + i * 777))
            keys.append(k)
        check_records(c, keys)
        for i, k in enumerate(keys):
            got = s3.get_object(Bucket="idb", Key=k)["Body"].read()
            assert got == ch.body(i, 2 * CELL * SPG + i * 777), k
        # the coordinator placed through the same view: every group on the genuine nodes
        assert sum(len(c.node(i).cells()) for i in range(1, 5)) > 0
        assert c.node(7).cells() == {}, c.node(7).cells()
        # reported: the metric (above) and one log line per process and node
        for name in BAD:
            counts = left_out_logged(c, name)
            assert all(n == 1 for n in counts.values()), (name, counts)
        assert all(v[1:] == (4, 2) for v in views(c)), views(c)

        # ---- dn-8 moves to dn-2's address: still not dn-8, dn-2 still live
        ej.put("/zest/nodes/dn-8", node_info("dn-8", c.node(2).address, 0x1234567890abcdee),
               lease)
        more = []
        for i in range(OBJECTS, OBJECTS + 8):
            k = f"o{i}"
            s3.put_object(Bucket="idb", Key=k, Body=ch.body(i, 2 * CELL * SPG + i))
            more.append(k)
        check_records(c, keys + more)
        assert all(v[1:] == (4, 2) for v in views(c)), views(c)
        c.stop_nodes()  # dn-7 too, each exiting 0


if __name__ == "__main__":
    ch.run([test_start_needs_own_name, test_foreign_nodes_never_placed])
