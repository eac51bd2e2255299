#!/usr/bin/env python3
"""etcd away under the gateway --cluster (docs/operations.md, "etcd's deadline"): three
datanodes RS(2,1), a three-member etcd.

- Quorum lost (two members SIGKILLed, the third up without a leader) and, separately, every
  member hung (SIGSTOP): every S3 operation (PUT, GET, HEAD, ListObjects v1 and v2, DELETE,
  multipart create, upload part, complete, bucket create, head, delete, list) answers
  503 SlowDown with an S3 XML error, and answers at all (a client timeout far above the
  deadline is the hang check; no elapsed time is asserted).
- One deadline per request: zest_s3_etcd_unanswered_total grows by one for each request the
  gateway itself sends to etcd (not for PUT and UploadPart, whose etcd call is the
  coordinator datanode's), never by more: a request's later etcd calls are not made once
  its deadline passed.
- etcd back: the same operations succeed again.

Exits 77 without etcd or without the gateway's --cluster.
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

BUCKET = "away"
CLIENT_TIMEOUT = 30  # the hang check: far above the 5 s deadline


def client(c):
    """No retry at all (botocore's standard mode would resend a 503): one request each."""
    import boto3
    from botocore.config import Config
    import zest_harness as zh
    return boto3.client(
        "s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, read_timeout=CLIENT_TIMEOUT,
                      connect_timeout=5, retries={"total_max_attempts": 1}))


def setup(s3):
    """A bucket with objects, an empty bucket, an upload with one part: the objects of the
    operations below."""
    s3.create_bucket(Bucket=BUCKET)
    s3.create_bucket(Bucket="away-empty")
    for i in range(3):
        s3.put_object(Bucket=BUCKET, Key=f"o{i}", Body=ch.body(f"o{i}", 200_000))
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="mp")["UploadId"]
    etag = s3.upload_part(Bucket=BUCKET, Key="mp", UploadId=up, PartNumber=1,
                          Body=b"p" * 1000)["ETag"]
    return up, etag


# (name, the gateway sends it to etcd itself, call)
def operations(s3, up, etag):
    return [
        ("PutObject", False, lambda: s3.put_object(Bucket=BUCKET, Key="new", Body=b"x" * 999)),
        ("GetObject", True, lambda: s3.get_object(Bucket=BUCKET, Key="o0")["Body"].read()),
        ("GetObject(absent)", True,
         lambda: s3.get_object(Bucket=BUCKET, Key="nope")["Body"].read()),
        ("HeadObject", True, lambda: s3.head_object(Bucket=BUCKET, Key="o1")),
        ("ListObjects", True, lambda: s3.list_objects(Bucket=BUCKET)),
        ("ListObjectsV2", True, lambda: s3.list_objects_v2(Bucket=BUCKET)),
        ("DeleteObject", True, lambda: s3.delete_object(Bucket=BUCKET, Key="o2")),
        ("CreateMultipartUpload", True,
         lambda: s3.create_multipart_upload(Bucket=BUCKET, Key="mp2")),
        ("UploadPart", None,
         lambda: s3.upload_part(Bucket=BUCKET, Key="mp", UploadId=up, PartNumber=2,
                                Body=b"q" * 1000)),
        ("CompleteMultipartUpload", True,
         lambda: s3.complete_multipart_upload(
             Bucket=BUCKET, Key="mp", UploadId=up,
             MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})),
        ("CreateBucket", True, lambda: s3.create_bucket(Bucket="away-new")),
        ("HeadBucket", True, lambda: s3.head_bucket(Bucket=BUCKET)),
        ("DeleteBucket", True, lambda: s3.delete_bucket(Bucket="away-empty")),
        ("ListBuckets", True, lambda: s3.list_buckets()),
    ]


def unanswered(c):
    return c.gw_metrics_now().get("zest_s3_etcd_unanswered_total", 0)


def check_away(c, s3, up, etag, what):
    """Every operation: 503 SlowDown (HEAD: 503, no body), before the client's timeout;
    the gateway's deadline counted once per request that reached etcd from it."""
    bad = []
    for name, gw_etcd, call in operations(s3, up, etag):
        before = unanswered(c)
        t0 = time.time()
        try:
            call()
            bad.append((name, "succeeded"))
            continue
        except s3.exceptions.ClientError as e:
            code = ch.error_code(e)
        except Exception as e:  # a client timeout: the gateway hung
            code = ch.error_code(e)
        took = time.time() - t0
        grew = unanswered(c) - before
        print(f"     {what}: {name} -> {code} ({took:.1f} s, deadlines {grew:g})", flush=True)
        want = (503, "503") if name.startswith("Head") else (503, "SlowDown")
        if code != want:
            bad.append((name, code))
        # one deadline per request that the gateway sent to etcd, never more; PUT's etcd
        # calls are the coordinator's (its own single deadline: the commit's)
        if gw_etcd is True and grew != 1:
            bad.append((name, f"{grew:g} deadlines"))
        if gw_etcd is False and grew != 0:
            bad.append((name, f"{grew:g} deadlines"))
        if gw_etcd is None and grew > 1:
            bad.append((name, f"{grew:g} deadlines"))
    assert not bad, f"{what}: {bad}"


def check_back(s3, up, etag):
    """etcd answers again: a PUT, GET, listing and the upload's Complete work."""
    for attempt in range(60):
        try:
            s3.put_object(Bucket=BUCKET, Key="back", Body=b"back")
            break
        except Exception:
            time.sleep(1)
    assert s3.get_object(Bucket=BUCKET, Key="back")["Body"].read() == b"back"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert {"o0", "o1", "back"} <= keys, keys
    s3.head_bucket(Bucket=BUCKET)


def test_etcd_quorum_lost_and_hung():
    with ch.cluster(nodes=3, ec="2+1", cell_size=65536, stripes_per_group=2,
                    etcd_members=3) as c:
        s3 = client(c)
        up, etag = setup(s3)

        # quorum lost: two members SIGKILLed, the third up without a leader
        c.etcd.stop_member(0)
        c.etcd.stop_member(1)
        check_away(c, s3, up, etag, "quorum lost")
        c.etcd.start_member(0)
        c.etcd.start_member(1)
        c.etcd.wait_healthy(60)
        check_back(s3, up, etag)

        # every member hung: connections open, nothing answered
        for p in c.etcd.procs:
            os.kill(p.pid, signal.SIGSTOP)
        try:
            check_away(c, s3, up, etag, "etcd hung")
        finally:
            for p in c.etcd.procs:
                os.kill(p.pid, signal.SIGCONT)
        c.etcd.wait_healthy(60)
        check_back(s3, up, etag)


if __name__ == "__main__":
    ch.run([test_etcd_quorum_lost_and_hung])
