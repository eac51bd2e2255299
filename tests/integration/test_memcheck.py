#!/usr/bin/env python3
"""The datanode and the gateway under valgrind's memcheck, driven by real clients.

Both daemons run under memcheck (ZEST_VALGRIND=memcheck in the harness): one invalid read or
write, one use of uninitialised memory, one definitely lost block, and the daemon exits 97 at
shutdown, which fails the test. The load walks the paths that matter: boto3 PUT/GET/HEAD/LIST/
DELETE across sizes that make many stripes and block groups, ranges, multipart, multi-delete,
aws-chunked over TLS, reads with a drive folder gone, malformed requests, and the copy
marshaller. Small sizes: memcheck runs code ~20x slower. ASan+UBSan cover the same daemons on
every suite; this run catches what they do not (uninitialised memory).
"""
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402

CELL = 64 << 10  # 4 data cells of 64 KiB: 256 KiB stripes, 4 MiB block groups


def client(c, verify=None, endpoint=None):
    cfg = Config(retries={"total_max_attempts": 1}, read_timeout=120, connect_timeout=30,
                 s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=endpoint or c.endpoint, verify=verify,
                        aws_access_key_id=zh.ACCESS_KEY, aws_secret_access_key=zh.SECRET_KEY,
                        region_name="us-east-1", config=cfg)


def raw_status(c, request):
    """Send raw bytes, return the HTTP status code of the answer."""
    with socket.create_connection(("127.0.0.1", c.gw_port), timeout=60) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            part = s.recv(65536)
            if not part:
                break
            data += part
    return int(data.split(b" ", 2)[1])


def workload(c, s3):
    s3.create_bucket(Bucket="mcheck")
    sizes = [0, 1, CELL - 1, CELL + 1, 4 * CELL * 16 + 7, (9 << 20) + 3]
    blobs = {f"k{n}": os.urandom(n) for n in sizes}
    for key, data in blobs.items():
        s3.put_object(Bucket="mcheck", Key=key, Body=data)
    for key, data in blobs.items():
        assert s3.get_object(Bucket="mcheck", Key=key)["Body"].read() == data, key
        assert s3.head_object(Bucket="mcheck", Key=key)["ContentLength"] == len(data)
    big = blobs[f"k{(9 << 20) + 3}"]
    got = s3.get_object(Bucket="mcheck", Key=f"k{len(big)}", Range="bytes=100000-5000000")
    assert got["Body"].read() == big[100000:5000001]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="mcheck")["Contents"]]
    assert sorted(keys) == sorted(blobs)

    # multipart: two parts, completed, read back whole
    part = os.urandom(5 << 20)
    up = s3.create_multipart_upload(Bucket="mcheck", Key="mp")
    etags = [s3.upload_part(Bucket="mcheck", Key="mp", UploadId=up["UploadId"], PartNumber=i,
                            Body=part)["ETag"] for i in (1, 2)]
    s3.complete_multipart_upload(
        Bucket="mcheck", Key="mp", UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"ETag": e, "PartNumber": i + 1} for i, e in
                                   enumerate(etags)]})
    body = s3.get_object(Bucket="mcheck", Key="mp")["Body"].read()
    assert hashlib.sha256(body).digest() == hashlib.sha256(part + part).digest()

    # a drive folder gone: reads rebuild from the others
    shutil.rmtree(c.drives[1])
    os.makedirs(c.drives[1])
    assert s3.get_object(Bucket="mcheck", Key=f"k{len(big)}")["Body"].read() == big

    # malformed requests get their errors and harm nothing
    assert raw_status(c, b"GET /mcheck/k1 HTTP/1.1\r\nHost: x\r\nAuthorization: AWS4-HMAC-SHA256 "
                         b"Credential=zesttest/20260101/us-east-1/s3/aws4_request, "
                         b"SignedHeaders=host, Signature=00\r\n\r\n") == 403
    assert raw_status(c, b"GARBAGE\r\n\r\n") == 400
    assert raw_status(c, b"GET /mcheck HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n") == 400
    try:
        s3.delete_objects(Bucket="mcheck", Delete={"Objects": []})
        raise AssertionError("an empty multi-delete was accepted")
    except s3.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "MalformedXML", e.response
    s3.delete_objects(Bucket="mcheck", Delete={"Objects": [{"Key": k} for k in blobs]})
    s3.delete_object(Bucket="mcheck", Key="mp")
    assert s3.list_objects_v2(Bucket="mcheck")["KeyCount"] == 0
    s3.delete_bucket(Bucket="mcheck")


def test_memcheck_zerocopy():
    with zh.cluster(cell_size=CELL) as c:
        workload(c, client(c))


def test_memcheck_copy_marshaller_over_tls():
    if not shutil.which("openssl"):
        print("skip: openssl not installed")
        return
    tmp = tempfile.mkdtemp(prefix="zest-mc-tls-")
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    try:
        with zh.cluster(cell_size=CELL, marshaller="copy",
                        extra_gw=["--tls-cert", cert, "--tls-key", key]) as c:
            # over TLS botocore sends aws-chunked bodies with a CRC32 trailer
            s3 = client(c, verify=cert, endpoint=f"https://127.0.0.1:{c.gw_port}")
            s3.create_bucket(Bucket="mct")
            data = os.urandom((3 << 20) + 5)
            s3.put_object(Bucket="mct", Key="t", Body=data)
            assert s3.get_object(Bucket="mct", Key="t")["Body"].read() == data
            s3.delete_object(Bucket="mct", Key="t")
            s3.delete_bucket(Bucket="mct")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if not shutil.which("valgrind"):
        print("skip: valgrind is not installed")
        sys.exit(77)
    os.environ["ZEST_VALGRIND"] = "memcheck"
    zh.run_tests([test_memcheck_zerocopy, test_memcheck_copy_marshaller_over_tls])
