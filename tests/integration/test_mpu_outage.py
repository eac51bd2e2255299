#!/usr/bin/env python3
"""Multipart bookkeeping across a datanode outage (kill -9 and restart).

- ListMultipartUploads while the datanode is down or just restarting answers an error
  (503), never a silently short list: every open upload is listed once it answers 200.
- Two datanodes, the upload's record on one and its parts (with the target object) on the
  other. The node with the parts is killed right after Complete's Compose (the gateway's
  fault point mpu.after-compose, ZEST_FAULTS pause:PATH, holds the request there; a build
  without -Dtest_faults skips these two): Complete answers 200, the part it
  could not delete keeps its upload record, and after the restart a retried Complete or
  an Abort removes it; no part object is left in the reserved bucket (listed on each
  datanode with dn_client) and the object reads back byte-identical.
- Complete with the parts' node down answers an error and leaves the upload whole; the
  same Complete after the restart finishes it.
- Abort with the parts' node down answers 503 and keeps the record; after the restart
  Abort removes parts and record.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402


def client(c):
    return boto3.client("s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"total_max_attempts": 1}, read_timeout=20))


DN_CLIENT = os.environ.get("ZEST_DN_CLIENT",
                           os.path.join(zh.BUILD, "tests", "integration", "dn_client"))
RESERVED = ".zest-mpu"


def dn_keys(node, bucket, prefix=""):
    """Keys of bucket under prefix on one datanode, asked directly (no gateway)."""
    p = subprocess.run([DN_CLIENT, "--target", f"127.0.0.1:{node.dn_port}", *node.client_args(),
                        "ls", bucket, prefix], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return [ln.split(" ")[1] for ln in p.stdout.splitlines() if ln.startswith("key ")]


class TwoNodes:
    """Two datanodes (a, b) behind one gateway, started with extra environment."""

    def __init__(self, env):
        self.a = zh.Cluster(gateway=False)
        self.b = zh.Cluster(gateway=False)
        self.gw = None
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            self.endpoint, self.gw = zh.gateway_over([self.a, self.b], self.a.root, "s3gw")
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def stop(self, ok):
        rcs = [self.gw.stop()] if self.gw else []
        for cl in (self.a, self.b):
            rcs += [rc for _, rc in cl.stop()]
            if not ok:
                cl.dump_logs()
        if not ok:
            with open(os.path.join(self.a.root, "s3gw.log"), "rb") as f:
                sys.stderr.write(f.read()[-4000:].decode(errors="replace"))
        elif not os.environ.get("ZEST_KEEP"):
            for cl in (self.a, self.b):
                shutil.rmtree(cl.root, ignore_errors=True)
        return rcs


def split_upload(t, s3, bucket):
    """An upload whose target (and so its parts) is on t.a and whose record is on t.b."""
    for i in range(64):
        key = f"obj{i}"
        s3.put_object(Bucket=bucket, Key=key, Body=b"probe")
        on_a = key in dn_keys(t.a, bucket, key)
        s3.delete_object(Bucket=bucket, Key=key)
        if on_a:
            break
    else:
        raise AssertionError("no key placed on the first datanode")
    for _ in range(64):
        up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        if dn_keys(t.b, RESERVED, f"u/{bucket}/{up}"):
            return key, up
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=up)
    raise AssertionError("no upload record placed on the second datanode")


def wait_answering(fn, timeout=30):
    deadline = time.time() + timeout
    while True:
        try:
            return fn()
        except Exception:  # noqa: BLE001 (the channel reconnecting: 503 / 500)
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def retry_503(fn, timeout=60):
    """fn() as an S3 client makes it: a 503 (SlowDown while the gateway's channel to the
    restarted datanode is still reconnecting, as its log says) is tried again."""
    from botocore.exceptions import ClientError
    deadline = time.time() + timeout
    while True:
        try:
            return fn()
        except ClientError as e:
            if (e.response["ResponseMetadata"]["HTTPStatusCode"] != 503
                    or time.time() > deadline):
                raise
            time.sleep(0.2)


def parts_left(t, up):
    return dn_keys(t.a, RESERVED, f"p/{up}/") + dn_keys(t.b, RESERVED, f"p/{up}/")


def complete_outage_after_compose(finish):
    """Kill the parts' datanode between Compose and the part deletes, then finish with a
    retried Complete or an Abort."""
    root = tempfile.mkdtemp(prefix="zest-pause-")
    pause = os.path.join(root, "pause")
    t = TwoNodes({"ZEST_FAULTS": f"mpu.after-compose=pause:{pause}"})
    ok = False
    try:
        s3 = client(t)
        s3.create_bucket(Bucket="split")
        key, up = split_upload(t, s3, "split")
        data = [os.urandom(5 << 20), os.urandom(1000), os.urandom(700)]
        etags = [s3.upload_part(Bucket="split", Key=key, UploadId=up, PartNumber=n + 1,
                                Body=d)["ETag"] for n, d in enumerate(data)]
        assert len(dn_keys(t.a, RESERVED, f"p/{up}/")) == 3 and not dn_keys(t.b, RESERVED, "p/")
        # parts 1 and 2 make the object; part 3 is left for the deletes after Compose
        mpu = {"Parts": [{"PartNumber": n + 1, "ETag": etags[n]} for n in range(2)]}
        open(pause, "w").close()
        got = {}

        def run():
            try:
                got["r"] = s3.complete_multipart_upload(Bucket="split", Key=key, UploadId=up,
                                                        MultipartUpload=mpu)
            except Exception as e:  # noqa: BLE001
                got["e"] = e
        th = threading.Thread(target=run)
        th.start()
        deadline = time.time() + 60
        while not os.path.exists(pause + ".reached"):
            assert time.time() < deadline and th.is_alive(), f"Complete never paused: {got}"
            time.sleep(0.01)
        t.a.dn.kill9()  # the node with the object and the parts, right after Compose
        os.remove(pause)
        th.join(60)
        assert "r" in got, f"Complete during the outage: {got}"  # the object is whole: 200
        etag = got["r"]["ETag"]
        t.a.start_datanode()
        # the record is kept (node b) and leads to the leftover part
        ups = wait_answering(lambda: s3.list_multipart_uploads(Bucket="split"))
        assert [u["UploadId"] for u in ups.get("Uploads", [])] == [up], ups
        parts = wait_answering(lambda: s3.list_parts(Bucket="split", Key=key, UploadId=up))
        assert [p["PartNumber"] for p in parts["Parts"]] == [3], parts
        assert len(parts_left(t, up)) == 1
        if finish == "retry":
            r = s3.complete_multipart_upload(Bucket="split", Key=key, UploadId=up,
                                             MultipartUpload=mpu)
            assert r["ETag"] == etag, r
        else:
            s3.abort_multipart_upload(Bucket="split", Key=key, UploadId=up)
        assert parts_left(t, up) == [], parts_left(t, up)
        assert not dn_keys(t.a, RESERVED, f"u/split/") and not dn_keys(t.b, RESERVED, "u/split/")
        assert "Uploads" not in s3.list_multipart_uploads(Bucket="split")
        got = retry_503(lambda: s3.get_object(Bucket="split", Key=key)["Body"].read())
        assert got == data[0] + data[1]
        assert retry_503(lambda: s3.head_object(Bucket="split", Key=key))["ETag"] == etag
        ok = True
    finally:
        rcs = t.stop(ok)
        shutil.rmtree(root, ignore_errors=True)
    assert all(rc == 0 for rc in rcs), rcs


def test_complete_outage_then_retry():
    complete_outage_after_compose("retry")


def test_complete_outage_then_abort():
    complete_outage_after_compose("abort")


def test_complete_outage_before_compose():
    """Complete with the parts' datanode down: an error, the upload whole; after the
    restart the same Complete makes the object and leaves no part or record."""
    t = TwoNodes({})
    ok = False
    try:
        s3 = client(t)
        s3.create_bucket(Bucket="split")
        key, up = split_upload(t, s3, "split")
        data = [os.urandom(5 << 20), os.urandom(333)]
        etags = [s3.upload_part(Bucket="split", Key=key, UploadId=up, PartNumber=n + 1,
                                Body=d)["ETag"] for n, d in enumerate(data)]
        mpu = {"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]}
        t.a.dn.kill9()
        try:
            s3.complete_multipart_upload(Bucket="split", Key=key, UploadId=up,
                                         MultipartUpload=mpu)
            raise AssertionError("Complete answered 200 with the parts' datanode down")
        except s3.exceptions.ClientError as e:
            assert e.response["ResponseMetadata"]["HTTPStatusCode"] in (500, 503), e.response
        assert dn_keys(t.b, RESERVED, f"u/split/{up}")
        t.a.start_datanode()
        parts = wait_answering(lambda: s3.list_parts(Bucket="split", Key=key, UploadId=up))
        assert [p["PartNumber"] for p in parts["Parts"]] == [1, 2], parts
        s3.complete_multipart_upload(Bucket="split", Key=key, UploadId=up, MultipartUpload=mpu)
        assert parts_left(t, up) == [] and not dn_keys(t.b, RESERVED, "u/split/")
        # The gateway's other channels to the restarted node may still be reconnecting
        # (up to a second): a GET then answers 503 SlowDown, which clients retry.
        got = wait_answering(lambda: s3.get_object(Bucket="split", Key=key)["Body"].read())
        assert got == data[0] + data[1]
        ok = True
    finally:
        rcs = t.stop(ok)
    assert all(rc == 0 for rc in rcs), rcs


def test_abort_outage():
    """Abort with the parts' datanode down: 503, record kept; after the restart, done."""
    t = TwoNodes({})
    ok = False
    try:
        s3 = client(t)
        s3.create_bucket(Bucket="split")
        key, up = split_upload(t, s3, "split")
        for n in (1, 2):
            s3.upload_part(Bucket="split", Key=key, UploadId=up, PartNumber=n, Body=b"p" * 100)
        t.a.dn.kill9()
        try:
            s3.abort_multipart_upload(Bucket="split", Key=key, UploadId=up)
            raise AssertionError("Abort answered 204 with the parts' datanode down")
        except s3.exceptions.ClientError as e:
            assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.response
        assert dn_keys(t.b, RESERVED, f"u/split/{up}")
        t.a.start_datanode()
        parts = wait_answering(lambda: s3.list_parts(Bucket="split", Key=key, UploadId=up))
        assert [p["PartNumber"] for p in parts["Parts"]] == [1, 2], parts
        s3.abort_multipart_upload(Bucket="split", Key=key, UploadId=up)
        assert parts_left(t, up) == [] and not dn_keys(t.b, RESERVED, "u/split/")
        ok = True
    finally:
        rcs = t.stop(ok)
    assert all(rc == 0 for rc in rcs), rcs


