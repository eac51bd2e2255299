#!/usr/bin/env python3
"""CopyObject, UploadPartCopy and conditional writes through zest-s3gw into zest-datanode,
driven by boto3 and awscli.

copy_object with MetadataDirective COPY and REPLACE, onto itself, CopySourceIf* (412) and the
target's IfNoneMatch; a copy on one datanode moves no payload bytes to it (server-side
compose), a copy between two datanodes streams through the gateway with exactly the copied
bytes arriving; upload_part_copy with CopySourceRange; put_object and
complete_multipart_upload with IfNoneMatch='*' / IfMatch, two concurrent IfNoneMatch='*' PUTs
of one key (one 200, one 412); `aws s3 cp s3://... s3://...` (CopyObject, and UploadPartCopy
above awscli's 8 MiB threshold). Byte equality throughout.

Exits 77 (skip) when the datanode binary is not built.
"""
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402


def client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


def error_of(fn, *args, **kw):
    """(HTTP status, S3 code) of a call that must fail."""
    try:
        fn(*args, **kw)
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]
    raise AssertionError(f"{fn.__name__} {kw} succeeded")


def body(s3, bucket, key):
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def received(port):
    return zh.metric_sum(zh.metrics(port), "zest_payload_received_bytes_total")


def test_copy_object():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket="src")
        s3.create_bucket(Bucket="dst")
        data = os.urandom((8 << 20) + 17)
        put = s3.put_object(Bucket="src", Key="dir/a b+c", Body=data, ContentType="text/x-src",
                            Metadata={"color": "blue"})
        etag = put["ETag"]
        before = received(c.dn_metrics)
        r = s3.copy_object(Bucket="dst", Key="copy", CopySource={"Bucket": "src",
                                                                 "Key": "dir/a b+c"})
        assert r["CopyObjectResult"]["ETag"] == etag, r
        assert received(c.dn_metrics) == before, "a copy on one datanode sent it payload"
        h = s3.head_object(Bucket="dst", Key="copy")
        assert h["ETag"] == etag and h["ContentType"] == "text/x-src", h
        assert h["Metadata"] == {"color": "blue"}, h["Metadata"]
        assert body(s3, "dst", "copy") == data
        assert body(s3, "src", "dir/a b+c") == data  # the source stays
        # REPLACE takes the request's metadata
        s3.copy_object(Bucket="dst", Key="replaced", CopySource="src/dir/a b+c",  # botocore encodes it
                       MetadataDirective="REPLACE", ContentType="text/x-new",
                       Metadata={"shape": "round"})
        h = s3.head_object(Bucket="dst", Key="replaced")
        assert h["ContentType"] == "text/x-new" and h["Metadata"] == {"shape": "round"}, h
        assert h["ETag"] == etag
        # onto itself: only with REPLACE
        assert error_of(s3.copy_object, Bucket="dst", Key="copy",
                        CopySource={"Bucket": "dst", "Key": "copy"}) == (400, "InvalidRequest")
        s3.copy_object(Bucket="dst", Key="copy", CopySource={"Bucket": "dst", "Key": "copy"},
                       MetadataDirective="REPLACE", Metadata={"v": "2"})
        h = s3.head_object(Bucket="dst", Key="copy")
        assert h["Metadata"] == {"v": "2"} and h["ETag"] == etag
        assert body(s3, "dst", "copy") == data
        # the source's conditions
        src = {"Bucket": "src", "Key": "dir/a b+c"}
        past = datetime(2001, 1, 1, tzinfo=timezone.utc)
        future = datetime.now(timezone.utc) + timedelta(days=1)
        for kw in ({"CopySourceIfMatch": '"0000"'}, {"CopySourceIfNoneMatch": etag},
                   {"CopySourceIfUnmodifiedSince": past},
                   {"CopySourceIfModifiedSince": future}):
            assert error_of(s3.copy_object, Bucket="dst", Key="cond", CopySource=src,
                            **kw) == (412, "PreconditionFailed"), kw
        assert error_of(s3.head_object, Bucket="dst", Key="cond")[0] == 404
        s3.copy_object(Bucket="dst", Key="cond", CopySource=src, CopySourceIfMatch=etag,
                       CopySourceIfUnmodifiedSince=past)  # If-Match that holds wins
        s3.copy_object(Bucket="dst", Key="cond2", CopySource=src, CopySourceIfNoneMatch='"x"',
                       CopySourceIfModifiedSince=past)
        # the target's condition, and sources that are not there
        assert error_of(s3.copy_object, Bucket="dst", Key="cond", CopySource=src,
                        IfNoneMatch="*") == (412, "PreconditionFailed")
        assert error_of(s3.copy_object, Bucket="dst", Key="x",
                        CopySource={"Bucket": "src", "Key": "none"}) == (404, "NoSuchKey")
        assert error_of(s3.copy_object, Bucket="dst", Key="x",
                        CopySource={"Bucket": "nobucket", "Key": "k"}) == (404, "NoSuchBucket")
        assert error_of(s3.copy_object, Bucket="nobucket", Key="x",
                        CopySource=src) == (404, "NoSuchBucket")


