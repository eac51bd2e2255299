#!/usr/bin/env python3
"""The cluster healer (docs/cluster.md, "Heal"): a real etcd and six zest-datanode --cluster
on 127.0.0.11-16 over mutual TLS, one drive each, RS(3,2) (five cells a group: a sixth node
is left to take a dead node's cells node-distinct), --heal-after 3s. Objects are written
through dn-1's Write RPC (the coordinator, tests/integration/dn_client.c).

- a node SIGKILLed: once its lease is gone and --heal-after has passed, its cells are
  rebuilt on the node outside each group; the records name no cell on it, none missing;
- a node restarted with its drive folder wiped: it marks the cells its records name and
  its store lacks as missing, and they are rebuilt back onto it;
- at the end zest_heal_pending_cells is 0 on every node, and every cell the records name is
  on its node with its length, the data cells holding the objects' bytes.
Exits 77 without etcd, etcdctl or openssl.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

K, M = 3, 2
CELL = 64 << 10
SPG = 2
HEAL_AFTER = "3s"
SLOW = 3 if ch.zh.SANITIZED else 1


def problems(nodes, rec, data):
    """What is wrong with rec's cells on the live nodes: [] when every cell is on the node
    it names, none missing, one node per cell, with its length and its bytes."""
    out = []
    by_name = {n.name: n for n in nodes}
    e = rec["extents"][0]
    ext = f"{e['id']:016x}"
    for g, grp in enumerate(e["groups"]):
        names = [e["nodes"][i] for i in grp["cells"]]
        if grp["missing"]:
            out.append(f"group {g} missing {grp['missing']:#x}")
        if len(set(names)) != K + M:
            out.append(f"group {g} not node-distinct: {names}")
        for c, name in enumerate(names):
            node = by_name.get(name)
            path = node.cells().get((ext, g, c)) if node else None
            if not path:
                out.append(f"cell {g}.{c} not on {name}")
                continue
            if os.path.getsize(path) != ch.cell_len(rec["size"], g, c, K, CELL, SPG):
                out.append(f"cell {g}.{c} on {name}: {os.path.getsize(path)} bytes")
                continue
            if c < K:
                with open(path, "rb") as f:
                    if f.read() != ch.data_cell_bytes(data, g, c, K, CELL, SPG):
                        out.append(f"data cell {g}.{c} on {name} does not hold its bytes")
    return out


def all_healed(c, nodes, objs):
    for key, data in objs.items():
        rec = c.record("bkt", key)
        if not rec or problems(nodes, rec, data):
            return False
    return True


def metric(node, name):
    return node.metrics().get(name, 0)


def test_cluster_heal():
    # six datanodes on 127.0.0.11-16, one drive each (under memcheck in `make memcheck`)
    with ch.cluster(nodes=6, ec=f"{K}+{M}", gateway=False, drives=1, cell_size=CELL,
                    stripes_per_group=SPG, heal_after=HEAL_AFTER, tls=True, dn_base=10,
                    valgrind=True) as c:
        nodes = [c.node(i) for i in range(1, 7)]
        c.etcd.ctl("put", "/zest/buckets/bkt", "")
        objs = {}
        src = os.path.join(c.root, "obj")
        for i, size in enumerate((1000, K * CELL * SPG + 5000, 3 * K * CELL * SPG + 1)):
            data = os.urandom(size)
            with open(src, "wb") as f:
                f.write(data)
            c.dn_client(1, "put", "bkt", f"o{i}", src)
            objs[f"o{i}"] = data
        assert all_healed(c, nodes, objs)
        for n in nodes:
            assert metric(n, "zest_heal_pending_cells") == 0, n.name

        # ---- a node dies: its cells move to the sixth node of each group
        victim = nodes[4]
        held = sum(1 for k in objs
                   for g in c.record("bkt", k)["extents"][0]["groups"]
                   for j in g["cells"]
                   if c.record("bkt", k)["extents"][0]["nodes"][j] == victim.name)
        assert held > 0
        c.kill(5)
        live = [n for n in nodes if n is not victim]
        # the lease (10 s) goes, then --heal-after (3 s), then a pass (1 s)
        ch.wait_for("the dead node's cells rebuilt elsewhere",
                    lambda: all_healed(c, live, objs), 40 * SLOW)
        # the counter follows the record's Txn (then CommitCells and DeleteCells)
        ch.wait_for("the rebuilt cells counted",
                    lambda: sum(metric(n, "zest_heal_cells_total") for n in live) >= held,
                    10 * SLOW)
        print(f"node killed: {held} cells rebuilt elsewhere")

        # ---- a node comes back with its drive wiped: its cells are rebuilt onto it
        wiped = nodes[2]
        assert c.stop_node(3) == 0
        c.restart(3, wipe=True)
        ch.wait_for(f"{wiped.name} registered again",
                    lambda: wiped.metrics().get("zest_cluster_registered") == 1, 60)
        ch.wait_for("the wiped node's cells rebuilt onto it",
                    lambda: all_healed(c, live, objs), 30 * SLOW)
        marked = metric(wiped, "zest_heal_marked_cells_total")
        assert marked > 0, "the wiped node marked nothing missing"
        assert len(wiped.cells()) >= marked
        print(f"wiped node: {marked:.0f} cells marked missing and rebuilt onto it")

        # ---- nothing left to heal, on every node; every object's cells in place
        ch.wait_for("zest_heal_pending_cells 0 everywhere",
                    lambda: all(metric(n, "zest_heal_pending_cells") == 0 and
                                metric(n, "zest_cluster_degraded_objects") == 0 for n in live),
                    10 * SLOW)
        for key, data in objs.items():
            assert not problems(live, c.record("bkt", key), data), key
        c.stop_nodes()  # the five live ones, each exiting 0


if __name__ == "__main__":
    ch.run([test_cluster_heal], gateway=False)
