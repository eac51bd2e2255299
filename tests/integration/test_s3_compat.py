#!/usr/bin/env python3
"""The smaller S3 behaviours, through real clients against the real stack (zest-datanode
behind zest-s3gw, started by zest_harness), each as AWS answers it:

- CreateBucket of a bucket one owns: 200 in us-east-1, 409 BucketAlreadyOwnedByYou in
  another region (a gateway started with --region eu-west-1);
- ListBuckets pages (max-buckets, continuation-token) and filters (prefix,
  bucket-region), through boto3 of this interpreter, Debian's boto3 and awscli;
- ListObjectsV2 echoes an empty continuation-token; a prefix holding a newline
  round-trips through ListObjects v1 and v2 with encoding-type=url;
- Content-Encoding stored without aws-chunked, spacing kept;
- user metadata at most 2 KiB, one byte more 400 MetadataTooLarge (s3_meta_limit.py);
- a path that is not UTF-8 is 400 InvalidURI;
- CORS preflight (OPTIONS, unsigned) without a CORS configuration: 400 / 403 as S3;
- multipart parts are not keys of the client's bucket: with uploads open every listing
  (any prefix, start-after, marker, page size, delimiter) is exactly the client's keys,
  and keys shaped like part names (U+10FFFF "zest-mpu/...", "p/<upload-id>/...") are
  ordinary keys; DeleteBucket takes open uploads with it; on one datanode and on two
  behind one gateway (merged listings).

A client that is not installed is skipped and named. Exits 77 (skip) when the datanode
binary is not built.
"""
import atexit
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3_meta_limit  # noqa: E402
import zest_harness as zh  # noqa: E402

SKIPPED = []
DN_CLIENT = os.environ.get("ZEST_DN_CLIENT",
                           os.path.join(zh.BUILD, "tests", "integration", "dn_client"))
PART_PREFIX = "\U0010FFFFzest-mpu/"


def client(endpoint, region="us-east-1"):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name=region,
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


def err_code(fn, *a, **kw):
    from botocore.exceptions import ClientError
    try:
        fn(*a, **kw)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


def curl(c, *args, signed=True):
    sig = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
           f"{zh.ACCESS_KEY}:{zh.SECRET_KEY}", "-H",
           "x-amz-content-sha256: UNSIGNED-PAYLOAD"] if signed else []
    out = os.path.join(c.root, "curl.body")
    p = subprocess.run(["curl", "-s", "-o", out, "-w", "%{http_code}", *sig, *args],
                       capture_output=True, timeout=60)
    with open(out, "rb") as f:
        return int(p.stdout.decode() or 0), f.read()


def test_create_bucket_again():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket="again")
        assert err_code(s3.create_bucket, Bucket="again") == (None, 200)
    with zh.cluster(extra_gw=["--region", "eu-west-1"]) as c:
        s3 = client(c.endpoint, "eu-west-1")
        loc = {"LocationConstraint": "eu-west-1"}
        s3.create_bucket(Bucket="again", CreateBucketConfiguration=loc)
        got = err_code(s3.create_bucket, Bucket="again", CreateBucketConfiguration=loc)
        assert got == ("BucketAlreadyOwnedByYou", 409), got
        r = s3.list_buckets(MaxBuckets=10)
        assert [b.get("BucketRegion") for b in r["Buckets"]] == ["eu-west-1"], r["Buckets"]


