#!/usr/bin/env python3
"""A datanode that hangs under a PUT (SIGSTOP: its connections stay open, nothing answers).

The gateway (two datanodes, --stream-timeout 2s) streams a PUT's body into a Write on the
datanode the key is placed on. With that node stopped the Write's window never reopens; the
rpc client's progress timeout cancels it and the gateway must answer the PUT 503 SlowDown
(retryable) within a bound, free the upload and keep serving: HEAD, GET and PUT of keys on
the other datanode meanwhile. After SIGCONT the key still holds its old object (nothing of
the cut upload is visible, in HEAD, GET or a listing) and PUTs to the node work again.

The same in cluster mode (cluster_harness: etcd, three datanodes, RS 2+1) with the
coordinator of the PUT stopped, under the default --stream-timeout (15 s, above the
coordinators' 10 s peer timeout): 503, HEAD (etcd) and a GET (read around the stopped node)
served meanwhile, the old object whole, PUTs fine after SIGCONT. Skipped without etcd.

The bounds are generous (a hang check, not a speed check).
"""
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402
import zest_harness as zh  # noqa: E402

BUCKET = "hung"
STREAM_TIMEOUT_S = 2
BOUND_S = STREAM_TIMEOUT_S + 25  # the 503 comes about the timeout after the stop
BIG = 1 << 30  # the declared body: far more than every buffer on the way


def put_after_stall(s3, key, body, timeout=60):
    """A PUT right after the node resumed: SlowDown is the answer while its admission still
    counts the stall as drive latency (it decays within a second of idle), and in cluster
    mode ServiceUnavailable while the resumed node, whose lease ran out while it slept,
    registers again; S3 clients retry both 503s, and so does this."""
    deadline = time.time() + timeout
    while True:
        try:
            return s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        except s3.exceptions.ClientError as e:
            code = e.response["Error"]["Code"]
            if code not in ("SlowDown", "ServiceUnavailable") or time.time() > deadline:
                raise
            time.sleep(0.2)


def client(endpoint):
    cfg = Config(retries={"total_max_attempts": 1}, read_timeout=BOUND_S, connect_timeout=5,
                 s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=cfg)


def received(c):
    return zh.metric_sum(zh.metrics(c.dn_metrics), "zest_payload_received_bytes_total")


def key_on(s3, c, other, prefix):
    """A key the gateway places on datanode c (found by where a probe PUT's bytes went)."""
    for i in range(64):
        key = f"{prefix}{i}"
        b0, o0 = received(c), received(other)
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"p" * 4096)
        if received(c) > b0 and received(other) == o0:
            return key
        s3.delete_object(Bucket=BUCKET, Key=key)
    raise AssertionError("no key placed on the datanode")


class RawPut:
    """A presigned PUT with a huge declared body, sent from a thread until the gateway
    stops reading or answers; the answer is read by read_status()."""

    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=BOUND_S)
        path = u.path + "?" + u.query
        head = (f"PUT {path} HTTP/1.1\r\nHost: {u.netloc}\r\n"
                f"Content-Length: {BIG}\r\n\r\n").encode()
        self.sock.sendall(head)
        self.sent = 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._send, daemon=True)
        self.t.start()

    def _send(self):
        buf = b"x" * (1 << 20)
        try:
            while not self.stop.is_set() and self.sent < BIG:
                self.sock.sendall(buf)
                self.sent += len(buf)
        except OSError:
            pass  # the gateway answered and closed: expected

    def read_status(self):
        data = b""
        while b"\r\n" not in data:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data.split(b"\r\n", 1)[0].decode(errors="replace"), data

    def close(self):
        self.stop.set()
        self.sock.close()
        self.t.join(10)