def test_list_uploads_across_restart():
    with zh.cluster() as c:
        s3 = client(c)
        s3.create_bucket(Bucket="outage")
        ids = {}
        for i in range(8):
            key = f"k{i}"
            ids[key] = s3.create_multipart_upload(Bucket="outage", Key=key)["UploadId"]
            s3.upload_part(Bucket="outage", Key=key, UploadId=ids[key], PartNumber=1,
                           Body=b"x" * 1000)
        c.dn.kill9()
        # Calls while it is down put the gateway's channel into reconnect backoff; the
        # first calls after the restart then meet a channel still coming up.
        for _ in range(6):
            try:
                s3.list_multipart_uploads(Bucket="outage")
                raise AssertionError("listed uploads with the datanode down")
            except s3.exceptions.ClientError as e:
                assert e.response["ResponseMetadata"]["HTTPStatusCode"] in (500, 503), e
            time.sleep(0.5)
        c.start_datanode()
        answered = 0
        deadline = time.time() + 60
        while time.time() < deadline and answered < 20:
            try:
                r = s3.list_multipart_uploads(Bucket="outage")
            except s3.exceptions.ClientError as e:
                assert e.response["ResponseMetadata"]["HTTPStatusCode"] in (500, 503), e
                time.sleep(0.05)
                continue
            got = {u["Key"]: u["UploadId"] for u in r.get("Uploads", [])}
            assert got == ids, f"listed {sorted(got)} of {sorted(ids)}"
            answered += 1
        assert answered == 20


if __name__ == "__main__":
    tests = [test_list_uploads_across_restart, test_complete_outage_before_compose,
             test_abort_outage]
    if zh.faults_built():
        tests += [test_complete_outage_then_retry, test_complete_outage_then_abort]
    else:
        print("SKIP: test_complete_outage_then_*: no fault points (-Dtest_faults=true)")
    zh.run_tests(tests)