def test_list_buckets_pages():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        names = [f"cmp-{i}" for i in range(5)]
        for n in names + ["other"]:
            s3.create_bucket(Bucket=n)
        r = s3.list_buckets(MaxBuckets=2, Prefix="cmp-")
        assert [b["Name"] for b in r["Buckets"]] == names[:2], r
        assert r["Prefix"] == "cmp-" and r.get("ContinuationToken"), r
        pages = list(s3.get_paginator("list_buckets").paginate(
            Prefix="cmp-", PaginationConfig={"PageSize": 2}))
        assert [b["Name"] for p in pages for b in p["Buckets"]] == names, pages
        assert len(pages) == 3
        assert s3.list_buckets(BucketRegion="eu-west-1")["Buckets"] == []
        st, _ = curl(c, f"{c.endpoint}/?max-buckets=0")
        assert st == 400, st
        st, _ = curl(c, f"{c.endpoint}/?max-buckets=10001")
        assert st == 400, st
        if subprocess.run(["/usr/bin/python3", "-c", "import boto3"],
                          capture_output=True).returncode == 0:
            p = subprocess.run(["/usr/bin/python3", "-W", "ignore", "-c", (
                "import boto3,sys\n"
                f"s=boto3.client('s3',endpoint_url='{c.endpoint}',aws_access_key_id="
                f"'{zh.ACCESS_KEY}',aws_secret_access_key='{zh.SECRET_KEY}',"
                "region_name='us-east-1')\n"
                "print(' '.join(b['Name'] for b in s.list_buckets()['Buckets']))")],
                capture_output=True, timeout=60)
            assert p.stdout.decode().split() == sorted(names + ["other"]), p
        else:
            SKIPPED.append("/usr/bin/python3-boto3")
        if shutil.which("aws"):
            p = subprocess.run(["aws", "--endpoint-url", c.endpoint, "s3api", "list-buckets",
                                "--prefix", "cmp-", "--page-size", "1", "--output", "json"],
                               env=c.s3_env(), capture_output=True, timeout=120)
            assert p.returncode == 0, p.stderr
            got = [b["Name"] for b in json.loads(p.stdout)["Buckets"]]
            assert got == names, got
        else:
            SKIPPED.append("awscli")


def test_listing_tokens_and_encoding():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket="enc")
        for k in ("a\nb", "a\nc", "b"):
            s3.put_object(Bucket="enc", Key=k, Body=b"x")
        r = s3.list_objects_v2(Bucket="enc", ContinuationToken="")
        assert r.get("ContinuationToken") == "", r
        assert r["KeyCount"] == 3
        r = s3.list_objects_v2(Bucket="enc", Prefix="a\n", StartAfter="a\n")
        assert r["Prefix"] == "a\n" and r["StartAfter"] == "a\n", r
        assert [o["Key"] for o in r["Contents"]] == ["a\nb", "a\nc"]
        # v1: botocore decodes Marker, NextMarker, Delimiter and the keys; it leaves the
        # top-level Prefix as S3 sent it, url-encoded
        r = s3.list_objects(Bucket="enc", Prefix="a\n", Marker="a\n", Delimiter="\n",
                            MaxKeys=1)
        assert r["Prefix"] == "a%0A" and r["Marker"] == "a\n", r
        assert r["Delimiter"] == "\n" and r["NextMarker"] == "a\nb", r
        keys = [o["Key"] for p in s3.get_paginator("list_objects").paginate(
            Bucket="enc", Prefix="a\n", PaginationConfig={"PageSize": 1})
            for o in p.get("Contents", [])]
        assert keys == ["a\nb", "a\nc"], keys


def test_content_encoding_and_uri():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket="cenc")
        s3.put_object(Bucket="cenc", Key="k", Body=b"x", ContentEncoding="deflate, gzip")
        assert s3.head_object(Bucket="cenc", Key="k")["ContentEncoding"] == "deflate, gzip"
        if not shutil.which("curl"):
            SKIPPED.append("curl")
            return
        for sent, want in (("deflate, gzip, aws-chunked", "deflate, gzip"),
                           ("aws-chunked", None)):
            st, _ = curl(c, "-X", "PUT", "--data-binary", "x", "-H",
                         f"Content-Encoding: {sent}", f"{c.endpoint}/cenc/c")
            assert st == 200, st
            got = s3.head_object(Bucket="cenc", Key="c").get("ContentEncoding")
            assert got == want, (sent, got)
        st, body = curl(c, "-X", "PUT", "--data-binary", "x", f"{c.endpoint}/cenc/bad%FF%FE")
        assert st == 400 and b"<Code>InvalidURI</Code>" in body, (st, body)
        assert b"Couldn't parse the specified URI." in body or b"Couldn&apos;t" in body, body
        assert [o["Key"] for o in s3.list_objects_v2(Bucket="cenc")["Contents"]] == ["c", "k"]


def test_user_metadata_limit():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket="meta")
        s3_meta_limit.check(s3, "meta")


