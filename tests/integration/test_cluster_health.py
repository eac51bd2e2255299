#!/usr/bin/env python3
"""zest-admin status / ok-to-stop and the datanodes' zest_cluster_health gauge
(docs/operations.md "Health"): etcd, seven datanodes over mTLS, RS(3,2), the gateway
--cluster, boto3.

- every store checked and 30 objects written: HEALTH_OK (exit 0), every gauge 0;
  ok-to-stop of one node exits 0, of m + 1 nodes holding cells of one group exits 1
  (objects_unreadable);
- a cellcheck key that does not name its node's store: WARN node_checking, every gauge 1,
  ok-to-stop refused as unknown; restored: OK again;
- a node stopped: WARN node_absent 1, degraded objects with cells on it; its drives wiped
  and the node started again: status is sampled again and again until HEALTH_OK; no
  sample is OK before the loss is healed (every sample before shows node_absent,
  node_checking, objects_unknown, objects_degraded or heal_pending), the first OK one
  finds the node holding as many cells as before and no to-do key left, and a gauge read
  0 is never followed by a status that is not OK;
- a node back with its LMDB lost but its cells and drive identity kept (the same store
  id): the same, and its cellcheck key was gone at the revision its node key appeared;
- a node back with one of its drive folders emptied, the other intact (the same store id
  and metadata): the same;
- then ok-to-stop of two other nodes exits 0, they are stopped, every object reads back
  byte-identical, status is WARN node_absent 2;
- m + 1 of a group's nodes stopped: HEALTH_ERR (exit 2), objects_unreadable.

Every --json output must parse. States and counts are asserted, never elapsed time.
Exits 77 without etcd, the gateway's --cluster or the datanode's healer.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

ADMIN = os.environ.get("ZEST_ADMIN") or os.path.join(ch.zh.BUILD, "tools", "zest-admin")
BUCKET = "health"
N = 30
HEAL_AFTER = 24  # s: a pass every 6 s; the wiped node is back long before
SIZES = [0, 1, 4095, 65536, 65537, 131072 + 3, 262147, 300000]
NOT_OK = {"node_absent", "node_checking", "objects_unknown", "objects_degraded",
          "heal_pending"}


def tls_flags(c):
    if not c.tls:
        return ["--insecure"]
    pem, key = c.client_cert("admin")
    return ["--tls-ca", c.certs["ca"], "--tls-cert", pem, "--tls-key", key]


def admin(c, *args):
    """zest-admin ARGS --json against c's etcd: (exit code, parsed JSON)."""
    p = subprocess.run([ADMIN, "--cluster", c.etcd.endpoints, *tls_flags(c), "--json", *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1, 2), f"zest-admin {args}: exit {p.returncode}: {p.stderr}"
    try:
        out = json.loads(p.stdout)
    except ValueError as e:
        raise AssertionError(f"zest-admin {args}: not JSON ({e}): {p.stdout!r}")
    return p.returncode, out


def key_rev(c, key):
    """(value, mod_revision) of key, (None, 0) when absent."""
    kvs = json.loads(c.etcd.ctl("get", key, "-w", "json").stdout).get("kvs", [])
    if not kvs:
        return None, 0
    return ch.base64.b64decode(kvs[0].get("value", "")), int(kvs[0]["mod_revision"])


def codes(st):
    return {r["code"]: r["count"] for r in st["reasons"]}


def status(c):
    rc, st = admin(c, "status")
    assert rc == {"HEALTH_OK": 0, "HEALTH_WARN": 1, "HEALTH_ERR": 2}[st["state"]], (rc, st)
    for key in ("state", "reasons", "nodes", "objects", "groups", "cells", "heal", "cost"):
        assert key in st, f"status --json lacks {key}: {st}"
    return st


def gauges(c):
    return {n.node: n.metrics().get("zest_cluster_health") for n in c.running_nodes()}


def wait_gauges(c, value, timeout=10):
    """Every running node's gauge at value within timeout s: the gauges, or None."""
    deadline = time.time() + timeout
    while True:
        g = gauges(c)
        if set(g.values()) == {value}:
            return g
        if time.time() >= deadline:
            return None
        time.sleep(0.2)


def until_ok(c, w, cells_before, timeout=240):
    """Sample the gauges, then status, until HEALTH_OK: every sample before names a reason
    and no gauge said 0 (read after the loss) before a status that is not OK; the first OK
    one finds dn-w holding cells_before cells and no to-do key. (samples, the reason sets
    seen in order)."""
    seen = []
    samples = 0
    # A scrape may answer with the gauge's read of up to DN_HEALTH_REUSE_MS ago, from
    # before the node went: a node's 0 counts once it said 1 since (a later answer was
    # read later still); from then on a 0 must be followed by an OK status.
    woke = set()
    deadline = time.time() + timeout
    while True:
        g = gauges(c)  # read before the status
        st = status(c)
        samples += 1
        if st["state"] == "HEALTH_OK":
            break
        seen.append(tuple(sorted(codes(st))))
        assert set(codes(st)) & NOT_OK, f"not OK without a reason: {st}"
        early = [n for n, v in g.items() if v == 0 and n in woke]
        assert not early, f"gauges of {early} said OK while status said {st}: {g}"
        woke |= {n for n, v in g.items() if v != 0}
        assert time.time() < deadline, f"never healed: {st}"
        time.sleep(0.5)
    assert seen, f"status was OK at once after dn-{w} came back"
    assert woke, f"no gauge ever said not OK after dn-{w} came back"
    assert len(c.cell_files(w)) == cells_before, \
        f"OK with dn-{w} holding {len(c.cell_files(w))} cells of {cells_before}"
    assert not c.etcd.keys("/zest/heal/"), "OK with to-do keys left"
    assert st["objects"]["ok"] == N and st["nodes"]["checking"] == 0, st
    return samples, sorted(set(seen), key=seen.index)


def verify(c, objects, what):
    bad = ch.wrong_objects(c.s3(retries=0, read_timeout=60), BUCKET, objects)
    assert not bad, f"{what}: {len(bad)} objects wrong: {bad[:5]}"


def group_nodes(c, keys, avoid=()):
    """Nodes (numbers) of the first group of some record with >= 3 cells off `avoid`."""
    for key in keys:
        rec = c.record(BUCKET, key)
        for e in rec["extents"]:
            for g in e["groups"]:
                names = [e["nodes"][i] for i in g["cells"]]
                nums = [int(n.split("-")[1]) for n in names]
                nums = [i for i in nums if i not in avoid]
                if len(nums) >= 3:
                    return nums[:3]
    raise AssertionError("no group with three cells")


def test_health():
    with ch.cluster(nodes=7, ec="3+2", cell_size=65536, stripes_per_group=2, drives=2,
                    heal_after=f"{HEAL_AFTER}s", gc_grace="60s", dn_base=110) as c:
        if not ch.has_flag(ch.zh.DATANODE, "--heal-after"):
            raise ch.Skip("this zest-datanode has no healer")
        if not os.path.exists(ADMIN):
            raise ch.Skip(f"no {ADMIN}")
        # each new store is checked by its node once: until then, never OK
        st = status(c)
        ch.wait_for("every store checked: HEALTH_OK",
                    lambda: status(c)["state"] == "HEALTH_OK", 120, step=0.5)
        s3 = c.s3()
        s3.create_bucket(Bucket=BUCKET)
        objects = {}
        for i in range(N):
            key = f"o{i:03d}"
            data = ch.body(key, SIZES[i % len(SIZES)])
            s3.put_object(Bucket=BUCKET, Key=key, Body=data)
            objects[key] = (len(data), ch.digest(data))
        st = status(c)
        assert st["state"] == "HEALTH_OK", st
        assert st["objects"]["total"] == N and st["objects"]["ok"] == N, st
        assert st["nodes"]["live"] == 7 and st["nodes"]["absent"] == 0, st
        assert st["nodes"]["members"] == 7 and len(st["nodes"]["list"]) == 7, st
        assert st["cost"]["ranges"] >= 1, st
        ch.wait_for("every gauge 0", lambda: set(gauges(c).values()) == {0}, 30, step=0.5)
        c.node(1).promtool()  # the new series pass Prometheus' own check
        m = c.node_metrics(1)
        assert m["zest_cluster_nodes_absent"] == 0 and m["zest_cluster_nodes_checking"] == 0, m
        text = subprocess.run([ADMIN, "--cluster", c.etcd.endpoints, *tls_flags(c), "status"],
                              capture_output=True, text=True, timeout=60)
        assert text.returncode == 0 and "health: HEALTH_OK" in text.stdout, text
        for flag in ("--help", "--version"):
            p = subprocess.run([ADMIN, flag], capture_output=True, text=True, timeout=10)
            assert p.returncode == 0 and "zest-admin" in p.stdout, (flag, p)
        rc, ok = admin(c, "ok-to-stop", "dn-4")
        assert rc == 0 and ok["ok"] is True and not ok["reasons"], ok
        three = group_nodes(c, sorted(objects))
        rc, ok = admin(c, "ok-to-stop", *[f"dn-{i}" for i in three])
        assert rc == 1 and ok["ok"] is False, ok
        assert "objects_unreadable" in {r["code"] for r in ok["reasons"]}, ok
        assert ok["objects_unreadable_after"] >= 1, ok
        print(f"     {N} objects OK; ok-to-stop dn-4 yes, dn-{three} (m + 1) no", flush=True)

        # a cellcheck key that does not name the node's store: checking, unknown. dn-1's
        # healer finds it at its next pass, checks its store again and puts its id back,
        # so each look is bracketed by two reads of the key: unchanged, it saw the bogus one
        key = "/zest/cellcheck/dn-1"
        good = key_rev(c, key)[0]
        assert good, f"no {key}"
        looked = set()
        for attempt in range(10):
            c.etcd.ctl("put", key, "not-this-store")
            before = key_rev(c, key)
            st = status(c)
            # a scrape reuses the gauge's last read for up to DN_HEALTH_REUSE_MS
            g = wait_gauges(c, 1)
            rc, ok = admin(c, "ok-to-stop", "dn-4")
            if key_rev(c, key) != before:
                continue  # restored meanwhile: look again
            assert st["state"] == "HEALTH_WARN" and codes(st).get("node_checking") == 1, st
            assert st["objects"]["unknown"] >= 1 and st["objects"]["ok"] < N, st
            assert g, f"a gauge stayed 0 with dn-1's store unchecked: {gauges(c)}"
            assert rc == 1 and "unknown" in {r["code"] for r in ok["reasons"]}, ok
            looked.add(attempt)
            break
        assert looked, "dn-1 put its cellcheck key back before every look"
        # dn-1 checks its store again and names it: OK again
        ch.wait_for("dn-1 to check again", lambda: key_rev(c, key)[0] == good, 60, step=0.5)
        ch.wait_for("HEALTH_OK again", lambda: status(c)["state"] == "HEALTH_OK", 60, step=0.5)
        print("     a cellcheck key naming another store: WARN node_checking, gauges 1, "
              "ok-to-stop refused; dn-1 checked again", flush=True)

        # dn-2 stopped: node absent; wiped and started again: never OK before healed
        w = 2
        cells_before = len(c.cell_files(w))
        assert cells_before > 0, f"dn-{w} holds no cell"
        assert c.stop_node(w) == 0
        c.wait_registered([f"dn-{i}" for i in c.nodes if i != w])
        st = status(c)
        assert st["state"] == "HEALTH_WARN" and codes(st).get("node_absent") == 1, st
        assert st["cells"]["absent"] >= 1 and st["objects"]["degraded"] >= 1, st
        assert st["nodes"]["absent"] == 1, st
        ch.wait_for("zest_cluster_nodes_absent 1",
                    lambda: c.node_metrics(1).get("zest_cluster_nodes_absent") == 1, 10)
        c.restart(w, wipe=True)
        samples, distinct = until_ok(c, w, cells_before)
        print(f"     dn-{w} wiped: {samples} samples until OK, reasons on the way "
              f"{distinct}", flush=True)
        verify(c, objects, f"dn-{w} back wiped")

        # dn-3 back with its LMDB lost but its drives' identity files and cells kept: the
        # same store id, yet never counted as checked once it is live
        w = 3
        cells_before = len(c.cell_files(w))
        assert c.stop_node(w) == 0
        for d in c.node(w).drives:
            ch.shutil.rmtree(os.path.join(d, "meta"), ignore_errors=True)
        c.restart(w)
        samples, distinct = until_ok(c, w, cells_before)
        # by revision: when dn-3's node key was created, its cellcheck key was gone already
        # (deleted before it registered, not by its healer a moment after)
        node = json.loads(c.etcd.ctl("get", f"/zest/nodes/dn-{w}", "-w", "json").stdout)
        born = int(node["kvs"][0]["create_revision"])
        then = json.loads(c.etcd.ctl("get", f"/zest/cellcheck/dn-{w}", f"--rev={born}",
                                     "-w", "json").stdout)
        assert not then.get("kvs"), f"dn-{w} was live at revision {born} with {then}"
        print(f"     dn-{w} without its metadata: {samples} samples until OK, reasons on "
              f"the way {distinct}", flush=True)
        verify(c, objects, f"dn-{w} back without metadata")

        # dn-4 back with one drive folder emptied (a disk replaced), the other intact: the
        # same store id and metadata, yet the lost drive's cells are found and rebuilt
        # before anything says OK
        w = 4
        cells_before = len(c.cell_files(w))
        drive = max(c.node(w).drives, key=lambda d: sum(
            len(f) for _, _, f in os.walk(os.path.join(d, "data"))))
        assert c.stop_node(w) == 0
        ch.shutil.rmtree(drive)
        os.makedirs(drive)
        c.restart(w)
        samples, distinct = until_ok(c, w, cells_before)
        print(f"     dn-{w} with a drive folder emptied: {samples} samples until OK, reasons "
              f"on the way {distinct}", flush=True)
        verify(c, objects, f"dn-{w} back with a drive emptied")

        # two other nodes: ok to stop, stopped, every object reads back
        two = [5, 6]
        rc, ok = admin(c, "ok-to-stop", *[f"dn-{i}" for i in two])
        assert rc == 0 and ok["ok"] is True, ok
        assert ok["live_after"] == 5 and ok["tolerance_after"] >= 1, ok
        for i in two:
            assert c.stop_node(i) == 0
        c.wait_registered([f"dn-{i}" for i in c.nodes if i not in two])
        verify(c, objects, f"dn-{two} stopped")
        st = status(c)
        assert st["state"] == "HEALTH_WARN" and codes(st).get("node_absent") == 2, st
        assert st["objects"]["unreadable"] == 0, st
        print(f"     ok-to-stop dn-{two}: yes; stopped, {N} objects byte-identical",
              flush=True)

        # m + 1 of a group's nodes gone: ERR
        three = group_nodes(c, sorted(objects), avoid=two)
        rc, ok = admin(c, "ok-to-stop", *[f"dn-{i}" for i in three])
        assert rc == 1 and ok["ok"] is False, ok
        for i in three:
            assert c.stop_node(i) == 0
        c.wait_registered([f"dn-{i}" for i in c.nodes if i not in two + three])
        st = status(c)
        assert st["state"] == "HEALTH_ERR", st
        assert codes(st).get("objects_unreadable", 0) >= 1, st
        assert codes(st).get("node_absent") == 5, st
        # two live nodes of k + m = 5: a group written now would double up, never 0
        assert wait_gauges(c, 1), gauges(c)
        print(f"     dn-{three} stopped too: HEALTH_ERR, "
              f"{codes(st)['objects_unreadable']} objects unreadable", flush=True)


if __name__ == "__main__":
    ch.run([test_health])
