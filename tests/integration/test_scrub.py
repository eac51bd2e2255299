#!/usr/bin/env python3
"""The scrubber on the live stack: a datanode (RS 4+2, 64 KiB cells) behind the gateway,
boto3 PUTs, then bytes flipped in one cell file on disk and another cell file cut short,
with nobody reading them. The scrubber (a pass a second, at 256 MiB/s) must count exactly
those two (zest_scrub_errors_total{kind="crc"} and {kind="size"}), hand them to the
background healer, which rewrites both files to their original bytes, and touch no other
file. Then a second and a third cell of the rotted cell's group are removed (m = 2): every
object still reads back byte-identical, which the repair of the first one made possible.

The same in cluster mode (tests/integration/cluster_harness.py: etcd, six datanodes
--cluster over mutual TLS, RS(3,2), the gateway --cluster): a cell file rotted on one node
is found by that node's scrubber, marked missing in its record by the node's cluster
healer and rebuilt onto it with its bytes, no other cell file changed, every object read
back. That case is skipped (and says why) without etcd or a gateway with --cluster.
"""
import os
import sys
import time

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402
import cluster_harness as ch  # noqa: E402

CELL = 64 << 10
SCRUB = ["--scrub-rate", "256", "--scrub-interval", "1s", "--heal-interval", "1s"]
WAIT = 60 if zh.SANITIZED else 30  # bounds, not timing claims


def s3_client(c):
    cfg = Config(retries={"total_max_attempts": 3, "mode": "standard"}, connect_timeout=5,
                 read_timeout=30, s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=cfg)


def cell_files(c):
    """{path: bytes} of every cell file on every drive."""
    out = {}
    for d in c.drives:
        for dirpath, _, names in os.walk(os.path.join(d, "data")):
            for n in names:
                p = os.path.join(dirpath, n)
                with open(p, "rb") as f:
                    out[p] = f.read()
    return out


def scrub_metrics(c):
    m = zh.metrics(c.dn_metrics)
    return {k: v for k, v in m.items() if k.startswith("zest_scrub_")}


def wait_for(what, cond, timeout=WAIT):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def passes_after(c, n):
    return scrub_metrics(c).get("zest_scrub_passes_total", 0) > n