def test_upload_part_copy():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket="parts")
        big = os.urandom(12 << 20)
        small = os.urandom(1000)
        s3.put_object(Bucket="parts", Key="big", Body=big)
        small_etag = s3.put_object(Bucket="parts", Key="small", Body=small)["ETag"]
        uid = s3.create_multipart_upload(Bucket="parts", Key="joined")["UploadId"]
        lo, hi = 3 << 20, (9 << 20) - 1
        p1 = s3.upload_part_copy(Bucket="parts", Key="joined", UploadId=uid, PartNumber=1,
                                 CopySource={"Bucket": "parts", "Key": "big"},
                                 CopySourceRange=f"bytes={lo}-{hi}")
        md5 = '"%s"' % hashlib.md5(big[lo:hi + 1]).hexdigest()
        assert p1["CopyPartResult"]["ETag"] == md5, p1
        before = received(c.dn_metrics)
        p2 = s3.upload_part_copy(Bucket="parts", Key="joined", UploadId=uid, PartNumber=2,
                                 CopySource={"Bucket": "parts", "Key": "small"})
        assert p2["CopyPartResult"]["ETag"] == small_etag
        assert received(c.dn_metrics) == before, "a whole-object part copy sent payload"
        assert error_of(s3.upload_part_copy, Bucket="parts", Key="joined", UploadId=uid,
                        PartNumber=3, CopySource={"Bucket": "parts", "Key": "small"},
                        CopySourceRange="bytes=10-5000") == (400, "InvalidArgument")
        parts = [{"PartNumber": 1, "ETag": md5}, {"PartNumber": 2, "ETag": small_etag}]
        s3.complete_multipart_upload(Bucket="parts", Key="joined", UploadId=uid,
                                     MultipartUpload={"Parts": parts})
        assert body(s3, "parts", "joined") == big[lo:hi + 1] + small
        # a multipart source keeps its multipart ETag when copied whole
        mp_etag = s3.head_object(Bucket="parts", Key="joined")["ETag"]
        r = s3.copy_object(Bucket="parts", Key="joined-copy",
                           CopySource={"Bucket": "parts", "Key": "joined"})
        assert r["CopyObjectResult"]["ETag"] == mp_etag and mp_etag.endswith('-2"'), r
        assert body(s3, "parts", "joined-copy") == big[lo:hi + 1] + small


def test_conditional_writes():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket="cond")
        e1 = s3.put_object(Bucket="cond", Key="k", Body=b"first", IfNoneMatch="*")["ETag"]
        assert error_of(s3.put_object, Bucket="cond", Key="k", Body=b"second",
                        IfNoneMatch="*") == (412, "PreconditionFailed")
        assert error_of(s3.put_object, Bucket="cond", Key="k", Body=b"second",
                        IfNoneMatch=e1) == (412, "PreconditionFailed")  # its ETag
        assert error_of(s3.put_object, Bucket="cond", Key="k", Body=b"second",
                        IfMatch='"00000000000000000000000000000000"') == (412,
                                                                          "PreconditionFailed")
        assert body(s3, "cond", "k") == b"first"
        s3.put_object(Bucket="cond", Key="k", Body=b"second", IfMatch=e1)
        assert body(s3, "cond", "k") == b"second"
        assert error_of(s3.put_object, Bucket="cond", Key="none", Body=b"x",
                        IfMatch=e1) == (404, "NoSuchKey")
        # two at once, each with its own connection: exactly one creates the key
        clients = [client(c.endpoint) for _ in range(2)]

        def put(i, key):
            try:
                clients[i].put_object(Bucket="cond", Key=key, Body=b"%d" % i, IfNoneMatch="*")
                return 200
            except ClientError as e:
                return e.response["ResponseMetadata"]["HTTPStatusCode"]
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            for n in range(20):
                got = sorted(ex.map(put, [0, 1], [f"race{n}"] * 2))
                assert got == [200, 412], (n, got)
        # CompleteMultipartUpload: refused on an existing key, the upload stays
        part = os.urandom(1 << 20)
        uid = s3.create_multipart_upload(Bucket="cond", Key="k")["UploadId"]
        pe = s3.upload_part(Bucket="cond", Key="k", UploadId=uid, PartNumber=1,
                            Body=part)["ETag"]
        mpu = {"Parts": [{"PartNumber": 1, "ETag": pe}]}
        assert error_of(s3.complete_multipart_upload, Bucket="cond", Key="k", UploadId=uid,
                        MultipartUpload=mpu, IfNoneMatch="*") == (412, "PreconditionFailed")
        assert body(s3, "cond", "k") == b"second"
        e2 = s3.head_object(Bucket="cond", Key="k")["ETag"]
        s3.complete_multipart_upload(Bucket="cond", Key="k", UploadId=uid, MultipartUpload=mpu,
                                     IfMatch=e2)
        assert body(s3, "cond", "k") == part


