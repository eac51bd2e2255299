#!/usr/bin/env python3
"""Drain, decommission and maintenance windows (docs/operations.md "Retire a node",
"Maintenance window", docs/cluster.md "Drains and maintenance windows"): etcd, seven
datanodes over mTLS, RS(4,2), the gateway --cluster, boto3, zest-admin. Objects written over
the seven nodes, HEALTH_OK, then:

- `zest-admin maintenance dn-3 --for 5m`: status WARN maintenance (not node_absent),
  ok-to-stop of another node counts dn-3 as stopping too; dn-3 SIGSTOPped until its
  registration expires, then heal_after + 5 healer passes on every other node: no cell
  rebuilt (zest_heal_cells_total unchanged; with seven nodes each group with a cell on dn-3
  has a live node free of it, so without the window they would be), status still WARN
  maintenance and no node_absent; `maintenance dn-3 --end` and SIGCONT: the key gone,
  HEALTH_OK, every object byte-identical;
- `zest-admin drain dn-7`: every node's placement view drops it
  (zest_cluster_placement_nodes); status is WARN node_draining at every sample until
  dn-7's own count of its cells (drains[].cells_left) is 0, never OK; then no record names
  a cell on dn-7, every group keeps k + m node-distinct cells with no missing bit, every
  object (also those written during the drain) reads back byte-identical, the moves
  (zest_heal_moved_cells_total) are exactly the cells dn-7 held when the drain began (none
  of the later writes placed one there), and every live node has a progress key;
- `zest-admin decommission dn-7`: its registration, member, drain and progress keys go,
  its drive holds no cell file once the read grace has passed (the retired copies
  collected), status is HEALTH_OK without dn-7, every object reads back.

States and counts are asserted, never elapsed time. Exits 77 without etcd or the gateway's
--cluster.
"""
import collections
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402
import test_cluster_health as th  # noqa: E402  (zest-admin --json helpers)

BUCKET = "drain"
K, M = 4, 2
CELL = 64 << 10
SPG = 2
SIZES = [1, 4095, 65536, 300000, 600000, 1 << 20]
HEAL_AFTER = 4  # s: a healer pass every second; dn-3's absence would heal in seconds
SLOW = 3 if ch.zh.SANITIZED else 1
DRAIN, MAINT = 7, 3


def groups(rec):
    """[(extent hex, group, [node name per cell], missing)] of a record."""
    out = []
    for e in rec["extents"]:
        for g, grp in enumerate(e["groups"]):
            out.append((f"{e['id']:016x}", g, [e["nodes"][i] for i in grp["cells"]],
                        grp["missing"]))
    return out


def cells_on(c, objects, name):
    return sum(names.count(name) for key in objects
               for _, _, names, _ in groups(c.record(BUCKET, key)))


def verify(c, objects, what):
    s3 = c.s3(retries=3, read_timeout=60)
    bad = []
    for key, data in sorted(objects.items()):
        try:
            got = ch.get_digest(s3, BUCKET, key)
        except Exception as e:  # botocore's many error classes: all count
            bad.append((key, ch.error_code(e)))
            continue
        if got != (len(data), ch.digest(data)):
            bad.append((key, "differs", got[0]))
    assert not bad, f"{what}: {len(bad)} objects wrong: {bad[:5]}"


def drain_of(st, name):
    for d in st.get("drains", []):
        if d["node"] == name:
            return d
    return None


def put(s3, objects, prefix, n):
    for i in range(n):
        key = f"{prefix}{i:02d}"
        data = ch.body(key, SIZES[i % len(SIZES)])
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
        objects[key] = data


def admin_ok(c, *args):
    rc, out = th.admin(c, *args)
    assert rc == 0, (args, rc, out)
    return out