def test_cors_preflight():
    if not shutil.which("curl"):
        SKIPPED.append("curl")
        return
    with zh.cluster() as c:
        client(c.endpoint).create_bucket(Bucket="cors")
        st, body = curl(c, "-X", "OPTIONS", f"{c.endpoint}/cors/k", signed=False)
        assert st == 400 and b"<Code>BadRequest</Code>" in body, (st, body)
        assert b"Insufficient information. Origin request header needed." in body
        st, body = curl(c, "-X", "OPTIONS", "-H", "Origin: http://a.example", "-H",
                        "Access-Control-Request-Method: PUT", f"{c.endpoint}/cors/k",
                        signed=False)
        assert st == 403 and b"<Code>AccessForbidden</Code>" in body, (st, body)
        assert b"CORSResponse: CORS is not enabled for this bucket." in body


def check_part_keys_plain(s3, bucket):
    """Uploads with parts open in bucket; the parts are not keys of it (they live in the
    gateway's reserved bucket), so every listing is exactly the client keys, and a client
    key shaped like a part name is stored, listed, read and deleted like any other."""
    from botocore.exceptions import ClientError
    s3.create_bucket(Bucket=bucket)
    up = s3.create_multipart_upload(Bucket=bucket, Key="obj")["UploadId"]
    up2 = s3.create_multipart_upload(Bucket=bucket, Key="zz/other")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="obj", UploadId=up, PartNumber=1,
                        Body=b"part")["ETag"]
    s3.upload_part(Bucket=bucket, Key="zz/other", UploadId=up2, PartNumber=1, Body=b"x")
    keys = sorted(["a", "\U0010FFFFzest-mpu", "\U0010FFFFzest-mpu0", "\U0010FFFFzz",
                   f"{PART_PREFIX}{up}/00001", f"{PART_PREFIX}{up2}/00002", f"p/{up}/00001",
                   f"p/{up2}/00001", "p/x"] + [f"k{i:02d}" for i in range(6)])
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    s3.upload_part_copy(Bucket=bucket, Key="zz/other", UploadId=up2, PartNumber=2,
                        CopySource={"Bucket": bucket, "Key": "a"})

    def v2(**kw):
        return [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, **kw) for o in p.get("Contents", [])]

    def v1(**kw):
        return [o["Key"] for p in s3.get_paginator("list_objects").paginate(
            Bucket=bucket, **kw) for o in p.get("Contents", [])]

    assert v2() == keys, v2()
    assert v1() == keys, v1()
    for size in (1, 3):
        assert v2(PaginationConfig={"PageSize": size}) == keys
        assert v1(PaginationConfig={"PageSize": size}) == keys
    for pfx in (PART_PREFIX, PART_PREFIX + up, "p/", f"p/{up}/", "\U0010FFFF"):
        under = [k for k in keys if k.startswith(pfx)]
        assert v2(Prefix=pfx) == under and v1(Prefix=pfx) == under, pfx
    for mark in (PART_PREFIX, PART_PREFIX + up, "p/", f"p/{up}/00001", "\U0010FFFFzest"):
        after = [k for k in keys if k > mark]
        assert v2(StartAfter=mark) == after, mark
        assert v1(Marker=mark) == after, mark
    r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["p/", PART_PREFIX], r
    assert [o["Key"] for o in r["Contents"]] == [k for k in keys if "/" not in k], r
    # the client's keys are its own: read back, then deleted, the uploads untouched
    for k in keys:
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == k.encode(), k
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"p/{up}/00001"}]})
    assert not r.get("Errors"), r
    s3.delete_object(Bucket=bucket, Key=f"{PART_PREFIX}{up}/00001")
    try:
        s3.head_object(Bucket=bucket, Key=f"{PART_PREFIX}{up}/00001")
        raise AssertionError("deleted key still there")
    except ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 404, e.response
    parts = s3.list_parts(Bucket=bucket, Key="obj", UploadId=up)["Parts"]
    assert [p["PartNumber"] for p in parts] == [1]
    parts = s3.list_parts(Bucket=bucket, Key="zz/other", UploadId=up2)["Parts"]
    assert [p["PartNumber"] for p in parts] == [1, 2]
    s3.complete_multipart_upload(Bucket=bucket, Key="obj", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}]})
    assert s3.get_object(Bucket=bucket, Key="obj")["Body"].read() == b"part"
    keys.remove(f"p/{up}/00001")
    keys.remove(f"{PART_PREFIX}{up}/00001")
    assert v2() == sorted(keys + ["obj"])
    # DeleteBucket: BucketNotEmpty while it holds objects; once they are gone, it goes
    # with its open upload, as in S3
    assert err_code(s3.delete_bucket, Bucket=bucket)[0] == "BucketNotEmpty"
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]] == [up2]
    for k in keys + ["obj"]:
        s3.delete_object(Bucket=bucket, Key=k)
    s3.delete_bucket(Bucket=bucket)
    assert bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.create_bucket(Bucket=bucket)  # the same name again: no upload of the old one
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    assert err_code(s3.list_parts, Bucket=bucket, Key="zz/other", UploadId=up2)[0] == "NoSuchUpload"
    s3.delete_bucket(Bucket=bucket)


