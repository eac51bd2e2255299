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
- an overwrite retires the cells of the record it replaced (DeleteCells), which go after
  --read-grace (1 s here; test_cluster_grace.py reads them meanwhile);
- a peer killed mid-write: the Write commits, that peer's cells marked missing;
- two peers dead (write quorum k+1 = 5 of 6): 503 (UNAVAILABLE, zest code NO_QUORUM), no
  record, and the aborted write's cells are gone from the live nodes.
Exits 77 without etcd, etcdctl or openssl.
"""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

K, M = 4, 2
CELL = 64 << 10
SPG = 2
# test_s3_cluster_strict.py reads records with this name
decode_record = ch.decode_record


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
            assert os.path.getsize(path) == ch.cell_len(rec["size"], g, c, K, CELL, SPG), (g, c)
            files[(g, c)] = path
    for (g, c), path in files.items():
        if c >= K:
            continue
        with open(path, "rb") as f:
            assert f.read() == ch.data_cell_bytes(data, g, c, K, CELL, SPG), \
                f"data cell {g}.{c} does not hold its bytes"
    return ext


def copied(node):
    m = node.metrics()
    return ch.metric_sum(m, "zest_payload_copied_bytes_total")


def put_waiting(c, key, src):
    """dn_client's put of src as bkt/key to dn-1 in a thread: (thread, {"p": its result})."""
    res = {}
    t = threading.Thread(target=lambda: res.update(p=c.dn_client(1, "put", "bkt", key, src,
                                                                 check=False)))
    t.start()
    return t, res


