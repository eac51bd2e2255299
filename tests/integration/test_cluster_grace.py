#!/usr/bin/env python3
"""Versions outlive their replacement while read, and PUTs of any duration (issue #22 items
5 and 6; docs/cluster.md "Cell collection"): a real etcd, six zest-datanode --cluster over
mutual TLS, RS(4,2) with 64 KiB cells (80 groups in 40 MiB), the gateway --cluster.

- a slow GET (boto3, reading 64 KiB at a time) of a 40 MiB object; in its middle the object
  is overwritten (a PUT that commits): the datanodes retire the old cells instead of
  deleting them (zest_cells_retired_total counts every one of them before the GET goes on),
  the GET reads on for more than twice --read-grace and returns every byte of the old
  version, byte-identical; then the old extent's cell files all go (the collectors' retired
  pass, counted by zest_cluster_gc_cells_total{action="delete"}) and the new version reads;
- the same with a DELETE in the middle of the GET;
- a PUT whose body takes more than twice --gc-grace (4 s) to arrive, making progress all the
  time (a raw SigV4 client sending 64 KiB every 0.1 s), commits and reads back: the
  coordinator refreshes its pending cells on every node as it writes;
- a PUT that stalls for longer than the grace is refused (an error status, or the connection
  closed: never a 200), nothing visible, and every cell it wrote is gone.

Assertions are on states and counts; the sleeps only pace the slow clients. Exits 77 without
etcd, etcdctl or openssl, or without the gateway's --cluster.
"""
import http.client
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

MiB = 1 << 20
KiB = 1 << 10
BUCKET = "grace"
CELL, SPG = 64 * KiB, 2
SIZE = 40 * MiB
READ_GRACE = 3  # s, --read-grace
GC_GRACE = 4  # s, --gc-grace
STEP = 64 * KiB


def ext_hex(rec):
    return f"{rec['extents'][0]['id']:016x}"


def live_cells(rec):
    """The cells a record names that are not marked missing."""
    e = rec["extents"][0]
    return sum(1 for g in e["groups"] for c in range(len(g["cells"]))
               if not g["missing"] & (1 << c))


def gc_deleted(c):
    return sum(n.metrics().get('zest_cluster_gc_cells_total{action="delete"}', 0)
               for n in c.running_nodes())


def files_of(c, ext):
    return sum(1 for i in c.nodes for k in c.nodes[i].cells() if k[0] == ext)


def slow_get_with(c, change, label):
    """GET SIZE bytes slowly; after a quarter, change() (an overwrite or a delete) commits and
    the old cells are retired; the rest of the GET lasts more than twice the read grace."""
    s3 = c.s3(read_timeout=120)
    key = f"slow/{label}"
    old = ch.body(f"old-{label}", SIZE)
    s3.put_object(Bucket=BUCKET, Key=key, Body=old)
    rec = c.record(BUCKET, key)
    ext = ext_hex(rec)
    cells = live_cells(rec)
    assert files_of(c, ext) == cells, (files_of(c, ext), cells)
    retired0 = c.sum_metric("zest_cells_retired_total")
    deleted0 = gc_deleted(c)

    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"]
    got = bytearray()
    while len(got) < SIZE // 4:
        chunk = body.read(STEP)
        assert chunk, f"the GET ended at {len(got)} bytes before the {label}"
        got += chunk
        time.sleep(0.005)
    change(s3, key)
    # every cell of the old version retired, on its node, before the GET reads on
    ch.wait_for(f"the {label}'s DeleteCells to retire {cells} cells",
                lambda: c.sum_metric("zest_cells_retired_total") >= retired0 + cells, 60)
    assert files_of(c, ext) == cells  # retired, not deleted
    t_change = time.time()
    left = SIZE - len(got)
    pause = 2.5 * READ_GRACE / (left / STEP)  # the rest takes > 2 x the read grace
    while True:
        chunk = body.read(STEP)
        if not chunk:
            break
        got += chunk
        time.sleep(pause)
    assert time.time() - t_change > 2 * READ_GRACE  # the test's own pacing held
    assert len(got) == SIZE, f"the GET ended after {len(got)} of {SIZE} bytes"
    assert ch.digest(bytes(got)) == ch.digest(old), "the GET's bytes differ from the old version"
    # once nobody reads them, the read grace passes and the collectors delete them
    ch.wait_for(f"the replaced extent {ext}'s cell files to go",
                lambda: files_of(c, ext) == 0, 120)
    deleted = gc_deleted(c)
    assert deleted - deleted0 >= cells, (deleted, deleted0, cells)
    print(f"     {label}: the GET read {len(got)} bytes of the old version across it; "
          f"{cells} cells retired, then deleted", flush=True)
    return key


