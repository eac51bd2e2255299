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
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402
from test_cluster_members import Etcd  # noqa: E402
import test_cluster_write as cw  # noqa: E402

K, M = 3, 2
CELL = 64 << 10
SPG = 2
HEAL_AFTER = "3s"
SANITIZED = os.environ.get("ZEST_SANITIZED") == "1"


class Node(cw.Node):
    """test_cluster_write's node with this test's scheme and --heal-after."""

    def start(self, preload=False):
        self.port, self.mport = cw.port_on(self.ip), zh.free_port()
        c = self.certs
        argv = [zh.DATANODE, "--listen", f"{self.ip}:{self.port}",
                "--metrics", f"127.0.0.1:{self.mport}", "--ec", f"{K}+{M}",
                "--cell-size", str(CELL), "--stripes-per-group", str(SPG),
                "--cluster", self.etcd.endpoint, "--node", self.name,
                "--heal-after", HEAL_AFTER,
                "--tls-ca", f"{c}/ca.pem", "--tls-cert", f"{c}/{self.name}.pem",
                "--tls-key", f"{c}/{self.name}.key", "--drive", self.drive]
        self.d = zh.Daemon(argv, os.path.join(self.root, f"{self.name}.log"), self.mport)


def cell_len(size, g, c):
    sb, gb = K * CELL, K * CELL * SPG
    start = g * gb
    if start >= size:
        return 0
    gl = min(size - start, gb)
    ns = (gl + sb - 1) // sb
    last = (ns - 1) * sb + (c if c < K else 0) * CELL
    return (ns - 1) * CELL + max(0, min(CELL, gl - last))


def problems(nodes, rec, data):
    """What is wrong with rec's cells on the live nodes: [] when every cell is on the node
    it names, none missing, one node per cell, with its length and its bytes."""
    out = []
    by_name = {n.name: n for n in nodes}
    e = rec["extents"][0]
    ext = f"{e['id']:016x}"
    gb = K * CELL * SPG
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
            if os.path.getsize(path) != cell_len(rec["size"], g, c):
                out.append(f"cell {g}.{c} on {name}: {os.path.getsize(path)} bytes")
                continue
            if c < K:
                want = b"".join(data[g * gb + s * K * CELL + c * CELL:][:CELL]
                                for s in range(SPG))
                with open(path, "rb") as f:
                    if f.read() != want:
                        out.append(f"data cell {g}.{c} on {name} does not hold its bytes")
    return out


def all_healed(etcd, nodes, objs):
    for key, data in objs.items():
        rec = cw.record(etcd, "bkt", key)
        if not rec or problems(nodes, rec, data):
            return False
    return True


def metric(node, name):
    return node.metrics().get(name, 0)


def main():
    for tool in (os.environ.get("ZEST_ETCD", "/usr/bin/etcd"), "etcdctl", "openssl"):
        if not shutil.which(tool):
            print(f"skip: {tool} not installed")
            sys.exit(77)
    root = tempfile.mkdtemp(prefix="zest-cheal-")
    certs = os.path.join(root, "certs")
    cw.make_certs(certs)
    etcd = Etcd(root)
    nodes = []
    ok = False
    slow = 3 if SANITIZED else 1
    try:
        for i, name in enumerate(cw.NODES, start=1):
            nodes.append(Node(root, certs, name, f"127.0.0.1{i}", etcd))
        for n in nodes:
            cw.wait_for(f"{n.name} sees 6 nodes",
                        lambda n=n: n.metrics().get("zest_cluster_live_nodes") == 6, 10)
        etcd.ctl("put", "/zest/buckets/bkt", "")
        objs = {}
        src = os.path.join(root, "obj")
        for i, size in enumerate((1000, K * CELL * SPG + 5000, 3 * K * CELL * SPG + 1)):
            data = os.urandom(size)
            with open(src, "wb") as f:
                f.write(data)
            cw.client(nodes[0], certs, "put", "bkt", f"o{i}", src)
            objs[f"o{i}"] = data
        assert all_healed(etcd, nodes, objs)
        for n in nodes:
            assert metric(n, "zest_heal_pending_cells") == 0, n.name

        # ---- a node dies: its cells move to the sixth node of each group
        victim = nodes[4]
        held = sum(1 for k in objs
                   for g in cw.record(etcd, "bkt", k)["extents"][0]["groups"]
                   for c in g["cells"]
                   if cw.record(etcd, "bkt", k)["extents"][0]["nodes"][c] == victim.name)
        assert held > 0
        victim.d.kill9()
        victim.d.log.close()
        live = [n for n in nodes if n is not victim]
        # the lease (10 s) goes, then --heal-after (3 s), then a pass (1 s)
        cw.wait_for("the dead node's cells rebuilt elsewhere",
                    lambda: all_healed(etcd, live, objs), 40 * slow)
        # the counter follows the record's Txn (then CommitCells and DeleteCells)
        cw.wait_for("the rebuilt cells counted",
                    lambda: sum(metric(n, "zest_heal_cells_total") for n in live) >= held,
                    10 * slow)
        print(f"node killed: {held} cells rebuilt elsewhere")

        # ---- a node comes back with its drive wiped: its cells are rebuilt onto it
        wiped = nodes[2]
        assert wiped.d.stop() == 0
        shutil.rmtree(wiped.drive)
        os.makedirs(wiped.drive)
        wiped.start()
        cw.wait_for(f"{wiped.name} registered again",
                    lambda: wiped.metrics().get("zest_cluster_registered") == 1, 10)
        cw.wait_for("the wiped node's cells rebuilt onto it",
                    lambda: all_healed(etcd, live, objs), 30 * slow)
        marked = metric(wiped, "zest_heal_marked_cells_total")
        assert marked > 0, "the wiped node marked nothing missing"
        assert len(wiped.cells()) >= marked
        print(f"wiped node: {marked:.0f} cells marked missing and rebuilt onto it")

        # ---- nothing left to heal, on every node; every object's cells in place
        cw.wait_for("zest_heal_pending_cells 0 everywhere",
                    lambda: all(metric(n, "zest_heal_pending_cells") == 0 and
                                metric(n, "zest_cluster_degraded_objects") == 0 for n in live),
                    10 * slow)
        for key, data in objs.items():
            assert not problems(live, cw.record(etcd, "bkt", key), data), key
        for n in live:
            assert n.d.stop() == 0, f"{n.name} exited non-zero (leak check)"
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