def test_two_datanodes():
    """Copies between keys on different datanodes stream through the gateway: the datanodes
    receive exactly the bytes of those copies, and none for the others."""
    a = zh.Cluster(gateway=False)
    b = zh.Cluster(gateway=False)
    gws = []
    ok = False
    try:
        def gateway(nodes, name):
            url, d = zh.gateway_over(nodes, a.root, name)
            gws.append(d)
            return client(url)
        both = gateway([a, b], "s3gw-both")
        only_a = gateway([a], "s3gw-a")
        both.create_bucket(Bucket="two")
        n = 12
        # every 4th over the gateway's 8 MiB GET queue bound: backpressure on both streams
        data = [os.urandom((9 << 20 if i % 4 == 0 else 1 << 20) + 1000 * i) for i in range(n)]
        for i in range(n):
            both.put_object(Bucket="two", Key=f"s{i}", Body=data[i])
        on_a = {o["Key"] for o in only_a.list_objects_v2(Bucket="two").get("Contents", [])}
        before = received(a.dn_metrics) + received(b.dn_metrics)
        crossed = 0
        for i in range(n):
            r = both.copy_object(Bucket="two", Key=f"d{i}", CopySource=f"two/s{i}")
            assert r["CopyObjectResult"]["ETag"] == '"%s"' % hashlib.md5(data[i]).hexdigest()
        on_a = {o["Key"] for o in only_a.list_objects_v2(Bucket="two").get("Contents", [])}
        for i in range(n):
            if (f"s{i}" in on_a) != (f"d{i}" in on_a):
                crossed += len(data[i])
            assert body(both, "two", f"d{i}") == data[i]
        after = received(a.dn_metrics) + received(b.dn_metrics)
        assert crossed > 0, "no copy crossed datanodes: placement changed?"
        assert after - before == crossed, (after - before, crossed)
        ok = True
    finally:
        rcs = [(g.argv[0], g.stop()) for g in gws] + a.stop() + b.stop()
        if not ok:
            a.dump_logs()
            b.dump_logs()
            for g in gws:
                with open(g.log_path, "rb") as f:
                    sys.stderr.write(f.read()[-4000:].decode(errors="replace"))
        shutil.rmtree(a.root, ignore_errors=True)
        shutil.rmtree(b.root, ignore_errors=True)
    bad = [x for x in rcs if x[1] != 0]
    assert not bad, f"daemons exited non-zero: {bad}"


def test_awscli_copy():
    if not (shutil.which("aws") and subprocess.run(["aws", "--version"],
                                                   capture_output=True).returncode == 0):
        print("    skipped: awscli not installed", flush=True)
        return
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        env = c.s3_env()
        aws = ["aws", "--endpoint-url", c.endpoint, "s3"]
        s3.create_bucket(Bucket="cli-a")
        s3.create_bucket(Bucket="cli-b")
        small, big = os.urandom(100000), os.urandom(20 << 20)
        s3.put_object(Bucket="cli-a", Key="small", Body=small)
        s3.put_object(Bucket="cli-a", Key="big", Body=big)
        for key in ("small", "big"):  # big: above awscli's 8 MiB threshold, UploadPartCopy
            p = subprocess.run(aws + ["cp", f"s3://cli-a/{key}", f"s3://cli-b/{key}"], env=env,
                               capture_output=True, timeout=300)
            assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
        assert body(s3, "cli-b", "small") == small
        assert body(s3, "cli-b", "big") == big


if __name__ == "__main__":
    if not os.path.exists(zh.DATANODE):
        print(f"skip: {zh.DATANODE} not built")
        sys.exit(77)
    zh.run_tests([test_copy_object, test_upload_part_copy, test_conditional_writes,
                  test_two_datanodes, test_awscli_copy])
