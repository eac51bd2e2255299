#!/usr/bin/env python3
"""What a demanding S3 client expects of the gateway in cluster mode (docs/cluster.md,
docs/s3-compatibility.md), with real parts (cluster_harness: 3-member etcd, six
datanodes over mTLS, zest-s3gw --cluster):

- hung: a datanode SIGSTOPped (its connections stay open, nothing answers) does not hang
  GETs: each ReadCell times out on progress, the object is rebuilt from the other cells,
  byte-identical, counted in zest_degraded_reads_total; a DELETE (DeleteCells to the hung
  node) ends too. Then SIGCONT.
- consistent: the gateway reads etcd through another member than the one the
  coordinators write through; 50 times in a row an overwrite then GET returns the new
  bytes, and a DELETE then HEAD is 404 (and the listing agrees).
- unknown size: `curl -T -` with --aws-sigv4 (HTTP chunked, no
  x-amz-decoded-content-length) is stored, in one Write (100 KiB) and in pieces composed
  at the commit (8 MiB + 1: s3gw/s3_bcl_put.c), byte-identical; the same bytes with a
  Content-Length are stored too.

The bounds on time below catch a hang; they assert no speed. Exits 77 without etcd,
boto3 or curl.
"""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402
import test_cluster_write as cw  # noqa: E402
import zest_harness as zh  # noqa: E402

CELL = 64 << 10
PROGRESS_S = 5  # BCL_READ_PROGRESS_MS


def start_gateway_on(c, endpoint):
    """c's gateway, but its etcd client given one member only (the datanodes use the
    first member first): its reads are served by a member that follows the writes."""
    c.gw_port, c.gw_metrics = ch.free_port(), ch.free_port()
    argv = [zh.GATEWAY, "--listen", f"127.0.0.1:{c.gw_port}", "--cluster", endpoint,
            "--access-key", zh.ACCESS_KEY, "--secret-key", zh.SECRET_KEY,
            "--metrics", f"127.0.0.1:{c.gw_metrics}"]
    if c.tls:
        argv += ["--cluster-ca", c.certs["ca"], "--cluster-cert", c.certs["gw_cert"],
                 "--cluster-key", c.certs["gw_key"]]
    else:
        argv += ["--insecure"]
    c.gw = ch.Proc("s3gw", argv, os.path.join(c.root, "s3gw.log"), "127.0.0.1", c.gw_metrics)
    c.gw.start()


def degraded(c):
    return c.gw_metrics_now().get("zest_degraded_reads_total", 0)


def cell0_node(c, bucket, key):
    """The index of the datanode holding cell 0 of group 0 of bucket/key (from its record):
    every GET of the object's first byte reads that cell."""
    out = c.etcd.ctl("get", f"/zest/objects/{bucket}/{key}", "-w", "json").stdout
    rec = cw.decode_record(base64.b64decode(json.loads(out)["kvs"][0]["value"]))
    e = rec["extents"][0]
    return int(e["nodes"][e["groups"][0]["cells"][0]].rpartition("-")[2])


def test_hung_node(c, s3):
    objs = {f"h/{i}": ch.body(100 + i, n)
            for i, n in enumerate([1, 4096, 300 << 10, (1 << 20) + 7])}
    for k, v in objs.items():
        s3.put_object(Bucket="strict", Key=k, Body=v)
    s3.put_object(Bucket="strict", Key="h/del", Body=ch.body(99, 200 << 10))
    # a GET reads only the data cells it needs (one for a small object): hang the node
    # holding h/0's first cell, so at least that GET must read around it
    victim = c.node(cell0_node(c, "strict", "h/0"))
    before = degraded(c)
    os.kill(victim.pid, signal.SIGSTOP)
    try:
        for k, v in objs.items():
            t0 = time.time()
            size, dig = ch.get_digest(s3, "strict", k)
            took = time.time() - t0
            assert (size, dig) == (len(v), ch.digest(v)), f"{k}: wrong bytes"
            # one progress timeout per stream at most (the node is then passed over);
            # generous: it is a hang check, not a speed check
            assert took < 3 * PROGRESS_S + 10, f"{k}: GET took {took:.1f}s"
        after = degraded(c)
        assert after > before, f"zest_degraded_reads_total {before} -> {after}"
        t0 = time.time()
        s3.delete_object(Bucket="strict", Key="h/del")
        took = time.time() - t0
        assert took < 3 * PROGRESS_S + 10, f"DELETE took {took:.1f}s"
        code = ch.error_code(_raises(lambda: s3.head_object(Bucket="strict", Key="h/del")))
        assert code[0] == 404, code
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    # back: reads go to it again and are right
    for k, v in objs.items():
        assert ch.get_digest(s3, "strict", k) == (len(v), ch.digest(v)), k


