#!/usr/bin/env python3
"""The coordinator's cluster write path (docs/cluster.md, "Write and commit"): a real etcd
and six zest-datanode --cluster on 127.0.0.11-16 over mutual TLS (each node's certificate
names its address, for server and client use), one drive each; Writes go to dn-1 through
the datanode's own Write RPC (tests/integration/dn_client.c), which coordinates them.

- happy path (and a 1000-byte object, whose data cells 1-3 are empty, and an empty one):
  the record appears in etcd, names six distinct nodes per group, no cell
  missing; every cell file is on the node the record names, and the data cells put back
  together are the object; the coordinator copied no payload byte (its counters, and an
  LD_PRELOAD memcpy counter on the coordinator outside ASan);
- a Write to a missing bucket: NoSuchBucket;
- invisible until the commit: with a peer stopped (SIGSTOP) the Write waits and no record
  is in etcd; once the peer goes on, the Write commits;
- an overwrite deletes the cells of the record it replaced (DeleteCells);
- a peer killed mid-write: the Write commits, that peer's cells marked missing;
- two peers dead (write quorum k+1 = 5 of 6): 503 (UNAVAILABLE, zest code NO_QUORUM), no
  record, and the aborted write's cells are gone from the live nodes.
Exits 77 without etcd, etcdctl or openssl.
"""
import base64
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402
from test_cluster_members import Etcd, promtool  # noqa: E402

K, M = 4, 2
CELL = 64 << 10
SPG = 2
NODES = [f"dn-{i}" for i in range(1, 7)]
SANITIZED = os.environ.get("ZEST_SANITIZED") == "1"
DN_CLIENT = os.environ.get("ZEST_DN_CLIENT") or os.path.join(zh.BUILD, "tests", "integration",
                                                               "dn_client")
MEMCPY = os.environ.get("ZEST_MEMCPY_COUNT")