def test_drain():
    with ch.cluster(nodes=7, ec=f"{K}+{M}", cell_size=CELL, stripes_per_group=SPG, drives=1,
                    heal_after=f"{HEAL_AFTER}s", gc_grace="20s", read_grace="1s", tls=True,
                    dn_base=100) as c:
        if not ch.has_flag(ch.zh.DATANODE, "--heal-after"):
            raise ch.Skip("this zest-datanode has no healer")
        dn_drain, dn_maint = f"dn-{DRAIN}", f"dn-{MAINT}"
        s3 = c.s3(retries=2)
        s3.create_bucket(Bucket=BUCKET)
        objects = {}
        put(s3, objects, "a", 12)
        ch.wait_for("HEALTH_OK before the window",
                    lambda: th.status(c)["state"] == "HEALTH_OK", 60 * SLOW, step=0.5)
        # ---- maintenance: absent without a rebuild
        out = admin_ok(c, "maintenance", dn_maint, "--for", "5m")
        assert out["until"] > 0
        ch.wait_for("WARN maintenance", lambda: th.codes(th.status(c)).get("maintenance") == 1,
                    30, step=0.3)
        # ok-to-stop counts a live node in a window as stopping too
        rc, ok = th.admin(c, "ok-to-stop", "dn-1")
        stopping = {n["name"] for n in ok["nodes"]["list"] if n["stopping"]}
        assert stopping == {"dn-1", dn_maint}, ok
        # seven nodes: each group with a cell on dn-3 has one live node free of it, so
        # without the window its cells would be rebuilt there after heal_after
        others = [i for i in c.nodes if i != MAINT]
        healed0 = c.sum_metric("zest_heal_cells_total", nodes=[c.node(i) for i in others])
        victim = c.node(MAINT)
        os.kill(victim.pid, signal.SIGSTOP)
        try:
            c.wait_registered([f"dn-{i}" for i in others])
            passes = {i: c.node(i).metrics().get("zest_heal_passes_total", 0) for i in others}
            for i in others:  # their views lack dn-3 now; past heal_after, five passes more
                ch.wait_for(f"dn-{i} to run passes without {dn_maint}",
                            lambda i=i: c.node(i).metrics().get("zest_cluster_live_nodes") == 6
                            and c.node(i).metrics().get("zest_heal_passes_total", 0)
                            >= passes[i] + HEAL_AFTER + 5, 60 * SLOW, step=0.3)
            healed = c.sum_metric("zest_heal_cells_total", nodes=[c.node(i) for i in others])
            assert healed == healed0, f"{healed - healed0} cells rebuilt during maintenance"
            st = th.status(c)
            cd = th.codes(st)
            assert st["state"] == "HEALTH_WARN" and "node_absent" not in cd and \
                cd.get("maintenance") == 1, st
            msg = [r["message"] for r in st["reasons"] if r["code"] == "maintenance"][0]
            assert f"maintenance: {dn_maint} until " in msg, msg
            admin_ok(c, "maintenance", dn_maint, "--end")
            assert c.etcd.value(f"/zest/maintenance/{dn_maint}") is None
        finally:
            os.kill(victim.pid, signal.SIGCONT)
        ch.wait_for("HEALTH_OK after the window", lambda: th.status(c)["state"] == "HEALTH_OK",
                    ch.LEASE_TTL + 60 * SLOW, step=0.5)
        verify(c, objects, "after the window")
        print(f"     {dn_maint} away in a window: no cell rebuilt, WARN maintenance; "
              f"ended: HEALTH_OK", flush=True)

        before = cells_on(c, objects, dn_drain)
        assert before > 0, "the objects put no cell on the node to drain"
        moved0 = c.sum_metric("zest_heal_moved_cells_total")

        # ---- drain: WARN all along, new writes around it, every cell moved off
        out = admin_ok(c, "drain", dn_drain)
        assert out["key"] == f"/zest/drain/{dn_drain}" and out["value"].startswith("drain ")
        for n in c.running_nodes():  # no write placed from here on puts a cell there
            ch.wait_for(f"{n.node}'s placement view without {dn_drain}",
                        lambda n=n: n.metrics().get("zest_cluster_placement_nodes") == 6, 30)
        samples = collections.Counter()

        def drained():
            st = th.status(c)
            samples[st["state"]] += 1
            cd = th.codes(st)
            assert st["state"] == "HEALTH_WARN" and cd.get("node_draining") == 1, st
            d = drain_of(st, dn_drain)
            assert d and d["mode"] == "drain", st
            return d["counted"] and d["cells_left"] == 0

        put(s3, objects, "b", 6)  # during the drain
        ch.wait_for(f"{dn_drain} drained", drained, 90 * SLOW, step=0.3)
        assert samples["HEALTH_OK"] == 0, samples
        for key in objects:
            for ext, g, names, missing in groups(c.record(BUCKET, key)):
                assert dn_drain not in names, (key, g, names)
                assert len(set(names)) == K + M and missing == 0, (key, g, names, missing)
        # exactly the cells there at the start: none of the objects written during the
        # drain had a cell placed there to move
        moved = c.sum_metric("zest_heal_moved_cells_total") - moved0
        assert moved == before, (moved, before)
        assert c.sum_metric("zest_heal_passes_total") > 0
        st = th.status(c)
        assert st["state"] == "HEALTH_WARN" and set(th.codes(st)) == {"node_draining"}, st
        assert all(n["heal"] is not None for n in st["nodes"]["list"] if n["live"]), st
        verify(c, objects, "drained")
        print(f"     {dn_drain} drained: {before} cells moved off ({moved} moves), "
              f"{sum(samples.values())} status samples all WARN", flush=True)

        # ---- decommission: the node leaves, its drive empties, HEALTH_OK
        admin_ok(c, "decommission", dn_drain)
        gone = [f"/zest/nodes/{dn_drain}", f"/zest/members/{dn_drain}",
                f"/zest/drain/{dn_drain}", f"/zest/healstat/{dn_drain}"]
        ch.wait_for(f"{dn_drain}'s keys gone",
                    lambda: all(c.etcd.value(k) is None for k in gone), 60 * SLOW, step=0.3)
        ch.wait_for(f"{dn_drain}'s drive empty",
                    lambda: not c.cell_files(DRAIN), 60 * SLOW, step=0.5)
        ch.wait_for("HEALTH_OK after the decommission",
                    lambda: th.status(c)["state"] == "HEALTH_OK", 60 * SLOW, step=0.5)
        st = th.status(c)
        assert dn_drain not in [n["name"] for n in st["nodes"]["list"]], st
        verify(c, objects, "decommissioned")
        print(f"     {dn_drain} decommissioned: keys gone, drive empty, HEALTH_OK", flush=True)


if __name__ == "__main__":
    ch.run([test_drain])
