#!/usr/bin/env python3
"""The coordinator of a PUT SIGKILLed in the middle of it (docs/cluster.md, "Write and
commit" 5 and "Cell collection"): six datanodes, RS(4,2), a 24 MiB PUT streamed slowly by a
raw SigV4 client so that the kill lands while cells are on the peers:

- the client gets an error (or the connection closes), never a 200;
- nothing becomes visible: HEAD 404, not listed, no record in etcd, before and after the
  coordinator comes back;
- the cells the peers had already written stay pending and are collected after --gc-grace
  (short here): no cell file is left on any node, zest_cluster_gc_cells_total{action="delete"}
  counts them;
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

        # stream until the peers hold cells of the object, then a little more, slowly
        deadline = time.time() + 60
        while sent < size // 2 or peer_cells() == 0:
            assert sent < size - step, "all but the last bytes sent and no cell on a peer"
            assert time.time() < deadline, "no cell reached a peer"
            conn.send(data[sent:sent + step])
            sent += step
            time.sleep(0.02)
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
        cells_left = total_cells(c)
        print(f"     cell files after the kill: {cells_left}", flush=True)
        assert sum(cells_left.values()) > 0

        # the coordinator back (its own pending cells are collected too)
        c.restart(coord)
        c.wait_live(6)
        invisible("coordinator back")

        # the collectors: past the grace every pending cell of the extent is deleted
        ch.wait_for("every cell file collected",
                    lambda: sum(total_cells(c).values()) == 0, GRACE * 6 + 30, step=0.5)
        deleted = c.sum_metric('zest_cluster_gc_cells_total{action="delete"}')
        print(f"     collected: gc deletes {deleted:.0f}", flush=True)
        assert deleted >= sum(cells_left.values()), (deleted, cells_left)
        invisible("after collection")

        # the key is usable
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
        assert ch.get_digest(s3, BUCKET, key) == (size, ch.digest(data))


if __name__ == "__main__":
    ch.run([test_coordinator_killed_mid_put])