# ---- a protobuf reader, enough for ObjectRecord (rpc/cluster.proto) ----

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """[(field number, value)]: ints for varint/fixed, bytes for length-delimited."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0:
            v, i = varint(b, i)
        elif t == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif t == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        elif t == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError(f"wire type {t}")
        out.append((f, v))
    return out


def packed(b):
    out, i = [], 0
    while i < len(b):
        v, i = varint(b, i)
        out.append(v)
    return out


def decode_record(b):
    rec = {"size": 0, "etag": "", "extents": []}
    for f, v in fields(b):
        if f == 1:
            rec["size"] = v
        elif f == 2:
            rec["etag"] = v.decode()
        elif f == 3:
            rec["crc32c"] = v
        elif f == 6:
            e = {"nodes": [], "groups": [], "size": 0}
            for g, w in fields(v):
                if g == 1:
                    e["id"] = w
                elif g == 2:
                    e["size"] = w
                elif g == 3:
                    e["k"] = w
                elif g == 4:
                    e["m"] = w
                elif g == 5:
                    e["cell_size"] = w
                elif g == 6:
                    e["spg"] = w
                elif g == 7:
                    e["nodes"].append(w.decode())
                elif g == 8:
                    grp = {"cells": [], "missing": 0}
                    for h, x in fields(w):
                        if h == 1:
                            grp["cells"] += packed(x) if isinstance(x, bytes) else [x]
                        elif h == 2:
                            grp["missing"] = x
                    e["groups"].append(grp)
            rec["extents"].append(e)
    return rec


# ---- the cluster ----

def port_on(ip):
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, root, certs, name, ip, etcd):
        self.name, self.ip = name, ip
        self.drive = os.path.join(root, name, "d0")
        os.makedirs(self.drive, exist_ok=True)
        self.root, self.certs, self.etcd = root, certs, etcd
        self.memcpy_out = None
        self.start()

    def start(self, preload=False):
        self.port, self.mport = port_on(self.ip), zh.free_port()
        c = self.certs
        argv = [zh.DATANODE, "--listen", f"{self.ip}:{self.port}",
                "--metrics", f"127.0.0.1:{self.mport}", "--ec", f"{K}+{M}",
                "--cell-size", str(CELL), "--stripes-per-group", str(SPG),
                "--cluster", self.etcd.endpoint, "--node", self.name,
                "--tls-ca", f"{c}/ca.pem", "--tls-cert", f"{c}/{self.name}.pem",
                "--tls-key", f"{c}/{self.name}.key", "--drive", self.drive]
        env = None
        if preload:
            self.memcpy_out = os.path.join(self.root, f"{self.name}.memcpy")
            env = dict(os.environ, LD_PRELOAD=MEMCPY, ZEST_MEMCPY_OUT=self.memcpy_out)
        self.proc = None
        log = os.path.join(self.root, f"{self.name}.log")
        if env:
            old = os.environ.copy()
            os.environ.update(env)
            try:
                self.d = zh.Daemon(argv, log, self.mport)
            finally:
                os.environ.clear()
                os.environ.update(old)
        else:
            self.d = zh.Daemon(argv, log, self.mport)

    @property
    def target(self):
        return f"{self.ip}:{self.port}"

    def metrics(self):
        return zh.metrics(self.mport)

    def cells(self):
        """{(extent hex, group, cell): path} of the cell files on its drive."""
        out = {}
        for p in glob.glob(os.path.join(self.drive, "data", "*", "*.*.*")):
            ext, g, c = os.path.basename(p).split(".")
            out[(ext, int(g), int(c))] = p
        return out


def make_certs(d):
    sh = zh.CERTS_SH
    subprocess.run([sh, "ca", d], check=True, timeout=60)
    for i, name in enumerate(NODES, start=1):
        subprocess.run([sh, "server", d, name, f"IP:127.0.0.1{i},DNS:localhost"], check=True,
                       timeout=60)
    subprocess.run([sh, "client", d, "tool"], check=True, timeout=60)


def client(node, certs, *args, check=True, timeout=60):
    argv = [DN_CLIENT, "--target", node.target, "--cluster-ca", f"{certs}/ca.pem",
            "--cluster-cert", f"{certs}/tool.pem", "--cluster-key", f"{certs}/tool.key", *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"dn_client {args} failed: {p.stdout} {p.stderr}")
    return p


def record(etcd, bucket, key):
    kv = etcd.kvs(f"/zest/objects/{bucket}/{key}")
    v = kv.get(f"/zest/objects/{bucket}/{key}")
    return decode_record(v[0]) if v else None


def wait_for(what, cond, timeout):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def cell_len(size, g, c):
    """dn_coord_cell_len: the single-node layout of a cell file."""
    sb, gb = K * CELL, K * CELL * SPG
    start = g * gb
    if start >= size:
        return 0
    gl = min(size - start, gb)
    ns = (gl + sb - 1) // sb
    last = (ns - 1) * sb + (c if c < K else 0) * CELL
    return (ns - 1) * CELL + max(0, min(CELL, gl - last))


def check_cells(nodes, rec, data):
    """Every cell not missing is on the node the record names, with its length, and each
    data cell holds the object's bytes of its stripes."""
    e = rec["extents"][0]
    ext = f"{e['id']:016x}"
    by_name = {n.name: n for n in nodes}
    files = {}
    for g, grp in enumerate(e["groups"]):
        assert len(grp["cells"]) == K + M
        names = [e["nodes"][i] for i in grp["cells"]]
        assert len(set(names)) == K + M, names  # six nodes: one cell each
        for c, name in enumerate(names):
            if grp["missing"] & (1 << c):
                continue
            path = by_name[name].cells().get((ext, g, c))
            assert path, f"cell {ext}.{g}.{c} not on {name}"
            assert os.path.getsize(path) == cell_len(rec["size"], g, c), (g, c)
            files[(g, c)] = path
    gb = K * CELL * SPG
    for (g, c), path in files.items():
        if c >= K:
            continue
        want = b"".join(data[g * gb + st * K * CELL + c * CELL:][:CELL] for st in range(SPG))
        with open(path, "rb") as f:
            assert f.read() == want, f"data cell {g}.{c} does not hold its bytes"
    return ext


