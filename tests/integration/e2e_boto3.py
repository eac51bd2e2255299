#!/usr/bin/env python3
"""Drive zest-s3gw with boto3 (whichever boto3 this interpreter has) and check S3 behaviour.

usage: e2e_boto3.py ENDPOINT ACCESS SECRET [--tls]
Byte equality of PUT/GET (small, streamed, multipart), flexible checksums, listings with
paging, multi-delete, and the errors of bad input. Exits non-zero on the first failure.
"""
import hashlib
import io
import os
import sys

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint, ak, sk = sys.argv[1:4]
tls = "--tls" in sys.argv
ver = tuple(int(x) for x in boto3.__version__.split(".")[:2])
cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
             signature_version="s3v4")
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                  region_name="us-east-1", config=cfg, verify=False)
bucket = "e2e-" + boto3.__version__.replace(".", "-")
tag = "boto3 %s%s" % (boto3.__version__, " tls" if tls else "")


def check(cond, what):
    if not cond:
        print("FAIL [%s]: %s" % (tag, what))
        sys.exit(1)


def error_code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


s3.create_bucket(Bucket=bucket)
# us-east-1 (the gateway's default region) answers 200 to re-creating one's own bucket
check(error_code(s3.create_bucket, Bucket=bucket) == (None, 200), "re-create")
s3.head_bucket(Bucket=bucket)
loc = s3.get_bucket_location(Bucket=bucket)
check(loc.get("LocationConstraint") in (None, ""), "location %r" % loc)
check(any(b["Name"] == bucket for b in s3.list_buckets()["Buckets"]), "list_buckets")

# small objects with awkward keys round-trip
keys = ["plain", "dir/sub/x.txt", "a(b) c", "plus+sign", "pct%41", "uni-é€", "sp ace/ end"]
for k in keys:
    body = ("content of %s" % k).encode()
    r = s3.put_object(Bucket=bucket, Key=k, Body=body, ContentType="text/plain",
                      Metadata={"color": "blue"})
    check(r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest(), "etag " + k)
    g = s3.get_object(Bucket=bucket, Key=k)
    check(g["Body"].read() == body, "get " + k)
    check(g["Metadata"].get("color") == "blue", "metadata " + k)
    check(g["ContentType"] == "text/plain", "content-type " + k)

# larger single PUT (streamed), range GET
big = os.urandom(3 * 1024 * 1024 + 17)
s3.put_object(Bucket=bucket, Key="big.bin", Body=big)
check(s3.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == big, "big get")
r = s3.get_object(Bucket=bucket, Key="big.bin", Range="bytes=100-199")
check(r["Body"].read() == big[100:200], "range")
check(s3.head_object(Bucket=bucket, Key="big.bin")["ContentLength"] == len(big), "head")

# explicit checksums (CRC32 always; others where this botocore has them)
for alg in ["CRC32", "SHA1", "SHA256"] + (["CRC32C"] if False else []):
    r = s3.put_object(Bucket=bucket, Key="ck-" + alg, Body=b"checksummed " + alg.encode(),
                      ChecksumAlgorithm=alg)
    check(("Checksum" + alg) in r, "response checksum " + alg)

# multipart via the transfer manager: 12 MiB in 5 MiB parts
from boto3.s3.transfer import TransferConfig
mp = os.urandom(12 * 1024 * 1024 + 5)
tc = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
s3.upload_fileobj(io.BytesIO(mp), bucket, "multi.bin", Config=tc)
out = io.BytesIO()
s3.download_fileobj(bucket, "multi.bin", out, Config=tc)
check(out.getvalue() == mp, "multipart round trip")
check(s3.head_object(Bucket=bucket, Key="multi.bin")["ETag"].endswith('-3"'), "multipart etag")

# multipart by hand with a checksum algorithm, list parts, abort another
u = s3.create_multipart_upload(Bucket=bucket, Key="mpu-ck", ChecksumAlgorithm="CRC32")
p1 = s3.upload_part(Bucket=bucket, Key="mpu-ck", UploadId=u["UploadId"], PartNumber=1,
                    Body=b"a" * (5 * 1024 * 1024), ChecksumAlgorithm="CRC32")
p2 = s3.upload_part(Bucket=bucket, Key="mpu-ck", UploadId=u["UploadId"], PartNumber=2,
                    Body=b"b" * 10, ChecksumAlgorithm="CRC32")
lp = s3.list_parts(Bucket=bucket, Key="mpu-ck", UploadId=u["UploadId"])
check([p["PartNumber"] for p in lp["Parts"]] == [1, 2], "list parts")
ups = s3.list_multipart_uploads(Bucket=bucket)
check(any(x["UploadId"] == u["UploadId"] for x in ups.get("Uploads", [])), "list uploads")
c = s3.complete_multipart_upload(
    Bucket=bucket, Key="mpu-ck", UploadId=u["UploadId"],
    MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": p1["ETag"], "ChecksumCRC32": p1["ChecksumCRC32"]},
        {"PartNumber": 2, "ETag": p2["ETag"], "ChecksumCRC32": p2["ChecksumCRC32"]}]})
