#!/usr/bin/env python3
"""The coordinator of a PUT SIGKILLed in the middle of it (docs/cluster.md, "Write and
commit" 5 and "Cell collection"): six datanodes, RS(4,2), a 24 MiB PUT streamed slowly by a
raw SigV4 client so that the kill lands while cells are on the peers:

- the client gets an error (or the connection closes), never a 200;
- nothing becomes visible: HEAD 404, not listed, no record in etcd, before and after the
  coordinator comes back;
- the cells the peers had already written stay pending and are collected after --gc-grace
  (short here): no cell file is left on any node, and each one is counted exactly once, by
  zest_cluster_gc_cells_total{action="delete"} (the collectors) or zest_cells_swept_total
  (the restarted coordinator's sweep at open of its half-written cells, a peer's cancelled
  write);
- the same key PUT again afterwards works and reads back.

The coordinator is the key's first node in the gateway's ranking (cluster_harness.place_rank,
the same hash as common/zc_place.c). Exits 77 without etcd or without the gateway's --cluster.
"""
import http.client
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

MiB = 1 << 20
BUCKET = "coord"
GRACE = 4  # s, --gc-grace


def signed_put_headers(c, bucket, key, size):
    """SigV4 headers for a PUT with an unsigned payload, so the body can be streamed."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    url = f"{c.endpoint}/{bucket}/{key}"
    req = AWSRequest(method="PUT", url=url, headers={
        "Content-Length": str(size), "x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    S3SigV4Auth(Credentials(ch.zh.ACCESS_KEY, ch.zh.SECRET_KEY), "s3", "us-east-1") \
        .add_auth(req)
    return dict(req.headers.items())


def total_cells(c):
    return {i: len(c.cell_files(i)) for i in c.nodes}


def test_coordinator_killed_mid_put():
    with ch.cluster(nodes=6, ec="4+2", cell_size=65536, stripes_per_group=2,
                    gc_grace=f"{GRACE}s") as c:
        s3 = c.s3()
        s3.create_bucket(Bucket=BUCKET)
        key = "half/written"
        names = [f"dn-{i}" for i in sorted(c.nodes)]
        coord = int(ch.place_rank(BUCKET, key, names)[0].split("-")[1])
        print(f"     coordinator of {BUCKET}/{key}: dn-{coord}", flush=True)
        assert all(n == 0 for n in total_cells(c).values())

        size = 24 * MiB
        data = ch.body("half", size)
        conn = http.client.HTTPConnection("127.0.0.1", c.gw_port, timeout=30)
        conn.putrequest("PUT", f"/{BUCKET}/{key}", skip_accept_encoding=True)
        for h, v in signed_put_headers(c, BUCKET, key, size).items():
            conn.putheader(h, v)
        conn.endheaders()
        sent = 0
        step = 256 * 1024
        peers = [i for i in c.nodes if i != coord]

        def peer_cells():
            return sum(len(c.cell_files(i)) for i in peers)

        # stream half the body, slowly, then wait until the peers hold cells of the object;
        # a trickle meanwhile keeps the gateway's idle timeout away (the rest is >= 1 h of it)
        while sent < size // 2:
            conn.send(data[sent:sent + step])
            sent += step
            time.sleep(0.02)
        deadline = time.time() + 120
        last = 0.0
        while peer_cells() == 0:
            assert time.time() < deadline, "no cell reached a peer in 120 s"
            if time.time() - last >= 1 and sent < size - step:
                conn.send(data[sent:sent + 4096])
                sent += 4096
                last = time.time()
            time.sleep(0.1)
        m = c.node_metrics(coord)
        fwd = ch.metric_sum(m, "zest_cluster_forwarded_bytes_total")
        print(f"     {sent >> 20} MiB sent, peers hold {peer_cells()} cell files, "
              f"coordinator forwarded {fwd:.0f} B", flush=True)
        if any(k.startswith("zest_cluster_forwarded_bytes_total") for k in m):
            assert fwd > 0, f"dn-{coord} is not the coordinator: it forwarded nothing"
        c.kill(coord)
        # the rest of the body, as far as the gateway still takes it
        status = None
        try:
            while sent < size:
                conn.send(data[sent:sent + step])
                sent += step
            status = conn.getresponse().status
        except (OSError, http.client.HTTPException) as e:
            print(f"     client: {type(e).__name__} after {sent >> 20} MiB", flush=True)
        conn.close()
        print(f"     client status: {status}", flush=True)
        assert status != 200, "the PUT was acknowledged with its coordinator killed"

        def invisible(when):
            try:
                s3.head_object(Bucket=BUCKET, Key=key)
                raise AssertionError(f"{when}: the half-written object is visible")
            except s3.exceptions.ClientError as e:
                assert ch.error_code(e)[0] == 404, (when, ch.error_code(e))
            listed = s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
            assert not listed, f"{when}: listed {listed}"
            assert c.etcd.keys(f"/zest/objects/{BUCKET}/") == [], when

        invisible("coordinator dead")

        # Every cell file that goes from here on is counted by the node that removes it: its
        # collector (gc delete), the sweep at open of the restarted coordinator, or a peer's
        # write the kill cancelled (swept). The peers' counters and files are read together:
        # once no payload is in flight there, and no removal counted while the files were
        # listed.
        peer_nodes = [c.nodes[i] for i in peers]

        def removed(nodes):
            return (c.sum_metric('zest_cluster_gc_cells_total{action="delete"}', nodes) +
                    c.sum_metric("zest_cells_swept_total", nodes))

        def quiet_snapshot():
            if c.sum_metric("zest_inflight_bytes", peer_nodes) != 0:
                return None
            before = removed(peer_nodes)
            files = total_cells(c)
            return (before, files) if removed(peer_nodes) == before else None

        removed_before, cells_left = ch.wait_for(
            "the peers' cancelled writes to settle", quiet_snapshot, 120)
        print(f"     cell files after the kill: {cells_left}, peers counted "
              f"{removed_before:.0f} removals", flush=True)
        assert sum(cells_left.values()) > 0

        # the coordinator back (its own pending cells are collected too)
        c.restart(coord)
        c.wait_live(6)
        invisible("coordinator back")

        # the collectors: past the grace every pending cell of the extent is deleted
        ch.wait_for("every cell file collected",
                    lambda: sum(total_cells(c).values()) == 0, GRACE * 6 + 120, step=0.5)
        # each removal is counted just after its unlink: wait for the counts to catch up,
        # then they must match the files exactly (the restarted coordinator counts from 0,
        # which is its share: it was down at the snapshot)
        want = sum(cells_left.values())
        everyone = c.running_nodes()
        ch.wait_for("every removed cell file counted",
                    lambda: removed(everyone) - removed_before >= want, 120)
        gc = c.sum_metric('zest_cluster_gc_cells_total{action="delete"}', everyone)
        swept = c.sum_metric("zest_cells_swept_total", everyone)
        print(f"     collected: gc deletes {gc:.0f}, swept {swept:.0f} (peers had counted "
              f"{removed_before:.0f} before)", flush=True)
        assert removed(everyone) - removed_before == want, (gc, swept, removed_before,
                                                              cells_left)
        invisible("after collection")

        # the key is usable
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
        assert ch.get_digest(s3, BUCKET, key) == (size, ch.digest(data))


if __name__ == "__main__":
    ch.run([test_coordinator_killed_mid_put])
