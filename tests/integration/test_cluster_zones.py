#!/usr/bin/env python3
"""Failure domains and capacity-aware placement (docs/cluster.md, "Placement"): etcd,
datanodes with --zone and --reserve, the gateway --cluster, boto3.

test_lose_a_zone: nine datanodes in three zones (z0: dn-1, dn-4, dn-7; z1: dn-2, ...), RS(4,2):
- every group of every record has exactly two cells in each zone, on six distinct nodes;
  zest_cluster_fault_tolerance_zones is 1 on every node and `zest-admin status` says so;
- a whole zone SIGKILLed under a PUT load: PUTs go on (a failed PUT is retried: a dead
  coordinator or a group short of its quorum while the dead were still in the views; 503s),
  every PUT started once the views dropped the zone succeeds, and every acknowledged object
  reads back byte-identical with the zone down; groups written after it are node-distinct
  over the two zones left (three cells each), and the gauge and status say 0 zones may fail.

test_full_node: seven datanodes, dn-7 with a --reserve larger than its drive (it publishes
no free space): no cell of any new object lands on it, even for the PUTs it coordinates,
every PUT succeeds at its first attempt, and `zest-admin nodes` shows it with 0 bytes free
and 0 cells while the others hold them all.

Exits 77 without etcd or without the gateway's --cluster.
"""
import collections
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

ADMIN = os.environ.get("ZEST_ADMIN") or os.path.join(ch.zh.BUILD, "tools", "zest-admin")
BUCKET = "zones"
K, M = 4, 2
CELL = 64 << 10
SPG = 2
SIZES = [0, 1, 65537, 300000, 1 << 20, (1 << 20) + 7]
ZONES = 3
DOWN = 0  # the zone SIGKILLed: z0
RETRY_FOR = 90  # s: a PUT still failing after this is never acknowledged
SLOW = 3 if ch.zh.SANITIZED else 1


def zone_of(i):
    return f"z{(i - 1) % ZONES}"


def tls_flags(c):
    if not c.tls:
        return ["--insecure"]
    pem, key = c.client_cert("admin")
    return ["--tls-ca", c.certs["ca"], "--tls-cert", pem, "--tls-key", key]


