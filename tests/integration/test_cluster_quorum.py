#!/usr/bin/env python3
"""The cluster write quorum counts node failures, not cells (docs/cluster.md, "The write
quorum"): a real etcd, three zest-datanode --cluster over mutual TLS (fewer than the k+m = 6
cells of RS(4,2)), one drive each, and a gateway --cluster; boto3 PUTs.

- three live nodes: two cells of each group per node, so any one node may be lost; the
  default quorum (k+1: survive one node) takes a PUT, zest_cluster_fault_tolerance_nodes
  is 1, and the object still reads back with a node stopped;
- two live nodes: three cells each, six durable cells but losing either node leaves three
  of the four needed; the PUT is refused 503 before any cell is written, nothing visible,
  zest_cluster_fault_tolerance_nodes is 0;
- three live nodes, one of them SIGSTOPped during a PUT: the write gets its cells on the
  other two (pending, on their drives), then the stopped peer's time out, the group falls
  to four cells on two nodes (no node may go) and the PUT is refused 503 with those cells
  deleted;
- --write-quorum 4 (= k: no node loss asked for) on two live nodes: the PUT is taken.
Exits 77 without etcd, etcdctl or openssl.
"""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402
from test_cluster_write import decode_record  # noqa: E402

K, M = 4, 2
CELL = 64 << 10
SPG = 2
GROUP = K * CELL * SPG  # 512 KiB of object per block group
SANITIZED = os.environ.get("ZEST_SANITIZED") == "1"


def extent_cells(c, i):
    """{extent id (hex): cell files} on dn-i."""
    out = {}
    for p in c.cell_files(i):
        out.setdefault(os.path.basename(p).split(".")[0], []).append(p)
    return out


def record(c, key):
    v = c.etcd.get(f"/zest/objects/bkt/{key}")
    return decode_record(v) if v else None


def per_node(rec):
    """Per group: {node name: cells it holds}."""
    e = rec["extents"][0]
    out = []
    for g in e["groups"]:
        cnt = {}
        for i in g["cells"]:
            cnt[e["nodes"][i]] = cnt.get(e["nodes"][i], 0) + 1
        out.append(cnt)
    return out


def refused(s3, key, data):
    try:
        s3.put_object(Bucket="bkt", Key=key, Body=data)
    except Exception as e:  # botocore ClientError
        print(f"PUT {key}: {e}")
        return ch.error_code(e)
    raise AssertionError(f"PUT {key} was taken")


def absent(s3, key):
    try:
        s3.head_object(Bucket="bkt", Key=key)
    except Exception as e:
        return ch.error_code(e)[0] == 404
    return False


def wait_views(c, n):
    """Every running datanode and the gateway see n live nodes (the gateway reads a node
    absent from its view as missing)."""
    c.wait_live(n)
    ch.wait_for(f"the gateway to see {n} live nodes",
                lambda: c.gw.metrics().get("zest_cluster_live_nodes") == n, ch.LEASE_TTL)


def tolerance(c):
    return {n.node: n.metrics().get("zest_cluster_fault_tolerance_nodes")
            for n in c.running_nodes()}


def test_quorum():
    with ch.cluster(nodes=3, ec=f"{K}+{M}", cell_size=CELL, stripes_per_group=SPG, drives=1,
                    dn_base=70) as c:
        s3 = c.s3()
        s3.create_bucket(Bucket="bkt")
        data = ch.body(1, 3 * GROUP + 1000)  # three full groups and a short one

        # ---- three live nodes: 2+2+2 cells per group, survives any one node
        assert set(tolerance(c).values()) == {1}, tolerance(c)
        s3.put_object(Bucket="bkt", Key="a", Body=data)
        rec = record(c, "a")
        assert len(rec["extents"][0]["groups"]) == 4, rec
        for cnt in per_node(rec):
            assert sorted(cnt.values()) == [2, 2, 2], per_node(rec)
        c.stop_node(3)  # SIGTERM: its lease is revoked, the views drop it at once
        wait_views(c, 2)
        assert ch.get_digest(s3, "bkt", "a") == (len(data), ch.digest(data))
        print("three nodes: PUT taken, readable with one node gone")

        # ---- two live nodes: 3+3, no node may go: refused before any cell is written
        assert set(tolerance(c).values()) == {0}, tolerance(c)
        before = {i: extent_cells(c, i) for i in (1, 2)}
        code = refused(s3, "b", data)
        assert code[0] == 503, code
        assert absent(s3, "b")
        assert {i: extent_cells(c, i) for i in (1, 2)} == before
        print(f"two nodes: PUT refused {code}")

        # ---- a peer stopped mid-PUT: cells written on the others, then deleted at 503
        c.restart(3)
        wait_views(c, 3)
        rank = ch.place_rank("bkt", "d", [f"dn-{i}" for i in (1, 2, 3)])
        victim = int(rank[-1].split("-")[1])  # a node that does not coordinate "d"
        others = [i for i in (1, 2, 3) if i != victim]
        before = {i: set(extent_cells(c, i)) for i in (1, 2, 3)}
        c.node(victim).proc.send_signal(signal.SIGSTOP)
        res = {}

        def put():
            try:
                s3.put_object(Bucket="bkt", Key="d", Body=data)
                res["code"] = (200, None)
            except Exception as e:
                res["code"] = ch.error_code(e)

        t = threading.Thread(target=put)
        t.start()
        try:
            new = ch.wait_for(
                "the PUT's cells on the live peers",
                lambda: [x for i in others for x in set(extent_cells(c, i)) - before[i]], 60)
            t.join(60)
        finally:
            c.node(victim).proc.send_signal(signal.SIGCONT)
        assert not t.is_alive()
        assert res["code"][0] == 503, res
        assert absent(s3, "d")
        ch.wait_for("the refused PUT's cells to go",
                    lambda: not any(x in extent_cells(c, i) for x in new for i in (1, 2, 3)),
                    60)
        print(f"peer stopped mid-PUT: refused {res['code']}, its cells ({new[0]}) deleted")

        # ---- quorum k asks for no node loss: two live nodes take a PUT
        c.stop_node(3)
        for i in (1, 2):
            c.stop_node(i)
            c.node(i).argv += ["--write-quorum", str(K)]
            c.restart(i)
        wait_views(c, 2)
        s3.put_object(Bucket="bkt", Key="c", Body=data)
        for cnt in per_node(record(c, "c")):
            assert sorted(cnt.values()) == [3, 3], cnt
        assert ch.get_digest(s3, "bkt", "c") == (len(data), ch.digest(data))
        assert set(tolerance(c).values()) == {0}, tolerance(c)
        print("--write-quorum 4 on two nodes: PUT taken")


if __name__ == "__main__":
    ch.run([test_quorum])