def test_put_to_a_hung_datanode_gets_503():
    root = zh.tempfile.mkdtemp(prefix="zest-hung-")
    victim = zh.Cluster(gateway=False, root=os.path.join(root, "a"))
    other = zh.Cluster(gateway=False, root=os.path.join(root, "b"))
    gw = None
    ok = False
    try:
        endpoint, gw = zh.gateway_over([victim, other], root, "s3gw",
                                       extra=["--stream-timeout", f"{STREAM_TIMEOUT_S}s"])
        s3 = client(endpoint)
        s3.create_bucket(Bucket=BUCKET)
        big = key_on(s3, victim, other, "big")  # holds the 4 KiB probe: the old object
        old = s3.head_object(Bucket=BUCKET, Key=big)
        live = key_on(s3, other, victim, "live")
        url = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": big},
                                        ExpiresIn=600)

        put = RawPut(url)
        try:
            while put.sent < (8 << 20):  # the Write is streaming
                time.sleep(0.01)
            os.kill(victim.dn.proc.pid, signal.SIGSTOP)
            t0 = time.time()
            try:
                # the other datanode is served while the PUT hangs
                assert s3.head_object(Bucket=BUCKET, Key=live)["ContentLength"] == 4096
                status, raw = put.read_status()
                took = time.time() - t0
                assert status.startswith("HTTP/1.1 503"), (status, raw[:400])
                assert b"SlowDown" in raw or b"Content-Length" in raw, raw[:400]
                assert took < BOUND_S, f"the 503 took {took:.1f}s"
                print(f"503 after {took:.1f}s, {put.sent >> 20} MiB sent", flush=True)
                # and after it: reads and writes of the live node
                assert s3.get_object(Bucket=BUCKET, Key=live)["Body"].read() == b"p" * 4096
                s3.put_object(Bucket=BUCKET, Key=live, Body=b"q" * 10000)
                assert s3.get_object(Bucket=BUCKET, Key=live)["Body"].read() == b"q" * 10000
            finally:
                os.kill(victim.dn.proc.pid, signal.SIGCONT)
        finally:
            put.close()

        # nothing of the cut upload is visible: the old object, whole
        h = s3.head_object(Bucket=BUCKET, Key=big)
        assert (h["ContentLength"], h["ETag"]) == (old["ContentLength"], old["ETag"]), h
        assert s3.get_object(Bucket=BUCKET, Key=big)["Body"].read() == b"p" * 4096
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))
        assert keys == sorted([big, live]), keys
        # PUTs to the node work again
        body = os.urandom(5 << 20)
        put_after_stall(s3, big, body)
        assert s3.get_object(Bucket=BUCKET, Key=big)["Body"].read() == body
        ok = True
    finally:
        rcs = []
        if gw is not None:
            rcs.append(("zest-s3gw", gw.stop()))
        rcs += victim.stop() + other.stop()
        if not ok:
            victim.dump_logs()
            other.dump_logs()
            with open(os.path.join(root, "s3gw.log"), "rb") as f:
                sys.stderr.write("----- s3gw.log (tail) -----\n" +
                                 f.read()[-6000:].decode(errors="replace") + "\n")
    bad = [(a, rc) for a, rc in rcs if rc != 0]
    assert not bad, f"daemons exited non-zero at shutdown: {bad}"
    if not os.environ.get("ZEST_KEEP"):
        zh.shutil.rmtree(root, ignore_errors=True)


def test_put_to_a_hung_coordinator_gets_503():
    bound = 15 + 25  # the default --stream-timeout and slack
    with ch.cluster(nodes=3, ec="2+1", drives=1) as c:
        s3 = c.s3(read_timeout=bound)
        s3.create_bucket(Bucket=BUCKET)
        key, other = "big", "other"
        names = [f"dn-{i}" for i in sorted(c.nodes)]
        coord = int(ch.place_rank(BUCKET, key, names)[0].split("-")[1])
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"p" * 4096)
        old = s3.head_object(Bucket=BUCKET, Key=key)
        obody = os.urandom(300 << 10)
        s3.put_object(Bucket=BUCKET, Key=other, Body=obody)
        url = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": key},
                                        ExpiresIn=600)
        put = RawPut(url)
        try:
            while put.sent < (8 << 20):
                time.sleep(0.01)
            victim = c.node(coord)
            os.kill(victim.pid, signal.SIGSTOP)
            t0 = time.time()
            try:
                assert s3.head_object(Bucket=BUCKET, Key=other)["ContentLength"] == len(obody)
                status, raw = put.read_status()
                took = time.time() - t0
                assert status.startswith("HTTP/1.1 503"), (status, raw[:400])
                assert took < bound, f"the 503 took {took:.1f}s"
                print(f"     503 after {took:.1f}s, {put.sent >> 20} MiB sent", flush=True)
                # read around the stopped node (its cells rebuilt from parity)
                got = s3.get_object(Bucket=BUCKET, Key=other)["Body"].read()
                assert got == obody, "GET around the stopped node: wrong bytes"
            finally:
                os.kill(victim.pid, signal.SIGCONT)
        finally:
            put.close()
        h = s3.head_object(Bucket=BUCKET, Key=key)
        assert (h["ContentLength"], h["ETag"]) == (old["ContentLength"], old["ETag"]), h
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"p" * 4096
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))
        assert keys == [key, other], keys
        # the stopped node's lease ran out while it slept: with two live nodes a 2+1 group
        # would survive no node loss and the write quorum refuses it, so wait until the
        # node is back in every view before the next PUT
        c.wait_live(3)
        ch.wait_for("the gateway to see 3 live nodes",
                    lambda: c.gw.metrics().get("zest_cluster_live_nodes") == 3, ch.LEASE_TTL + 10)
        body = os.urandom(5 << 20)
        put_after_stall(s3, key, body)
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == body


if __name__ == "__main__":
    ch.run([test_put_to_a_hung_datanode_gets_503, test_put_to_a_hung_coordinator_gets_503])
