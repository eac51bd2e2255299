#!/usr/bin/env python3
"""AbortMultipartUpload racing CompleteMultipartUpload of the same upload, with boto3
against the real daemons: one datanode behind the gateway, and the gateway --cluster over
etcd and three datanodes (RS(2,1)).

Each side first marks the upload's record, fenced (s3gw/s3_mpu_state.c), so exactly one
wins and the loser deletes and composes nothing:

- deterministic, with the gateway's fault points (ZEST_FAULTS, pause) holding one request
  right after its mark: an Abort against a Complete's mark answers NoSuchUpload (so does an
  UploadPart), and the Complete then answers 200 with the object byte-identical; a
  Complete against an Abort's mark answers NoSuchUpload, the Abort then 204, and no
  object exists. A part uploaded again while a Complete holds its listing (the hook after
  the listing) makes that Complete InvalidPart, never an object of the listed ETags over
  the new bytes; Complete with the new ETag then gives the new bytes. Skipped (77) in a
  build without -Dtest_faults.
- raced: 16 uploads (two parts of 5 MiB + 64 KiB, or one of 256 KiB), each with a
  Complete and an Abort sent at once from two threads, four pairs at a time. Every upload
  ends either completed (Abort NoSuchUpload or 204) and byte-identical on GET, or
  aborted (Abort 204, Complete NoSuchUpload), no object, ListParts NoSuchUpload; no
  upload is left listed. Which side wins each pair is timing and is only printed.
- afterwards every object is deleted, and no cell file is left on any datanode's drives
  (the aborted uploads' cells were collected, the completed objects' went with them) and
  no part or upload record in the reserved bucket (dn_client's listing; etcd's keys).
"""
import concurrent.futures
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402
import cluster_harness as ch  # noqa: E402

BUCKET = "race"
RESERVED = ".zest-mpu"
PAIRS = 16
CELL = re.compile(r"^[0-9a-f]{16}\.\d+\.\d+$")
DN_CLIENT = os.environ.get("ZEST_DN_CLIENT",
                           os.path.join(zh.BUILD, "tests", "integration", "dn_client"))
BASE = ch.body(7, 5 << 20)


def client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, read_timeout=60,
                                      retries={"total_max_attempts": 1},
                                      max_pool_connections=32))


def outcome(fn):
    """200 (or 204) for success, else (HTTP status, S3 code)."""
    try:
        r = fn()
        return r["ResponseMetadata"]["HTTPStatusCode"]
    except ClientError as e:
        return ch.error_code(e)


NO_UPLOAD = (404, "NoSuchUpload")


def bodies(i):
    if i % 2 == 0:
        return [i.to_bytes(8, "big") + BASE[8:], ch.body(1000 + i, 64 << 10)]
    return [ch.body(2000 + i, 256 << 10)]


def upload(s3, key, parts):
    uid = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    listed = []
    for n, data in enumerate(parts, 1):
        e = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=uid, PartNumber=n, Body=data)
        listed.append({"PartNumber": n, "ETag": e["ETag"]})
    return uid, listed


def complete(s3, key, uid, listed):
    return outcome(lambda: s3.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=uid, MultipartUpload={"Parts": listed}))


def abort(s3, key, uid):
    return outcome(lambda: s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=uid))


def whole_is(s3, key, data):
    n, d = ch.get_digest(s3, BUCKET, key)
    assert (n, d) == (len(data), ch.digest(data)), f"{key}: GET differs ({n} bytes)"


def absent(s3, key, uid):
    assert outcome(lambda: s3.head_object(Bucket=BUCKET, Key=key)) == (404, "404"), key
    assert outcome(lambda: s3.list_parts(Bucket=BUCKET, Key=key, UploadId=uid)) == NO_UPLOAD


class Pause:
    """One of the gateway's mpu.* fault points, armed pause:PATH through ZEST_FAULTS: hold()
    makes the next request to reach it wait."""

    def __init__(self, d, point):
        self.point, self.path = point, os.path.join(d, point)

    def env(self):
        return f"mpu.{self.point}=pause:{self.path}"

    def hold(self):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path + ".reached")
        open(self.path, "w").close()

    def wait_reached(self, timeout=30):
        ch.wait_for(f"a request at {self.point}",
                    lambda: os.path.exists(self.path + ".reached"), timeout)

    def release(self):
        os.unlink(self.path)


def in_thread(fn):
    box = {}
    t = threading.Thread(target=lambda: box.update(r=fn()))
    t.start()
    return t, box