def test_slow_get_across_overwrite_and_delete():
    with ch.cluster(nodes=6, ec="4+2", cell_size=CELL, stripes_per_group=SPG,
                    read_grace=f"{READ_GRACE}s") as c:
        s3 = c.s3()
        s3.create_bucket(Bucket=BUCKET)
        new = ch.body("new", 3 * MiB + 17)

        def overwrite(s3, key):
            s3.put_object(Bucket=BUCKET, Key=key, Body=new)

        key = slow_get_with(c, overwrite, "overwrite")
        assert ch.get_digest(s3, BUCKET, key) == (len(new), ch.digest(new))

        def delete(s3, key):
            s3.delete_object(Bucket=BUCKET, Key=key)

        key = slow_get_with(c, delete, "delete")
        assert c.record(BUCKET, key) is None
        try:
            s3.head_object(Bucket=BUCKET, Key=key)
            raise AssertionError("HEAD after the DELETE answered 200")
        except Exception as e:  # botocore ClientError 404
            assert "404" in str(e) or "Not Found" in str(e), e


def signed_put_headers(c, bucket, key, size):
    """SigV4 headers for a PUT with an unsigned payload, so the body can be streamed."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials
    url = f"{c.endpoint}/{bucket}/{key}"
    req = AWSRequest(method="PUT", url=url, headers={"Content-Length": str(size)})
    # else botocore signs the (empty) body it was given, and the gateway refuses the real one
    req.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    S3SigV4Auth(Credentials(ch.zh.ACCESS_KEY, ch.zh.SECRET_KEY), "s3", "us-east-1") \
        .add_auth(req)
    return dict(req.headers.items())


def put_paced(c, key, data, pause, stall_at=None, stall=0):
    """PUT data through the gateway, STEP bytes per send, pause seconds between sends; at
    stall_at bytes, stall seconds without sending. (status or None, seconds taken, the
    answer's body)."""
    conn = http.client.HTTPConnection("127.0.0.1", c.gw_port, timeout=120)
    t0 = time.time()
    try:
        conn.putrequest("PUT", f"/{BUCKET}/{key}", skip_accept_encoding=True)
        for h, v in signed_put_headers(c, BUCKET, key, len(data)).items():
            conn.putheader(h, v)
        conn.endheaders()
        sent = 0
        while sent < len(data):
            if stall_at is not None and sent == stall_at:
                time.sleep(stall)
            conn.send(data[sent:sent + STEP])
            sent += STEP
            time.sleep(pause)
        r = conn.getresponse()
        return r.status, time.time() - t0, r.read()
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return None, time.time() - t0, repr(e)
    finally:
        conn.close()


def total_files(c):
    return sum(len(c.cell_files(i)) for i in c.nodes)


def test_put_longer_than_the_grace():
    with ch.cluster(nodes=6, ec="4+2", cell_size=CELL, stripes_per_group=SPG,
                    gc_grace=f"{GC_GRACE}s") as c:
        s3 = c.s3(read_timeout=120)
        s3.create_bucket(Bucket=BUCKET)
        data = ch.body("long", 8 * MiB)
        status, took, ans = put_paced(c, "long", data, 0.1)  # 128 sends: > 12 s
        assert took > 2 * GC_GRACE, took  # the test's own pacing held
        assert status == 200, f"the {took:.1f} s PUT answered {status}: {ans}"
        assert ch.get_digest(s3, BUCKET, "long") == (len(data), ch.digest(data))
        rec = c.record(BUCKET, "long")
        assert all(g["missing"] == 0 for g in rec["extents"][0]["groups"]), rec
        print(f"     a {took:.1f} s PUT (grace {GC_GRACE} s) committed and reads back",
              flush=True)

        # stalled for more than the grace: refused, nothing visible, its cells gone
        before = total_files(c)
        stalled = ch.body("stalled", 8 * MiB)
        status, took, ans = put_paced(c, "stalled", stalled, 0.0, stall_at=4 * MiB,
                                      stall=GC_GRACE + 2)
        assert status != 200, f"the stalled PUT answered {status}: {ans}"
        assert c.record(BUCKET, "stalled") is None
        ch.wait_for("the stalled PUT's cells to go", lambda: total_files(c) == before, 120)
        assert ch.get_digest(s3, BUCKET, "long") == (len(data), ch.digest(data))
        print(f"     a PUT stalled {GC_GRACE + 2} s: status {status} ({ans!r:.200}), its "
              "cells gone", flush=True)


if __name__ == "__main__":
    ch.run([test_slow_get_across_overwrite_and_delete, test_put_longer_than_the_grace])