def test_scrub_finds_and_repairs():
    sizes = {"a": 3 * 4 * CELL + 1000, "b": 4 * CELL, "c": 100000, "d": 2 << 20}
    blobs = {k: os.urandom(n) for k, n in sizes.items()}
    with zh.cluster(cell_size=CELL, extra_dn=SCRUB) as c:
        s3 = s3_client(c)
        s3.create_bucket(Bucket="scrub")
        for k, b in blobs.items():
            s3.put_object(Bucket="scrub", Key=k, Body=b)
        # One whole pass over what is stored, clean.
        n0 = scrub_metrics(c)["zest_scrub_passes_total"]
        wait_for("a clean pass", lambda: passes_after(c, n0))
        m = scrub_metrics(c)
        assert m["zest_scrub_bytes_total"] >= sum(sizes.values()), m
        assert all(m[f'zest_scrub_errors_total{{kind="{k}"}}'] == 0
                   for k in ("crc", "size", "missing", "io")), m
        assert m["zest_scrub_last_pass_timestamp_seconds"] > time.time() - 600, m
        before = cell_files(c)

        # Rot: bytes flipped in the middle of the largest data cell 1 of a group 0 (object
        # d's); a parity cell of another extent cut to half its length.
        names = sorted(before)
        rot = max((p for p in names if p.endswith(".0.1")), key=lambda p: len(before[p]))
        rot_id = os.path.basename(rot).split(".")[0]
        cut = next(p for p in names if p.endswith(".0.4") and rot_id not in p
                   and len(before[p]) > 8192)
        with open(rot, "r+b") as f:
            f.seek(len(before[rot]) // 2)
            b = f.read(4)
            f.seek(len(before[rot]) // 2)
            f.write(bytes(x ^ 0xA5 for x in b))
        os.truncate(cut, len(before[cut]) // 2)

        wait_for("both bad cells counted", lambda: (
            scrub_metrics(c)['zest_scrub_errors_total{kind="crc"}'] >= 1
            and scrub_metrics(c)['zest_scrub_errors_total{kind="size"}'] >= 1))
        # Repaired in place by the healer: every file as written, nothing else changed.
        wait_for("the files rebuilt", lambda: cell_files(c) == before)
        n1 = scrub_metrics(c)["zest_scrub_passes_total"]
        wait_for("another pass", lambda: passes_after(c, n1))
        m = scrub_metrics(c)
        assert m['zest_scrub_errors_total{kind="crc"}'] == 1, m
        assert m['zest_scrub_errors_total{kind="size"}'] == 1, m
        assert m['zest_scrub_errors_total{kind="missing"}'] == 0, m
        assert m['zest_scrub_errors_total{kind="io"}'] == 0, m
        assert m["zest_scrub_repairs_total"] == 2, m
        assert zh.metrics(c.dn_metrics)["zest_cells_healed_total"] == 2
        assert cell_files(c) == before

        # m = 2: two more cells of the rotted cell's group gone, and it still reads.
        for cell in (0, 5):
            other = [p for p in names if os.path.basename(p) == f"{rot_id}.0.{cell}"]
            assert len(other) == 1, other
            os.unlink(other[0])
        for k, b in blobs.items():
            got = s3.get_object(Bucket="scrub", Key=k)["Body"].read()
            assert got == b, f"{k}: {len(got)} of {len(b)} bytes, or different"


def all_cell_files(c):
    out = {}
    for i in c.nodes:
        for p in c.cell_files(i):
            with open(p, "rb") as f:
                out[p] = f.read()
    return out


def test_cluster_scrub():
    try:
        ch.require_tools()
        if not ch.has_flag(zh.GATEWAY, "--cluster"):
            raise ch.Skip("zest-s3gw has no --cluster")
    except ch.Skip as e:
        print(f"skip test_cluster_scrub: {e}")
        return
    blobs = {f"o{i}": os.urandom(n) for i, n in enumerate((70000, 3 * 3 * CELL * 2 + 5))}
    with ch.cluster(nodes=6, ec="3+2", drives=1, cell_size=CELL, stripes_per_group=2,
                    heal_after="3s", dn_base=60,
                    extra_dn=["--scrub-rate", "256", "--scrub-interval", "1s"]) as c:
        s3 = c.s3(retries=2)
        s3.create_bucket(Bucket="scrub")
        for k, b in blobs.items():
            s3.put_object(Bucket="scrub", Key=k, Body=b)
        # every node through one pass since the PUTs, clean
        n0 = {i: c.node(i).metrics().get("zest_scrub_passes_total", 0) for i in c.nodes}
        for i in c.nodes:
            wait_for(f"dn-{i}'s pass", lambda i=i: c.node(i).metrics().get(
                "zest_scrub_passes_total", 0) > n0[i] + 1)
        assert c.sum_metric("zest_scrub_errors_total") == 0
        # (a cell still pending, its CommitCells not yet there, is skipped by a pass and
        # read by a later one)
        before = all_cell_files(c)
        victim = next(i for i in sorted(c.nodes)
                      if any(len(before[p]) > 8192 for p in c.cell_files(i)))
        rot = max(c.cell_files(victim), key=lambda p: len(before[p]))
        with open(rot, "r+b") as f:
            f.seek(100)
            b = f.read(8)
            f.seek(100)
            f.write(bytes(x ^ 0x5A for x in b))

        node = c.node(victim)
        wait_for("the rotted cell counted", lambda: node.metrics().get(
            'zest_scrub_errors_total{kind="crc"}', 0) == 1)
        wait_for("the rotted cell rebuilt onto its node", lambda: all_cell_files(c) == before,
                 WAIT * 2)
        m = node.metrics()
        assert m["zest_scrub_repairs_total"] == 1, m
        assert m.get("zest_heal_marked_cells_total", 0) >= 1, m
        assert c.sum_metric("zest_scrub_errors_total") == 1
        for k, b in blobs.items():
            got = s3.get_object(Bucket="scrub", Key=k)["Body"].read()
            assert got == b, f"{k}: {len(got)} of {len(b)} bytes, or different"


if __name__ == "__main__":
    zh.run_tests([test_scrub_finds_and_repairs, test_cluster_scrub])