def copied(node):
    m = node.metrics()
    return zh.metric_sum(m, "zest_payload_copied_bytes_total")


def main():
    for tool in (os.environ.get("ZEST_ETCD", "/usr/bin/etcd"), "etcdctl", "openssl"):
        if not shutil.which(tool):
            print(f"skip: {tool} not installed")
            sys.exit(77)
    root = tempfile.mkdtemp(prefix="zest-cwrite-")
    certs = os.path.join(root, "certs")
    make_certs(certs)
    etcd = Etcd(root)
    nodes = []
    ok = False
    try:
        for i, name in enumerate(NODES, start=1):
            nodes.append(Node(root, certs, name, f"127.0.0.1{i}", etcd))
        coord = nodes[0]
        # the coordinator again, with the memcpy counter (not under ASan)
        if MEMCPY and not SANITIZED:
            coord.d.stop()
            coord.start(preload=True)
        for n in nodes:
            wait_for(f"{n.name} sees 6 nodes",
                     lambda n=n: n.metrics().get("zest_cluster_live_nodes") == 6, 10)
        etcd.ctl("put", "/zest/buckets/bkt", "")

        # ---- happy path: 1.5 MiB + 1000 bytes: three groups, the last one short
        data = os.urandom(3 * K * CELL * SPG // 2 + 1000)
        src = os.path.join(root, "obj")
        with open(src, "wb") as f:
            f.write(data)
        p = client(coord, certs, "put", "bkt", "k1", src)
        assert f"size={len(data)}" in p.stdout, p.stdout
        rec = record(etcd, "bkt", "k1")
        assert rec and rec["size"] == len(data), rec
        assert len(rec["extents"]) == 1 and len(rec["extents"][0]["groups"]) == 2
        assert all(g["missing"] == 0 for g in rec["extents"][0]["groups"]), rec
        ext1 = check_cells(nodes, rec, data)
        assert copied(coord) == 0
        m = coord.metrics()
        fwd = zh.metric_sum(m, "zest_cluster_forwarded_bytes_total")
        assert fwd > len(data), m  # 5 of 6 cells went to peers
        assert m["zest_cluster_fault_tolerance_nodes"] == M
        assert m["zest_cluster_etcd_txn_seconds_count"] >= 1
        assert m["zest_cluster_peer_write_seconds_count"] >= 5
        promtool(coord.d)  # the coordinator's series pass Prometheus' own check
        # (that the cells end committed on their nodes, CommitCells and dn_cell_commit, no
        # RPC shows: test_dn_coord checks it in the stores)
        print(f"happy path: {len(data)} bytes, extent {ext1}, forwarded {fwd:.0f} bytes")

        # ---- small and empty objects; a missing bucket is refused before the payload
        small = os.urandom(1000)
        with open(src, "wb") as f:
            f.write(small)
        client(coord, certs, "put", "bkt", "small", src)
        rec = record(etcd, "bkt", "small")
        assert rec["size"] == 1000 and len(rec["extents"][0]["groups"]) == 1, rec
        assert rec["etag"] == f"{rec['crc32c']:08x}", rec  # no ETag sent: its CRC32C
        check_cells(nodes, rec, small)  # data cells 1-3 hold no byte, parity 1000
        p = client(coord, certs, "put", "bkt", "empty", "-")
        assert "size=0" in p.stdout, p.stdout
        rec = record(etcd, "bkt", "empty")
        assert rec["size"] == 0 and rec["extents"][0]["groups"] == [], rec
        p = client(coord, certs, "put", "nob", "k", src, check=False)
        assert p.returncode == 1 and "NoSuchBucket: nob" in p.stdout, p.stdout
        assert copied(coord) == 0

        # ---- invisible until the commit: a peer stopped, the Write waits
        data2 = os.urandom(5 * K * CELL * SPG)  # 2.5 MiB: more than the window
        with open(src, "wb") as f:
            f.write(data2)
        peer = nodes[3]
        peer.d.proc.send_signal(signal.SIGSTOP)
        res = {}
        t = threading.Thread(target=lambda: res.update(p=client(coord, certs, "put", "bkt", "k1",
                                                                src, check=False)))
        t.start()
        time.sleep(2)
        assert t.is_alive(), f"the Write did not wait for the stopped peer: {res}"
        assert record(etcd, "bkt", "k1")["extents"][0]["id"] == int(ext1, 16)
        peer.d.proc.send_signal(signal.SIGCONT)
        t.join(60)
        assert res["p"].returncode == 0, res["p"].stdout + res["p"].stderr
        rec2 = record(etcd, "bkt", "k1")
        ext2 = check_cells(nodes, rec2, data2)
        assert ext2 != ext1
        # the overwrite deleted the replaced record's cells (DeleteCells, best effort)
        wait_for("the old extent's cells to go",
                 lambda: not any(k[0] == ext1 for n in nodes for k in n.cells()), 10)
        print("overwrite: invisible while a peer was stopped, old cells deleted")

        # ---- a peer killed mid-write: committed, its cells missing
        victim = nodes[5]
        victim.d.proc.send_signal(signal.SIGSTOP)
        res = {}
        t = threading.Thread(target=lambda: res.update(p=client(coord, certs, "put", "bkt", "k2",
                                                                src, check=False)))
        t.start()
        time.sleep(1.5)
        victim.d.proc.kill()
        victim.d.proc.wait()
        victim.d.log.close()
        t.join(60)
        assert res["p"].returncode == 0, res["p"].stdout + res["p"].stderr
        rec3 = record(etcd, "bkt", "k2")
        e3 = rec3["extents"][0]
        for grp in e3["groups"]:
            names = [e3["nodes"][i] for i in grp["cells"]]
            want = sum(1 << c for c, nm in enumerate(names) if nm == victim.name)
            assert grp["missing"] == want, (grp, names)
        assert any(g["missing"] for g in e3["groups"])
        check_cells(nodes[:5], rec3, data2)
        print("peer killed mid-write: committed with its cells missing")

        # ---- two peers dead: quorum lost, 503, nothing visible, nothing left behind
        nodes[4].d.kill9()
        nodes[4].d.log.close()
        live = nodes[:4]
        before = {n.name: set(n.cells()) for n in live}
        p = client(coord, certs, "put", "bkt", "k3", src, check=False)
        assert p.returncode == 1 and "ERR 14 " in p.stdout, p.stdout  # UNAVAILABLE
        assert "quorum" in p.stdout, p.stdout
        assert record(etcd, "bkt", "k3") is None
        # the abort waits for its cells' streams to end (up to the coordinator's 10 s
        # progress timeout) before DeleteCells: a loaded machine needs the margin
        wait_for("the aborted write's cells to go",
                 lambda: all(set(n.cells()) == before[n.name] for n in live), 40)
        print(f"two peers dead: {p.stdout.strip()}")

        for n in live:
            assert n.d.stop() == 0, f"{n.name} exited non-zero (leak check)"
        if coord.memcpy_out:
            with open(coord.memcpy_out) as f:
                counts = dict(kv.split("=") for kv in f.read().split())
            print(f"coordinator memcpy: {counts}")
            # our own code copied no payload: what the libraries copy (TLS) is theirs
            assert int(counts["program"]) < 64 << 10, counts
        ok = True
    finally:
        for n in nodes:
            if n.d.proc.poll() is None:
                n.d.proc.send_signal(signal.SIGCONT)
                n.d.proc.kill()
                n.d.proc.wait()
        etcd.stop()
        if not ok:
            for n in nodes:
                log = os.path.join(root, f"{n.name}.log")
                with open(log, "rb") as f:
                    tail = f.read()[-4000:].decode(errors="replace")
                sys.stderr.write(f"----- {n.name}.log (tail) -----\n{tail}\n")
        if ok and not os.environ.get("ZEST_KEEP"):
            shutil.rmtree(root, ignore_errors=True)
    print("ok")


if __name__ == "__main__":
    main()