def deterministic(s3, pauses):
    cm, am, cl = pauses["complete-marked"], pauses["abort-marked"], pauses["complete-listed"]
    # Abort against a Complete's mark
    parts = bodies(0)
    uid, listed = upload(s3, "held-complete", parts)
    cm.hold()
    t, box = in_thread(lambda: complete(s3, "held-complete", uid, listed))
    try:
        cm.wait_reached()
        assert abort(s3, "held-complete", uid) == NO_UPLOAD
        assert outcome(lambda: s3.upload_part(Bucket=BUCKET, Key="held-complete", UploadId=uid,
                                              PartNumber=3, Body=b"late")) == NO_UPLOAD
    finally:
        cm.release()
        t.join(60)
    assert box.get("r") == 200, box
    whole_is(s3, "held-complete", b"".join(parts))
    assert abort(s3, "held-complete", uid) == NO_UPLOAD
    # Complete against an Abort's mark
    uid, listed = upload(s3, "held-abort", bodies(1))
    am.hold()
    t, box = in_thread(lambda: abort(s3, "held-abort", uid))
    try:
        am.wait_reached()
        assert complete(s3, "held-abort", uid, listed) == NO_UPLOAD
    finally:
        am.release()
        t.join(60)
    assert box.get("r") == 204, box
    absent(s3, "held-abort", uid)
    # a part uploaded again while a Complete holds its listing
    old, new = ch.body(31, 300 << 10), ch.body(32, 200 << 10)
    uid, listed = upload(s3, "overwritten", [old])
    cl.hold()
    t, box = in_thread(lambda: complete(s3, "overwritten", uid, listed))
    try:
        cl.wait_reached()
        e = s3.upload_part(Bucket=BUCKET, Key="overwritten", UploadId=uid, PartNumber=1,
                           Body=new)
    finally:
        cl.release()
        t.join(60)
    assert box.get("r") == (400, "InvalidPart"), box
    assert outcome(lambda: s3.head_object(Bucket=BUCKET, Key="overwritten")) == (404, "404")
    assert complete(s3, "overwritten", uid, [{"PartNumber": 1, "ETag": e["ETag"]}]) == 200
    whole_is(s3, "overwritten", new)


def raced(s3):
    keys = [f"pair-{i:02d}" for i in range(PAIRS)]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        ups = list(ex.map(lambda i: upload(s3, keys[i], bodies(i)), range(PAIRS)))

    def pair(i):
        uid, listed = ups[i]
        go = threading.Barrier(2)
        res = {}

        def side(name, fn):
            go.wait()
            res[name] = fn()
        a = threading.Thread(target=side, args=("abort", lambda: abort(s3, keys[i], uid)))
        a.start()
        side("complete", lambda: complete(s3, keys[i], uid, listed))
        a.join(120)
        return res
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        results = list(ex.map(pair, range(PAIRS)))
    done = []
    for i, r in enumerate(results):
        uid = ups[i][0]
        if r["complete"] == 200:
            assert r["abort"] in (204, NO_UPLOAD), (keys[i], r)
            whole_is(s3, keys[i], b"".join(bodies(i)))
            done.append(keys[i])
        else:
            assert (r["complete"], r["abort"]) == (NO_UPLOAD, 204), (keys[i], r)
            absent(s3, keys[i], uid)
    left = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    assert not left, left
    print(f"  {len(done)} completed, {PAIRS - len(done)} aborted", flush=True)


def delete_all(s3):
    for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        s3.delete_object(Bucket=BUCKET, Key=o["Key"])


def cells(drives):
    n = 0
    for d in drives:
        for _, _, files in os.walk(os.path.join(d, "data")):
            n += sum(1 for f in files if CELL.match(f))
    return n


def pauses_in(d):
    return {p: Pause(d, p) for p in ("complete-marked", "abort-marked", "complete-listed")}


def test_single_node():
    d = tempfile.mkdtemp(prefix="zest-mpurace-")
    pauses = pauses_in(d)
    saved = dict(os.environ)
    os.environ["ZEST_FAULTS"] = ",".join(p.env() for p in pauses.values())
    try:
        with zh.cluster() as c:
            os.environ.clear()
            os.environ.update(saved)
            s3 = client(c.endpoint)
            s3.create_bucket(Bucket=BUCKET)
            deterministic(s3, pauses)
            raced(s3)
            delete_all(s3)
            ch.wait_for("every cell file gone", lambda: cells(c.drives) == 0, 60)
            p = subprocess.run([DN_CLIENT, "--target", f"127.0.0.1:{c.dn_port}",
                                *c.client_args(), "ls", RESERVED, ""],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stdout + p.stderr
            left = [ln for ln in p.stdout.splitlines() if ln.startswith("key ")]
            assert not left, left
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(d, ignore_errors=True)


def test_cluster():
    d = tempfile.mkdtemp(prefix="zest-mpurace-")
    pauses = pauses_in(d)
    env = dict(os.environ, ZEST_FAULTS=",".join(p.env() for p in pauses.values()))
    try:
        cluster_run(pauses, env)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def cluster_run(pauses, env):
    with ch.cluster(nodes=3, ec="2+1", cell_size=65536, gc_grace="4s", env=env) as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket=BUCKET)
        deterministic(s3, pauses)
        raced(s3)
        delete_all(s3)
        drives = [dr for n in c.nodes.values() for dr in n.drives]
        ch.wait_for("every cell file gone", lambda: cells(drives) == 0, 30, step=0.5)
        assert not c.etcd.keys(f"/zest/objects/{RESERVED}/"), c.etcd.keys("/zest/objects/")
        assert not c.etcd.keys(f"/zest/objects/{BUCKET}/")
        assert not c.etcd.keys("/zest/moved/")


if __name__ == "__main__":
    zh.require_faults()
    ch.run([test_single_node, test_cluster])