def test_cluster_write():
    # six datanodes on 127.0.0.11-16, one drive each (under memcheck in `make memcheck`); the
    # coordinator dn-1 with the memcpy counter (not under ASan)
    with ch.cluster(nodes=6, ec=f"{K}+{M}", gateway=False, drives=1, cell_size=CELL,
                    stripes_per_group=SPG, tls=True, dn_base=10, valgrind=True,
                    memcpy=(1,), read_grace="1s") as c:
        root, etcd = c.root, c.etcd
        nodes = [c.node(i) for i in range(1, 7)]
        coord = c.node(1)
        etcd.ctl("put", "/zest/buckets/bkt", "")

        # ---- happy path: 1.5 MiB + 1000 bytes: three groups, the last one short
        data = os.urandom(3 * K * CELL * SPG // 2 + 1000)
        src = os.path.join(root, "obj")
        with open(src, "wb") as f:
            f.write(data)
        p = c.dn_client(1, "put", "bkt", "k1", src)
        assert f"size={len(data)}" in p.stdout, p.stdout
        rec = c.record("bkt", "k1")
        assert rec and rec["size"] == len(data), rec
        assert len(rec["extents"]) == 1 and len(rec["extents"][0]["groups"]) == 2
        assert all(g["missing"] == 0 for g in rec["extents"][0]["groups"]), rec
        ext1 = check_cells(nodes, rec, data)
        assert copied(coord) == 0
        m = coord.metrics()
        fwd = ch.metric_sum(m, "zest_cluster_forwarded_bytes_total")
        assert fwd > len(data), m  # 5 of 6 cells went to peers
        assert m["zest_cluster_fault_tolerance_nodes"] == M
        assert m["zest_cluster_etcd_txn_seconds_count"] >= 1
        assert m["zest_cluster_peer_write_seconds_count"] >= 5
        coord.promtool()  # the coordinator's series pass Prometheus' own check
        # (that the cells end committed on their nodes, CommitCells and dn_cell_commit, no
        # RPC shows: test_dn_coord checks it in the stores)
        print(f"happy path: {len(data)} bytes, extent {ext1}, forwarded {fwd:.0f} bytes")

        # ---- small and empty objects; a missing bucket is refused before the payload
        small = os.urandom(1000)
        with open(src, "wb") as f:
            f.write(small)
        c.dn_client(1, "put", "bkt", "small", src)
        rec = c.record("bkt", "small")
        assert rec["size"] == 1000 and len(rec["extents"][0]["groups"]) == 1, rec
        assert rec["etag"] == f"{rec['crc32c']:08x}", rec  # no ETag sent: its CRC32C
        check_cells(nodes, rec, small)  # data cells 1-3 hold no byte, parity 1000
        p = c.dn_client(1, "put", "bkt", "empty", "-")
        assert "size=0" in p.stdout, p.stdout
        rec = c.record("bkt", "empty")
        assert rec["size"] == 0 and rec["extents"][0]["groups"] == [], rec
        p = c.dn_client(1, "put", "nob", "k", src, check=False)
        assert p.returncode == 1 and "NoSuchBucket: nob" in p.stdout, p.stdout
        assert copied(coord) == 0

        # ---- invisible until the commit: a peer stopped, the Write waits
        data2 = os.urandom(5 * K * CELL * SPG)  # 2.5 MiB: more than the window
        with open(src, "wb") as f:
            f.write(data2)
        peer = nodes[3]
        peer.proc.send_signal(signal.SIGSTOP)
        t, res = put_waiting(c, "k1", src)
        time.sleep(2)
        assert t.is_alive(), f"the Write did not wait for the stopped peer: {res}"
        assert c.record("bkt", "k1")["extents"][0]["id"] == int(ext1, 16)
        peer.proc.send_signal(signal.SIGCONT)
        t.join(60)
        assert res["p"].returncode == 0, res["p"].stdout + res["p"].stderr
        rec2 = c.record("bkt", "k1")
        ext2 = check_cells(nodes, rec2, data2)
        assert ext2 != ext1
        # the overwrite retired the replaced record's cells (DeleteCells, best effort), and
        # the collectors delete them after the read grace
        ch.wait_for("the old extent's cells to go",
                 lambda: not any(k[0] == ext1 for n in nodes for k in n.cells()), 60)
        print("overwrite: invisible while a peer was stopped, old cells deleted")

        # ---- a peer killed mid-write: committed, its cells missing
        victim = nodes[5]
        victim.proc.send_signal(signal.SIGSTOP)
        t, res = put_waiting(c, "k2", src)
        time.sleep(1.5)
        c.kill(6)  # SIGKILL, still stopped
        t.join(60)
        assert res["p"].returncode == 0, res["p"].stdout + res["p"].stderr
        rec3 = c.record("bkt", "k2")
        e3 = rec3["extents"][0]
        for grp in e3["groups"]:
            names = [e3["nodes"][i] for i in grp["cells"]]
            want = sum(1 << j for j, nm in enumerate(names) if nm == victim.name)
            assert grp["missing"] == want, (grp, names)
        assert any(g["missing"] for g in e3["groups"])
        check_cells(nodes[:5], rec3, data2)
        print("peer killed mid-write: committed with its cells missing")

        # ---- two peers dead: quorum lost, 503, nothing visible, nothing left behind
        c.kill(5)
        live = nodes[:4]
        before = {n.name: set(n.cells()) for n in live}
        p = c.dn_client(1, "put", "bkt", "k3", src, check=False)
        assert p.returncode == 1 and "ERR 14 " in p.stdout, p.stdout  # UNAVAILABLE
        assert "quorum" in p.stdout, p.stdout
        assert c.record("bkt", "k3") is None
        # the abort waits for its cells' streams to end (up to the coordinator's 10 s
        # progress timeout) before DeleteCells: a loaded machine needs the margin
        ch.wait_for("the aborted write's cells to go",
                 lambda: all(set(n.cells()) == before[n.name] for n in live), 40)
        print(f"two peers dead: {p.stdout.strip()}")

        c.stop_nodes()  # dn-1..dn-4, each exiting 0
        if c.memcpy:
            counts = c.memcpy_counts(1)
            print(f"coordinator memcpy: {counts}")
            assert counts is not None, "the memcpy counter wrote nothing for the coordinator"
            # our own code copied no payload: what the libraries copy (TLS) is theirs
            assert counts["program"] < 64 << 10, counts


if __name__ == "__main__":
    ch.run([test_cluster_write], gateway=False)