def admin(c, *args):
    """zest-admin --json ARGS: the parsed JSON."""
    p = subprocess.run([ADMIN, "--cluster", c.etcd.endpoints, *tls_flags(c), "--json", *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1, 2), f"zest-admin {args}: exit {p.returncode}: {p.stderr}"
    return json.loads(p.stdout)


def groups(rec):
    """[(group, [node name per cell])] of a record's extents."""
    return [(g, [e["nodes"][i] for i in grp["cells"]])
            for e in rec["extents"] for g, grp in enumerate(e["groups"])]


def spread(c, key):
    """[(group, {zone: cells}, distinct nodes)] of the record of key."""
    out = []
    for g, names in groups(c.record(BUCKET, key)):
        z = collections.Counter(zone_of(int(n.split("-")[1])) for n in names)
        out.append((g, dict(z), len(set(names))))
    return out


class Load:
    """PUT threads, each PUT retried 0.5 s apart until it succeeds (RETRY_FOR at most)."""

    def __init__(self, c, threads=3):
        self.c = c
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked = {}      # key -> (size, sha256)
        self.failed = {}     # key -> errors
        self.first_try = []  # (start, key, ok at the first attempt)
        self.threads = [threading.Thread(target=self.run, args=(t,), daemon=True)
                        for t in range(threads)]
        for t in self.threads:
            t.start()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(300)
            assert not t.is_alive(), "a PUT thread hung"

    def run(self, t):
        s3 = self.c.s3(retries=0, read_timeout=60)
        i = 0
        while not self.stop.is_set():
            size = SIZES[(i + t) % len(SIZES)]
            key = f"load/t{t}/o{i:04d}"
            data = ch.body(key, size)
            errors = []
            t0 = time.time()
            while True:
                try:
                    s3.put_object(Bucket=BUCKET, Key=key, Body=data)
                    with self.lock:
                        self.acked[key] = (size, ch.digest(data))
                    break
                except Exception as e:  # botocore's many error classes: all count
                    errors.append((round(time.time() - t0, 1), *ch.error_code(e)))
                    if time.time() - t0 > RETRY_FOR:
                        with self.lock:
                            self.failed[key] = errors
                        break
                    time.sleep(0.5)
            with self.lock:
                self.first_try.append((t0, key, not errors, errors))
            i += 1


def verify(c, objects, what):
    s3 = c.s3(retries=2, read_timeout=60)
    bad = []
    for key, (size, sha) in sorted(objects.items()):
        try:
            got = ch.get_digest(s3, BUCKET, key)
        except Exception as e:
            bad.append((key, ch.error_code(e)))
            continue
        if got != (size, sha):
            bad.append((key, "differs", got[0], size))
    assert not bad, f"{what}: {len(bad)} of {len(objects)} objects wrong: {bad[:5]}"


def test_lose_a_zone():
    with ch.cluster(nodes=9, ec=f"{K}+{M}", cell_size=CELL, stripes_per_group=SPG, drives=1,
                    heal_after="600s", dn_base=120,
                    extra_dn=lambda i: ["--zone", zone_of(i)]) as c:
        if not ch.has_flag(ch.zh.DATANODE, "--zone"):
            raise ch.Skip("this zest-datanode has no --zone")
        s3 = c.s3(retries=2)
        s3.create_bucket(Bucket=BUCKET)
        objects = {}
        for i in range(12):
            key = f"before/o{i:02d}"
            data = ch.body(key, SIZES[i % len(SIZES)] + (1 << 20) * (i % 3))
            s3.put_object(Bucket=BUCKET, Key=key, Body=data)
            objects[key] = (len(data), ch.digest(data))
        ngroups = 0
        for key in objects:
            for g, z, distinct in spread(c, key):
                assert z == {"z0": 2, "z1": 2, "z2": 2} and distinct == K + M, (key, g, z)
                ngroups += 1
        assert ngroups > 12, ngroups
        for n in c.running_nodes():
            m = n.metrics()
            assert m.get("zest_cluster_fault_tolerance_zones") == 1, (n.node, m.get(
                "zest_cluster_fault_tolerance_zones"))
        st = admin(c, "status")
        assert st["zones"] == {"count": 3, "fault_tolerance": 1, "k": K, "m": M}, st["zones"]
        print(f"     {len(objects)} objects, {ngroups} groups: 2 cells per zone; one zone "
              "may fail", flush=True)

        # ---- a whole zone SIGKILLed under load
        load = Load(c)
        ch.wait_for("a few PUTs under load", lambda: len(load.acked) >= 6 or load.failed,
                    60 * SLOW, step=0.2)
        down = [i for i in c.nodes if zone_of(i) == f"z{DOWN}"]
        for i in down:
            c.kill(i)
        c.wait_live(9 - len(down))
        ch.wait_for("the gateway to see 6 live nodes",
                    lambda: c.gw.metrics().get("zest_cluster_live_nodes") == 6, 30)
        t_gone = time.time()
        n_gone = len(load.acked)
        ch.wait_for("PUTs going on without the zone",
                    lambda: len(load.acked) >= n_gone + 12 or load.failed, 90 * SLOW, step=0.2)
        load.join()
        assert not load.failed, f"PUTs never acknowledged: {list(load.failed.items())[:3]}"
        late = [(k, e) for t0, k, ok, e in load.first_try if t0 > t_gone + 2 and not ok]
        assert not late, f"PUTs after the views dropped the zone failed: {late[:3]}"
        retried = sum(1 for _, _, ok, _ in load.first_try if not ok)
        objects.update(load.acked)
        verify(c, objects, f"zone z{DOWN} down")
        for t0, key, _, _ in load.first_try:
            if t0 > t_gone + 2:
                for g, z, distinct in spread(c, key):
                    assert f"z{DOWN}" not in z and distinct == K + M, (key, g, z)
                    assert sorted(z.values()) == [3, 3], (key, g, z)
        # two zones left, three cells each: no whole zone may go now
        for n in c.running_nodes():
            assert n.metrics().get("zest_cluster_fault_tolerance_zones") == 0, n.node
        st = admin(c, "status")
        assert st["zones"] == {"count": 2, "fault_tolerance": 0, "k": K, "m": M}, st["zones"]
        print(f"     zone z{DOWN} ({len(down)} nodes) killed under load: {len(load.acked)} "
              f"PUTs acknowledged ({retried} retried), all {len(objects)} objects read back",
              flush=True)


def test_full_node():
    with ch.cluster(nodes=7, ec=f"{K}+{M}", cell_size=CELL, stripes_per_group=SPG, drives=2,
                    heal_after="600s", dn_base=140,
                    extra_dn=lambda i: ["--reserve", "1000TiB"] if i == 7 else []) as c:
        if not ch.has_flag(ch.zh.DATANODE, "--reserve"):
            raise ch.Skip("this zest-datanode has no --reserve")
        s3 = c.s3(retries=0)
        s3.create_bucket(Bucket=BUCKET)
        objects = {}
        for i in range(30):
            key = f"full/o{i:02d}"
            data = ch.body(key, SIZES[i % len(SIZES)])
            s3.put_object(Bucket=BUCKET, Key=key, Body=data)  # no retry: each must succeed
            objects[key] = (len(data), ch.digest(data))
        coordinated = ch.metric_sum(c.node(7).metrics(), "zest_cluster_forwarded_bytes_total")
        for key in objects:
            for g, names in groups(c.record(BUCKET, key)):
                assert "dn-7" not in names and len(set(names)) == K + M, (key, g, names)
        assert not c.node(7).cells(), sorted(c.node(7).cells())[:3]
        verify(c, objects, "one node full")
        nodes = {n["name"]: n for n in admin(c, "nodes")["nodes"]}
        assert set(nodes) == {f"dn-{i}" for i in range(1, 8)}, sorted(nodes)
        assert nodes["dn-7"]["free_bytes"] == 0 and nodes["dn-7"]["cells"] == 0, nodes["dn-7"]
        assert nodes["dn-7"]["capacity_bytes"] > 0, nodes["dn-7"]
        assert all(n["state"] == "live" for n in nodes.values()), nodes
        assert all(n["zone"] == name for name, n in nodes.items()), nodes
        cells = sum(n["cells"] for n in nodes.values())
        assert cells == sum((K + M) * len(groups(c.record(BUCKET, k))) for k in objects), cells
        text = subprocess.run([ADMIN, "--cluster", c.etcd.endpoints, *tls_flags(c), "nodes"],
                              capture_output=True, text=True, timeout=120)
        assert text.returncode == 0 and "dn-7" in text.stdout and "CELLS" in text.stdout, text
        print(f"     {len(objects)} PUTs, none on the full dn-7 (it forwarded "
              f"{coordinated:.0f} bytes as a coordinator), {cells} cells on the other six",
              flush=True)


if __name__ == "__main__":
    if not os.path.exists(ADMIN):
        print(f"skip: no {ADMIN}")
        sys.exit(77)
    ch.run([test_lose_a_zone, test_full_node])
