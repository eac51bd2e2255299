#!/usr/bin/env python3
"""Zero copy with forwarding (docs/cluster.md, "Write and commit" 2): six datanodes, RS(4,2),
the gateway --cluster, mutual TLS; a 32 MiB object PUT twice (the second an overwrite).

- The coordinator (the key's first node in the gateway's ranking) forwards the peers' cells
  by reference: its zest_payload_copied_bytes_total stays 0 while it received the payload
  and forwarded (zest_cluster_forwarded_bytes_total) about (k+m-1)/k of it; the peers copy
  nothing either.
- The LD_PRELOAD memcpy counter of the cluster write test (memcpy_count.c, built by meson,
  ZEST_MEMCPY_COUNT) in every datanode splits the bytes memcpy/memmove moved in calls of
  >= 1 KiB into the program's own (zest, linked statically) and the shared libraries': the
  coordinator's own code moved less than 1/64 of the payload. The libraries' copies (gRPC,
  OpenSSL: TLS decryption runs through memory BIOs) are printed, not judged: they are below
  zest. Left out under ASan (it interposes memcpy itself) and when the counter is not built.

Exits 77 without etcd or without the gateway's --cluster.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

MiB = 1 << 20
BUCKET = "zerocopy"
SIZE = 32 * MiB
PUTS = 2


def copied(m):
    return ch.metric_sum(m, "zest_payload_copied_bytes_total")


def read_counts(path):
    """{"program": bytes, "libraries": bytes} the counter wrote at the process's exit."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return {k: int(v) for k, v in (w.split("=") for w in f.read().split())}


def test_forwarding_copies_nothing():
    preload = os.environ.get("ZEST_MEMCPY_COUNT")
    use_counter = bool(preload) and os.path.exists(preload) and not ch.zh.SANITIZED
    count_dir = tempfile.mkdtemp(prefix="zest-memcpy-")
    env = None
    if use_counter:
        def env(i):
            return dict(os.environ, LD_PRELOAD=preload,
                        ZEST_MEMCPY_OUT=os.path.join(count_dir, f"dn-{i}.memcpy"))
    try:
        with ch.cluster(nodes=6, ec="4+2", data_io="buffered", dn_env=env,
                        read_grace="1s") as c:
            s3 = c.s3()
            s3.create_bucket(Bucket=BUCKET)
            key = "zero/copy"
            names = [f"dn-{i}" for i in sorted(c.nodes)]
            coord = int(ch.place_rank(BUCKET, key, names)[0].split("-")[1])
            before = {i: c.node_metrics(i) for i in c.nodes}
            data = ch.body("zc", SIZE)
            for _ in range(PUTS):
                s3.put_object(Bucket=BUCKET, Key=key, Body=data)
            assert ch.get_digest(s3, BUCKET, key) == (SIZE, ch.digest(data))
            # the record is in etcd, and RS(4,2) over six nodes puts a cell of every group on
            # each (the overwritten object's cells deleted after the 1 s read grace: one
            # object's worth left)
            assert c.etcd.keys(f"/zest/objects/{BUCKET}/") == [f"/zest/objects/{BUCKET}/{key}"]
            groups = -(-SIZE // (4 * MiB * 16))  # k = 4 cells of 1 MiB, 16 stripes a group
            cells = {i: len(c.cell_files(i)) for i in c.nodes}
            print(f"     cell files per node: {cells}", flush=True)
            ch.wait_for("the replaced object's cells deleted",
                        lambda: all(len(c.cell_files(i)) == groups for i in c.nodes), 60)
            after = {i: c.node_metrics(i) for i in c.nodes}

            def delta(i, name):
                return ch.metric_sum(after[i], name) - ch.metric_sum(before[i], name)

            rx = delta(coord, "zest_payload_received_bytes_total")
            fwd = delta(coord, "zest_cluster_forwarded_bytes_total")
            print(f"     coordinator dn-{coord}: received {rx / MiB:.1f} MiB, forwarded "
                  f"{fwd / MiB:.1f} MiB", flush=True)
            for i in c.nodes:
                print(f"     dn-{i}: received "
                      f"{delta(i, 'zest_payload_received_bytes_total') / MiB:.1f} MiB, "
                      f"copied {delta(i, 'zest_payload_copied_bytes_total'):.0f} B", flush=True)
            assert rx >= PUTS * SIZE, f"dn-{coord} is not the coordinator (received {rx})"
            # (k+m-1)/k of the payload with one cell of each group kept local
            assert fwd >= PUTS * SIZE, f"the coordinator forwarded only {fwd} B"
            for i in c.nodes:
                assert delta(i, "zest_payload_copied_bytes_total") == 0, \
                    f"dn-{i} copied payload: {after[i]}"
        if not use_counter:
            print("     memcpy counter not used (ASan build, or ZEST_MEMCPY_COUNT unset)")
            return
        for i in sorted(c.nodes):
            n = read_counts(os.path.join(count_dir, f"dn-{i}.memcpy"))
            print(f"     memcpy >= 1 KiB in dn-{i}{' (coordinator)' if i == coord else ''}: "
                  f"{n}", flush=True)
        counts = read_counts(os.path.join(count_dir, f"dn-{coord}.memcpy"))
        assert counts is not None, "the memcpy counter wrote nothing for the coordinator"
        own = counts["program"]
        assert own < PUTS * SIZE / 64, \
            f"zest-datanode's own code memcpy'd {own} B for {PUTS * SIZE} B of payload"
    finally:
        shutil.rmtree(count_dir, ignore_errors=True)


if __name__ == "__main__":
    ch.run([test_forwarding_copies_nothing])