def test_part_keys_plain():
    with zh.cluster() as c:
        check_part_keys_plain(client(c.endpoint), "parts")


def test_part_keys_plain_two_datanodes():
    a = zh.Cluster(gateway=False)
    b = zh.Cluster(gateway=False)
    gw = None
    ok = False
    try:
        url, gw = zh.gateway_over([a, b], a.root, "s3gw")
        check_part_keys_plain(client(url), "parts2")
        ok = True
    finally:
        if gw:
            gw.stop()
        for cl in (a, b):
            cl.stop()
            if not ok:
                cl.dump_logs()
            elif not os.environ.get("ZEST_KEEP"):
                shutil.rmtree(cl.root, ignore_errors=True)


def dn(c, *args):
    """dn_client against one Cluster's datanode: (exit code, output)."""
    p = subprocess.run([DN_CLIENT, "--target", f"127.0.0.1:{c.dn_port}", *c.client_args(),
                        *args], capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode() + p.stderr.decode()


def test_bucket_on_one_of_two_datanodes():
    """A bucket that only one of two datanodes holds (the other restarted empty, or a
    create reached one): HEAD finds it and puts it back on the other, CreateBucket is the
    owner's 200, DeleteBucket deletes what is there. The datanodes' NoSuchBucket and
    BucketAlreadyOwnedByYou arrive as zest codes; the merge must recognise them."""
    a = zh.Cluster(gateway=False)
    b = zh.Cluster(gateway=False)
    gw = None
    ok = False
    try:
        url, gw = zh.gateway_over([a, b], a.root, "s3gw")
        s3 = client(url)
        assert dn(a, "mb", "half")[0] == 0
        s3.head_bucket(Bucket="half")
        assert dn(b, "hb", "half")[0] == 0, "HEAD did not put the bucket back on b"
        assert dn(b, "rb", "half")[0] == 0
        assert err_code(s3.create_bucket, Bucket="half") == (None, 200)
        assert dn(b, "hb", "half")[0] == 0, "CreateBucket skipped the node that lacked it"
        for i in range(8):  # keys land on both nodes
            s3.put_object(Bucket="half", Key=f"k{i}", Body=b"x")
        for i in range(8):
            s3.delete_object(Bucket="half", Key=f"k{i}")
        assert dn(a, "rb", "half")[0] == 0
        s3.delete_bucket(Bucket="half")
        assert dn(b, "hb", "half")[0] != 0
        assert err_code(s3.head_bucket, Bucket="half")[1] == 404
        ok = True
    finally:
        if gw:
            gw.stop()
        for cl in (a, b):
            cl.stop()
            if not ok:
                cl.dump_logs()
            elif not os.environ.get("ZEST_KEEP"):
                shutil.rmtree(cl.root, ignore_errors=True)


if __name__ == "__main__":
    if not os.path.exists(zh.DATANODE) or not os.path.exists(zh.GATEWAY):
        print("zest-datanode or zest-s3gw not built: skip")
        sys.exit(77)
    try:
        import boto3  # noqa: F401
    except ImportError:
        print("boto3 not installed: skip")
        sys.exit(77)
    tests = [test_create_bucket_again, test_list_buckets_pages,
             test_listing_tokens_and_encoding, test_content_encoding_and_uri,
             test_cors_preflight, test_user_metadata_limit, test_part_keys_plain,
             test_part_keys_plain_two_datanodes, test_bucket_on_one_of_two_datanodes]
    atexit.register(lambda: SKIPPED and print("skipped clients:", ", ".join(sorted(set(SKIPPED)))))
    zh.run_tests(tests)