check(c["Bucket"] == bucket and c["Key"] == "mpu-ck" and c["ETag"].endswith('-2"'), "complete")
check(s3.get_object(Bucket=bucket, Key="mpu-ck")["Body"].read() ==
      b"a" * (5 * 1024 * 1024) + b"b" * 10, "mpu content")
extra = [s3.create_multipart_upload(Bucket=bucket, Key="pending/%d" % i)["UploadId"] for i in range(5)]
seen = []
for page in s3.get_paginator("list_multipart_uploads").paginate(
        Bucket=bucket, Prefix="pending/", PaginationConfig={"PageSize": 2}):
    seen += [(x["Key"], x["UploadId"]) for x in page.get("Uploads", [])]
check(sorted(k for k, _ in seen) == ["pending/%d" % i for i in range(5)], "uploads paging %r" % seen)
for i, uid in enumerate(extra):
    s3.abort_multipart_upload(Bucket=bucket, Key="pending/%d" % i, UploadId=uid)
u2 = s3.create_multipart_upload(Bucket=bucket, Key="gone")
s3.abort_multipart_upload(Bucket=bucket, Key="gone", UploadId=u2["UploadId"])
check(error_code(s3.list_parts, Bucket=bucket, Key="gone", UploadId=u2["UploadId"])[0] ==
      "NoSuchUpload", "aborted")

# listing: paging, delimiter, url encoding handled by the client, v1 too
for i in range(120):
    s3.put_object(Bucket=bucket, Key="page/%04d" % i, Body=b"x")
pg = s3.get_paginator("list_objects_v2")
got = [o["Key"] for page in pg.paginate(Bucket=bucket, Prefix="page/", PaginationConfig={"PageSize": 50})
       for o in page.get("Contents", [])]
check(got == ["page/%04d" % i for i in range(120)], "v2 paging")
got1 = [o["Key"] for page in s3.get_paginator("list_objects").paginate(
    Bucket=bucket, Prefix="page/", PaginationConfig={"PageSize": 50}) for o in page.get("Contents", [])]
check(got1 == got, "v1 paging")
r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
check({p["Prefix"] for p in r.get("CommonPrefixes", [])} == {"dir/", "page/", "sp ace/"},
      "common prefixes %r" % r.get("CommonPrefixes"))
all_keys = [o["Key"] for page in pg.paginate(Bucket=bucket) for o in page.get("Contents", [])]
check(set(keys) <= set(all_keys), "awkward keys listed: %r" % sorted(set(keys) - set(all_keys)))

# errors
check(error_code(s3.get_object, Bucket=bucket, Key="nope") == ("NoSuchKey", 404), "NoSuchKey")
check(error_code(s3.get_object, Bucket="no-such-bkt", Key="x")[0] == "NoSuchBucket", "NoSuchBucket")
check(error_code(s3.put_object, Bucket=bucket, Key="k" * 1025, Body=b"x")[0] == "KeyTooLongError",
      "KeyTooLong")
check(error_code(s3.delete_bucket, Bucket=bucket)[0] == "BucketNotEmpty", "BucketNotEmpty")
check(error_code(s3.get_object, Bucket=bucket, Key="big.bin", Range="bytes=99999999-")[0] ==
      "InvalidRange", "InvalidRange")
bad = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key="wrong",
                   region_name="us-east-1", config=cfg, verify=False)
check(error_code(bad.list_objects_v2, Bucket=bucket)[0] == "SignatureDoesNotMatch", "bad sig")
check(error_code(bad.put_object, Bucket=bucket, Key="badsig", Body=b"x" * 1000)[0] ==
      "SignatureDoesNotMatch", "bad sig put")
check(error_code(s3.head_object, Bucket=bucket, Key="badsig")[1] == 404, "nothing stored")

# presigned GET
import urllib.request, ssl
url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "a(b) c"}, ExpiresIn=60)
ctx = ssl._create_unverified_context() if tls else None
check(urllib.request.urlopen(url, context=ctx).read() == b"content of a(b) c", "presigned")

# multi-delete everything, then the bucket
while True:
    objs = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    if not objs:
        break
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": o["Key"]} for o in objs]})
    check(len(r.get("Deleted", [])) == len(objs), "multi-delete")
r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "x"}], "Quiet": True})
check(not r.get("Deleted"), "quiet")
s3.delete_bucket(Bucket=bucket)
print("OK [%s]" % tag)
