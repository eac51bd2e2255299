#!/usr/bin/env python3
"""boto3 asks for features zest does not have; each must be refused, nothing stored.

Server-side encryption (SSE-S3, SSE-KMS, SSE-C over HTTP and over TLS), storage classes,
object tags, ACLs, object lock, versioning and version ids, through boto3's own parameters
where it has them and raw headers (an event hook) where it checks values itself. After
every refusal HEAD of the key is 404 (or the bucket does not exist). Also
ListMultipartUploads with a delimiter. Real daemons: the gateway over a datanode.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402

BUCKET = "refuse"
SSEC_KEY = b"k" * 32


def client(url, verify=True):
    cfg = Config(retries={"total_max_attempts": 1}, s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=url, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=cfg, verify=verify)


def refused(fn, status, code, msg=None, **kw):
    try:
        fn(**kw)
    except ClientError as e:
        err, meta = e.response["Error"], e.response["ResponseMetadata"]
        assert meta["HTTPStatusCode"] == status, (kw, meta["HTTPStatusCode"], err)
        assert err["Code"] == code, (kw, err)
        if msg:
            assert msg in err.get("Message", ""), (kw, err)
        return
    raise AssertionError(f"accepted: {fn.__name__} {kw}")


def absent(s3, key):
    refused(s3.head_object, 404, "404", Bucket=BUCKET, Key=key)


def with_header(s3, name, value):
    """Add a raw header to the next requests (boto3 validates StorageClass values)."""
    def add(request, **_):
        request.headers[name] = value
    s3.meta.events.register_first("before-sign.s3.*", add)
    return add


def drop_header(s3, fn):
    s3.meta.events.unregister("before-sign.s3.*", fn)


def test_encryption_http():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket=BUCKET)
        put = s3.put_object
        refused(put, 501, "NotImplemented", Bucket=BUCKET, Key="e", Body=b"x",
                ServerSideEncryption="AES256")
        refused(put, 501, "NotImplemented", Bucket=BUCKET, Key="e", Body=b"x",
                ServerSideEncryption="aws:kms", SSEKMSKeyId="alias/zest")
        ssec = dict(SSECustomerAlgorithm="AES256", SSECustomerKey=SSEC_KEY)
        refused(put, 400, "InvalidRequest", "secure connection", Bucket=BUCKET, Key="e",
                Body=b"x", **ssec)
        refused(s3.create_multipart_upload, 501, "NotImplemented", Bucket=BUCKET, Key="e",
                ServerSideEncryption="AES256")
        refused(s3.create_multipart_upload, 400, "InvalidRequest", Bucket=BUCKET, Key="e",
                **ssec)
        uid = s3.create_multipart_upload(Bucket=BUCKET, Key="m")["UploadId"]
        refused(s3.upload_part, 400, "InvalidRequest", Bucket=BUCKET, Key="m", UploadId=uid,
                PartNumber=1, Body=b"p", **ssec)
        s3.abort_multipart_upload(Bucket=BUCKET, Key="m", UploadId=uid)
        s3.put_object(Bucket=BUCKET, Key="plain", Body=b"plain")
        refused(s3.copy_object, 400, "InvalidRequest", Bucket=BUCKET, Key="e",
                CopySource={"Bucket": BUCKET, "Key": "plain"}, **ssec)
        refused(s3.copy_object, 400, "InvalidRequest", Bucket=BUCKET, Key="e",
                CopySource={"Bucket": BUCKET, "Key": "plain"},
                CopySourceSSECustomerAlgorithm="AES256", CopySourceSSECustomerKey=SSEC_KEY)
        refused(s3.get_object, 400, "InvalidRequest", Bucket=BUCKET, Key="plain", **ssec)
        refused(s3.head_object, 400, "400", Bucket=BUCKET, Key="plain", **ssec)
        absent(s3, "e")
        assert s3.get_object(Bucket=BUCKET, Key="plain")["Body"].read() == b"plain"
        assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


def test_encryption_tls():
    """Over TLS SSE-C is possible in S3, so it is 501 NotImplemented, not InvalidRequest."""
    if not shutil.which("openssl"):
        print("skip: no openssl")
        return
    tmp = tempfile.mkdtemp(prefix="zest-refuse-tls-")
    key, cert = os.path.join(tmp, "key.pem"), os.path.join(tmp, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1"], check=True,
                   capture_output=True)
    try:
        with zh.cluster(extra_gw=["--tls-cert", cert, "--tls-key", key]) as c:
            warnings.simplefilter("ignore")
            s3 = client(f"https://127.0.0.1:{c.gw_port}", verify=False)
            s3.create_bucket(Bucket=BUCKET)
            refused(s3.put_object, 501, "NotImplemented", Bucket=BUCKET, Key="e", Body=b"x",
                    SSECustomerAlgorithm="AES256", SSECustomerKey=SSEC_KEY)
            refused(s3.put_object, 501, "NotImplemented", Bucket=BUCKET, Key="e", Body=b"x",
                    ServerSideEncryption="AES256")
            absent(s3, "e")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_storage_class_acl_tags_lock():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="std", Body=b"x", StorageClass="STANDARD")
        assert "StorageClass" not in s3.head_object(Bucket=BUCKET, Key="std")
        s3.put_object(Bucket=BUCKET, Key="rrs", Body=b"x", StorageClass="REDUCED_REDUNDANCY")
        for sc in ("GLACIER", "DEEP_ARCHIVE", "STANDARD_IA"):
            refused(s3.put_object, 400, "InvalidStorageClass", "not valid", Bucket=BUCKET,
                    Key="sc", Body=b"x", StorageClass=sc)
            refused(s3.create_multipart_upload, 400, "InvalidStorageClass", Bucket=BUCKET,
                    Key="sc", StorageClass=sc)
        h = with_header(s3, "x-amz-storage-class", "FLOPPY_DISK")
        refused(s3.put_object, 400, "InvalidStorageClass", Bucket=BUCKET, Key="sc", Body=b"x")
        drop_header(s3, h)
        absent(s3, "sc")

        s3.put_object(Bucket=BUCKET, Key="priv", Body=b"x", ACL="private")
        s3.put_object(Bucket=BUCKET, Key="bofc", Body=b"x", ACL="bucket-owner-full-control")
        refused(s3.put_object, 400, "AccessControlListNotSupported", Bucket=BUCKET, Key="acl",
                Body=b"x", ACL="public-read")
        refused(s3.put_object, 400, "AccessControlListNotSupported", Bucket=BUCKET, Key="acl",
                Body=b"x", GrantRead='uri="http://acs.amazonaws.com/groups/global/AllUsers"')
        refused(s3.create_multipart_upload, 400, "AccessControlListNotSupported",
                Bucket=BUCKET, Key="acl", ACL="public-read-write")
        absent(s3, "acl")
        refused(s3.create_bucket, 400, "InvalidBucketAclWithObjectOwnership",
                Bucket="public-bucket", ACL="public-read")
        refused(s3.head_bucket, 404, "404", Bucket="public-bucket")

        refused(s3.put_object, 501, "NotImplemented", Bucket=BUCKET, Key="tag", Body=b"x",
                Tagging="project=zest")
        refused(s3.create_multipart_upload, 501, "NotImplemented", Bucket=BUCKET, Key="tag",
                Tagging="a=b")
        absent(s3, "tag")

        import datetime
        until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
        refused(s3.put_object, 400, "InvalidRequest", "Object Lock Configuration",
                Bucket=BUCKET, Key="lock", Body=b"x", ObjectLockMode="COMPLIANCE",
                ObjectLockRetainUntilDate=until)
        refused(s3.put_object, 400, "InvalidRequest", Bucket=BUCKET, Key="lock", Body=b"x",
                ObjectLockLegalHoldStatus="ON")
        absent(s3, "lock")
        refused(s3.create_bucket, 501, "NotImplemented", Bucket="locked-bucket",
                ObjectLockEnabledForBucket=True)
        refused(s3.head_bucket, 404, "404", Bucket="locked-bucket")
        assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


def test_versioning():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        # used to be routed as CreateBucket: it created the bucket
        refused(s3.put_bucket_versioning, 501, "NotImplemented", Bucket="not-yet",
                VersioningConfiguration={"Status": "Enabled"})
        refused(s3.head_bucket, 404, "404", Bucket="not-yet")
        s3.create_bucket(Bucket=BUCKET)
        refused(s3.put_bucket_versioning, 501, "NotImplemented", Bucket=BUCKET,
                VersioningConfiguration={"Status": "Enabled"})
        assert "Status" not in s3.get_bucket_versioning(Bucket=BUCKET)
        refused(s3.put_bucket_tagging, 501, "NotImplemented", Bucket=BUCKET,
                Tagging={"TagSet": [{"Key": "a", "Value": "b"}]})
        refused(s3.delete_bucket_tagging, 501, "NotImplemented", Bucket=BUCKET)
        s3.head_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="v", Body=b"v1")
        assert s3.get_object(Bucket=BUCKET, Key="v", VersionId="null")["Body"].read() == b"v1"
        refused(s3.get_object, 400, "InvalidArgument", "Invalid version id", Bucket=BUCKET,
                Key="v", VersionId="3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY")
        refused(s3.delete_object, 400, "InvalidArgument", Bucket=BUCKET, Key="v",
                VersionId="3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY")
        s3.head_object(Bucket=BUCKET, Key="v")
        s3.delete_object(Bucket=BUCKET, Key="v", VersionId="null")
        absent(s3, "v")


def test_list_uploads_delimiter():
    with zh.cluster() as c:
        s3 = client(c.endpoint)
        s3.create_bucket(Bucket=BUCKET)
        ids = {k: s3.create_multipart_upload(Bucket=BUCKET, Key=k)["UploadId"]
               for k in ("logs/a", "logs/b", "img/x", "top")}
        r = s3.list_multipart_uploads(Bucket=BUCKET, Delimiter="/")
        assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["img/", "logs/"]
        assert [u["Key"] for u in r["Uploads"]] == ["top"]
        r = s3.list_multipart_uploads(Bucket=BUCKET, Delimiter="/", Prefix="logs/")
        assert [u["Key"] for u in r["Uploads"]] == ["logs/a", "logs/b"]
        assert "CommonPrefixes" not in r
        seen, kw = [], {}
        while True:  # one entry a page, prefixes counted once
            r = s3.list_multipart_uploads(Bucket=BUCKET, Delimiter="/", MaxUploads=1, **kw)
            seen += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
            seen += [u["Key"] for u in r.get("Uploads", [])]
            if not r["IsTruncated"]:
                break
            kw = {"KeyMarker": r["NextKeyMarker"]}
            if r.get("NextUploadIdMarker"):
                kw["UploadIdMarker"] = r["NextUploadIdMarker"]
        assert seen == ["img/", "logs/", "top"], seen
        for k, u in ids.items():
            s3.abort_multipart_upload(Bucket=BUCKET, Key=k, UploadId=u)


if __name__ == "__main__":
    zh.run_tests([test_encryption_http, test_encryption_tls, test_storage_class_acl_tags_lock,
                  test_versioning, test_list_uploads_delimiter])