def _raises(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (botocore's ClientError)
        return e
    raise AssertionError("no error")


def test_read_after_write(c, s3):
    key = "raw/obj"
    for i in range(50):
        v = ch.body(1000 + i, 1 + (i * 977) % 9000)
        s3.put_object(Bucket="strict", Key=key, Body=v)
        got = s3.get_object(Bucket="strict", Key=key)["Body"].read()
        assert got == v, f"round {i}: GET after overwrite returned other bytes"
        h = s3.head_object(Bucket="strict", Key=key)
        assert h["ContentLength"] == len(v), f"round {i}: HEAD size {h['ContentLength']}"
        if i % 5 == 4:
            s3.delete_object(Bucket="strict", Key=key)
            code = ch.error_code(_raises(lambda: s3.head_object(Bucket="strict", Key=key)))
            assert code[0] == 404, f"round {i}: HEAD after DELETE {code}"
            lst = s3.list_objects_v2(Bucket="strict", Prefix="raw/")
            assert lst.get("KeyCount", 0) == 0, f"round {i}: listed after DELETE"
    # 50 more of the two halves alone: DELETE then HEAD
    for i in range(50):
        s3.put_object(Bucket="strict", Key=key, Body=b"x" * (i + 1))
        s3.delete_object(Bucket="strict", Key=key)
        code = ch.error_code(_raises(lambda: s3.head_object(Bucket="strict", Key=key)))
        assert code[0] == 404, f"round {i}: HEAD after DELETE {code}"


def curl_put(c, key, data, chunked):
    url = f"{c.endpoint}/strict/{key}"
    argv = ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--aws-sigv4",
            "aws:amz:us-east-1:s3", "--user", f"{zh.ACCESS_KEY}:{zh.SECRET_KEY}",
            # this curl does not send it by itself; signed with the other x-amz-* headers
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    if chunked:
        argv += ["-T", "-", url]  # stdin: curl sends Transfer-Encoding: chunked
    else:
        argv += ["--data-binary", "@-", "-X", "PUT", "-H",
                 "Content-Type: application/octet-stream", url]
    r = subprocess.run(argv, input=data, capture_output=True, timeout=30, check=True)
    out = r.stdout.decode(errors="replace")
    body, _, code = out.rpartition("\n")
    return int(code), body


def test_unknown_size_put(c, s3):
    data = ch.body(7, 100 << 10)
    for key, d in (("u/chunked", data), ("u/pieces", ch.body(8, (8 << 20) + 1))):
        code, body = curl_put(c, key, d, chunked=True)
        assert code == 200, (code, body)
        assert ch.get_digest(s3, "strict", key) == (len(d), ch.digest(d)), key
    code, body = curl_put(c, "u/sized", data, chunked=False)
    assert code == 200, (code, body)
    assert ch.get_digest(s3, "strict", "u/sized") == (len(data), ch.digest(data))


def main():
    if shutil.which("curl") is None:
        print("skip: no curl")
        sys.exit(77)
    try:
        import boto3  # noqa: F401
    except ImportError:
        print("skip: no boto3")
        sys.exit(77)

    def all_tests():
        with ch.cluster(nodes=6, ec="4+2", etcd_members=3, gateway=False, drives=1,
                        cell_size=CELL, stripes_per_group=2) as c:
            start_gateway_on(c, c.etcd.member_endpoint(2))
            s3 = c.s3()
            s3.create_bucket(Bucket="strict")
            for t in (test_unknown_size_put, test_read_after_write, test_hung_node):
                t0 = time.time()
                t(c, s3)
                print(f"ok   {t.__name__} ({time.time() - t0:.1f}s)", flush=True)

    ch.run([all_tests])


if __name__ == "__main__":
    main()
