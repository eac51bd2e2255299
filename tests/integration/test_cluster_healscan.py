#!/usr/bin/env python3
"""The cluster healer's steady state costs no record reads (docs/cluster.md, "Heal, as built"):
etcd, six datanodes over mTLS, RS(3,2), the gateway --cluster, boto3.

- every node's first pass checks its new store against the records (one pass over them,
  zest_heal_scans_total 1); then objects are written, and over several passes with every node
  live no healer reads a record (zest_heal_records_read_total and zest_heal_scans_total do
  not move) and no to-do key (/zest/heal/) exists;
- a node stopped and started again with its drive folders wiped (back well before
  --heal-after): it alone reads the records once (its store is new), marks the cells it
  lacks missing with their records' to-do keys, and the objects' healers rebuild them onto
  it from those keys: the other nodes read no whole pass, pending reaches 0, no to-do key
  is left, the node holds as many cells as before, every object reads back byte-identical;
- a node SIGKILLed and left away past --heal-after: the healers read the records (once
  each), rebuild its cells elsewhere, pending reaches 0, every object reads back
  byte-identical, and while it stays away no healer reads the records again.

Exits 77 without etcd or without the gateway's --cluster.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

BUCKET = "healscan"
N = 40
# s: a pass every 6 s; a wiped node's restart stays below it however slow the machine
# (asserted by state: no other node's healer scans while it is away)
HEAL_AFTER = 24
PERIOD = HEAL_AFTER / 4
SIZES = [0, 1, 4095, 65536, 65537, 131072 + 3, 262147, 300000]


def counters(c):
    """{node: (records read, passes over every record)} of the running datanodes."""
    out = {}
    for n in c.running_nodes():
        m = n.metrics()
        if "zest_heal_records_read_total" not in m:
            raise AssertionError(f"{n.node} exports no zest_heal_records_read_total")
        out[n.node] = (m["zest_heal_records_read_total"], m["zest_heal_scans_total"])
    return out


def pending(c):
    return {n.node: n.metrics().get("zest_heal_pending_cells") for n in c.running_nodes()}


def wait_healed(c, what, healed_min, timeout=180, quiet=2 * PERIOD):
    """pending 0 everywhere for `quiet` s, no to-do key, healed_min cells healed in all."""
    deadline = time.time() + timeout
    since = None
    while True:
        p = pending(c)
        healed = c.sum_metric("zest_heal_cells_total")
        todo = c.etcd.keys("/zest/heal/")
        if all(v == 0 for v in p.values()) and healed >= healed_min and not todo:
            since = since or time.time()
            if time.time() - since >= quiet:
                return healed
        else:
            since = None
        assert time.time() < deadline, \
            f"{what}: pending {p}, healed {healed} < {healed_min}, to-do keys {todo[:5]}"
        time.sleep(0.5)


def verify(c, objects, what):
    bad = ch.wrong_objects(c.s3(retries=0, read_timeout=60), BUCKET, objects)
    assert not bad, f"{what}: {len(bad)} objects wrong: {bad[:5]}"


def test_healscan():
    with ch.cluster(nodes=6, ec="3+2", cell_size=65536, stripes_per_group=2, drives=2,
                    heal_after=f"{HEAL_AFTER}s", gc_grace="60s", dn_base=70) as c:
        if not ch.has_flag(ch.zh.DATANODE, "--heal-after"):
            raise ch.Skip("this zest-datanode has no healer")
        # each new store is checked once against the records, before any object exists
        ch.wait_for("every node's first pass over the records",
                    lambda: all(s >= 1 for _, s in counters(c).values()), 120)
        s3 = c.s3()
        s3.create_bucket(Bucket=BUCKET)
        objects = {}
        for i in range(N):
            key = f"o{i:03d}"
            data = ch.body(key, SIZES[i % len(SIZES)])
            s3.put_object(Bucket=BUCKET, Key=key, Body=data)
            objects[key] = (len(data), ch.digest(data))

        # all live, nothing marked: passes read no record
        assert not c.etcd.keys("/zest/heal/"), "a whole write left a to-do key"
        before = counters(c)
        time.sleep(4 * PERIOD + 1)
        after = counters(c)
        assert after == before, f"records read with every node live: {before} -> {after}"
        print(f"     {N} objects, {4 * PERIOD + 1:.0f} s of passes, no record read: {after}",
              flush=True)

        # dn-2 back with wiped drives well before --heal-after: it reads the records once,
        # marks what it lacks, the healers rebuild it onto it from the to-do keys
        w = 2
        cells_before = len(c.cell_files(w))
        assert cells_before > 0, f"dn-{w} holds no cell"
        healed0 = c.sum_metric("zest_heal_cells_total")
        others = {k: v for k, v in counters(c).items() if k != f"dn-{w}"}
        c.stop_node(w)
        c.restart(w, wipe=True)
        c.wait_live(6, timeout=ch.LEASE_TTL + 60)
        back = {k: v for k, v in counters(c).items() if k != f"dn-{w}"}
        assert all(back[k][1] == others[k][1] for k in others), \
            f"dn-{w} was away past --heal-after (the others scanned): {others} -> {back}"
        healed = wait_healed(c, f"dn-{w} wiped", healed0 + cells_before)
        m = c.node_metrics(w)
        assert m["zest_heal_scans_total"] >= 1 and m["zest_heal_marked_cells_total"] >= 1, m
        now = {k: v for k, v in counters(c).items() if k != f"dn-{w}"}
        for k in others:
            assert now[k][1] == others[k][1], f"{k} read every record: {others[k]} -> {now[k]}"
        assert len(c.cell_files(w)) == cells_before, \
            f"dn-{w} holds {len(c.cell_files(w))} cells, had {cells_before}"
        print(f"     dn-{w} wiped: {healed - healed0:.0f} cells rebuilt onto it from the "
              f"to-do keys; the others' record reads {others} -> {now}", flush=True)
        verify(c, objects, f"dn-{w} back wiped")

        # dn-5 away past --heal-after: one pass over the records each, its cells elsewhere
        k = 5
        scans0 = {n: s for n, (_, s) in counters(c).items() if n != f"dn-{k}"}
        c.kill(k)
        c.wait_registered([f"dn-{i}" for i in c.nodes if i != k])
        healed = wait_healed(c, f"dn-{k} away", healed + 1, timeout=HEAL_AFTER + 180)
        verify(c, objects, f"dn-{k} away, healed")
        st = counters(c)
        assert all(st[n][1] > scans0[n] for n in scans0), f"no pass over the records: {st}"
        time.sleep(4 * PERIOD + 1)
        st2 = counters(c)
        assert st2 == st, f"records read again with nothing to heal: {st} -> {st2}"
        print(f"     dn-{k} away: healed, then no record read: {st2}", flush=True)


if __name__ == "__main__":
    ch.run([test_healscan])
