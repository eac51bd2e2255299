#!/usr/bin/env python3
"""Crash test: kill -9 the datanode at random moments during concurrent PUTs through the
gateway, restart it, and check that

  * every acknowledged object reads back byte-identical,
  * no object is visible with content other than exactly what was sent (no partial object),
  * after everything visible is deleted, no cell file or temp file is left on any drive.

ZEST_CRASH_CYCLES sets the number of kill/restart cycles (make test: 5, make reliability: 100).
Each object's content is derived from its key, so a visible object can be checked even when
its PUT was in flight at the kill and its answer was lost.
"""
import hashlib
import os
import random
import sys
import threading
import time

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402

CYCLES = int(os.environ.get("ZEST_CRASH_CYCLES", "5"))
WRITERS = 4
BUCKET = "crash"


def content(key):
    """Deterministic bytes for a key: size 0..3 MiB, sometimes exactly 0 or 1 byte."""
    h = hashlib.sha256(key.encode()).digest()
    r = int.from_bytes(h[:4], "little")
    size = (0, 1, 4096, r % (3 << 20))[r % 4]
    block = hashlib.sha256(h).digest() * 2048  # 64 KiB pattern
    return (block * (size // len(block) + 1))[:size]


def s3_client(c, attempts=1):
    """attempts=1 for writers, so that a 200 is exactly what was acknowledged; checks
    retry like any S3 client does on 503 (a gateway channel still reconnecting)."""
    cfg = Config(retries={"total_max_attempts": attempts, "mode": "standard"}, connect_timeout=5,
                 read_timeout=30, s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=cfg)


def writer(c, cycle, tid, stop, acked, lock):
    s3 = s3_client(c)
    n = 0
    while not stop.is_set():
        key = f"c{cycle}/t{tid}/{n}"
        n += 1
        try:
            s3.put_object(Bucket=BUCKET, Key=key, Body=content(key))
        except Exception:
            continue  # the datanode died under it: unacknowledged, may or may not exist
        with lock:
            acked.add(key)


def wait_writable(s3, deadline=60):
    t0 = time.time()
    while time.time() - t0 < deadline:
        try:
            s3.put_object(Bucket=BUCKET, Key="probe", Body=b"x")
            return
        except Exception:
            time.sleep(0.2)
    raise AssertionError("gateway never reached the restarted datanode")


def list_all(s3):
    keys, token = [], None
    while True:
        kw = {"Bucket": BUCKET, "MaxKeys": 1000}
        if token:
            kw["ContinuationToken"] = token
        r = s3.list_objects_v2(**kw)
        keys += [o["Key"] for o in r.get("Contents", [])]
        if not r.get("IsTruncated"):
            return keys
        token = r["NextContinuationToken"]


def verify(s3, acked, prefix=""):
    """Every acknowledged key under prefix is visible, every visible one is intact."""
    visible = set(k for k in list_all(s3) if k.startswith(prefix)) - {"probe"}
    lost = {k for k in acked if k.startswith(prefix)} - visible
    assert not lost, f"{len(lost)} acknowledged objects lost, e.g. {sorted(lost)[:5]}"
    for key in visible:
        body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert body == content(key), f"{key}: {len(body)} bytes differ from what was sent"
    return visible


def drive_files(c):
    out = []
    for d in c.drives:
        data = os.path.join(d, "data")
        for root, _, files in os.walk(data):
            out += [os.path.join(root, f) for f in files]
    return out


def test_crash_cycles():
    rnd = random.Random(int(os.environ.get("ZEST_TEST_SEED", "7")))
    acked, lock = set(), threading.Lock()
    with zh.cluster(ec="4+2", cell_size="64KiB") as c:
        s3 = s3_client(c, attempts=10)
        s3.create_bucket(Bucket=BUCKET)
        for cycle in range(CYCLES):
            stop = threading.Event()
            ts = [threading.Thread(target=writer, args=(c, cycle, t, stop, acked, lock))
                  for t in range(WRITERS)]
            for t in ts:
                t.start()
            time.sleep(rnd.uniform(0.3, 1.5))
            c.dn.kill9()
            stop.set()
            for t in ts:
                t.join()
            c.start_datanode()
            wait_writable(s3)
            # This cycle's objects in full; earlier cycles' once more at the end.
            visible = verify(s3, acked, prefix=f"c{cycle}/")
            print(f"cycle {cycle + 1}/{CYCLES}: {len(acked)} acknowledged so far, "
                  f"{len(visible)} visible from this cycle, all intact", flush=True)
        visible = verify(s3, acked)
        print(f"all cycles: {len(acked)} acknowledged, {len(visible)} visible, all intact",
              flush=True)
        # Delete everything visible; then no cell file and no temp file may remain.
        for key in list_all(s3):
            s3.delete_object(Bucket=BUCKET, Key=key)
        c.dn.stop()
        c.start_datanode()  # a restart runs the sweep of uncommitted files once more
        left = drive_files(c)
        assert not left, f"{len(left)} files left on the drives, e.g. {left[:5]}"
        assert len(acked) > 0, "no PUT was ever acknowledged"


if __name__ == "__main__":
    zh.run_tests([test_crash_cycles])
