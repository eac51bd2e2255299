#!/usr/bin/env python3
"""S3 conformance points a public S3 test suite found (issue 26), each with the client that
sends it, once against one datanode and once against a cluster (etcd + three datanodes 2+1):

- a Date header instead of X-Amz-Date in every HTTP date form: botocore (new and Debian's old
  one) signing with Date writes "-0000" as the zone; RFC 850 and asctime through curl;
- 304 Not Modified with x-amz-checksum-mode: ENABLED carries the validators only (no
  x-amz-checksum-*, no content headers): botocore's reader and a raw socket;
- GET/HEAD ?partNumber= past the last part: 416 InvalidPartNumber, as AWS;
- CompleteMultipartUpload naming a part twice (sent again): the entry that matches the part
  as stored wins, an ETag no upload of it had is InvalidPart;
- ListObjects v1 with encoding-type=url: Prefix comes back encoded (AWS does; botocore's v1
  handler leaves it so);
- non-ASCII user metadata: stored as UTF-8, returned as =?UTF-8?B?...?= (RFC 2047, AWS's
  rule); an encoded word sent is stored decoded;
- conditional writes: If-None-Match: <etag> (412 when it matches, else the write goes on),
  If-Match: * and If-Match: <etag> on a missing key 404 NoSuchKey, an If-Match mismatch 412,
  for PutObject and CompleteMultipartUpload;
- bad input still gets its precise S3 error and leaves nothing stored.

- PUT with Transfer-Encoding: chunked and no decoded length (curl -T -, plain and aws-chunked
  framing, objects and parts): stored in both modes (the cluster gateway in 8 MiB pieces
  composed at the commit, none left behind);
- a conditional write held between the gateway's look and its commit (fault point
  s3.cond-seen, test builds) while another PUT lands: 409 ConditionalRequestConflict.

The old botocore runs this file again under /usr/bin/python3 (--old ENDPOINT); minio-go runs
its `conform` case (tests/integration/minio_client/conform.go). Exits 77 without boto3; the
cluster half is left out without etcd.
"""
import base64
import email.header
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402

OLD_PYTHON = "/usr/bin/python3"


def client(endpoint, **cfg):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, **cfg))


def error_of(fn, **kw):
    from botocore.exceptions import ClientError
    try:
        fn(**kw)
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]
    raise AssertionError(f"{fn.__name__} {kw} succeeded")


def keys(s3, bucket):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def curl(endpoint, *args, sign=True):
    """(status, body) of one curl request; signed with --aws-sigv4 unless sign=False."""
    auth = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", f"{zh.ACCESS_KEY}:{zh.SECRET_KEY}",
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"] if sign else []
    p = subprocess.run(["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--max-time", "30",
                        *auth, *args], capture_output=True, timeout=60)
    body, _, code = p.stdout.rpartition(b"\n")
    return int(code), body


# ---------------------------------------------------------------- Date header (botocore)

def check_date(endpoint, bucket):
    """A Date header in the request makes botocore sign with it instead of X-Amz-Date, in
    email.utils.formatdate's form with the zone "-0000": SigV4 and SigV2 (signature "s3")."""
    from botocore.config import Config
    import boto3
    seen = []

    def add_date(request, **kw):
        request.headers["Date"] = "set"  # botocore's signer puts the time there itself

    def saw(request, **kw):
        d = request.headers.get("Date")
        seen.append(d.decode() if isinstance(d, bytes) else d)
    for sig in ("s3v4", "s3"):
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=zh.ACCESS_KEY,
                          aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                          config=Config(signature_version=sig, s3={"addressing_style": "path"},
                                        retries={"max_attempts": 1}))
        s3.meta.events.register_first("before-sign.s3", add_date)
        s3.meta.events.register("before-send.s3", saw)
        s3.put_object(Bucket=bucket, Key="date/v2", Body=b"v2")
        assert s3.get_object(Bucket=bucket, Key="date/v2")["Body"].read() == b"v2"
    assert any(d and d.endswith("-0000") for d in seen), seen


def check_date_forms(endpoint, bucket):
    """curl: If-Modified-Since / If-Unmodified-Since in RFC 1123 with GMT and -0000, RFC 850
    and asctime, each read as the same instant (a time in the future: 304; in the past:
    412 for If-Unmodified-Since)."""
    url = f"{endpoint}/{bucket}/date/v2"
    # RFC 850's two-digit year cannot reach past 2068 (strptime's %y): no future one here
    for d in ["Fri, 01 Jan 2100 00:00:00 GMT", "Fri, 01 Jan 2100 00:00:00 -0000",
              "Fri Jan  1 00:00:00 2100"]:
        code, _ = curl(endpoint, url, "-H", f"If-Modified-Since: {d}")
        assert code == 304, (d, code)
    for d in ["Thu, 01 Jan 1970 00:00:01 GMT", "Thu, 01 Jan 1970 00:00:01 -0000",
              "Thursday, 01-Jan-70 00:00:01 GMT", "Thu Jan  1 00:00:01 1970"]:
        code, _ = curl(endpoint, url, "-H", f"If-Unmodified-Since: {d}")
        assert code == 412, (d, code)
    # a zone that is not UTC under a name S3 knows is no date: the header is ignored
    code, _ = curl(endpoint, url, "-H", "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:01 PST")
    assert code == 200, code


# ---------------------------------------------------------------- 304 and checksums

def check_304(endpoint, bucket):
    s3 = client(endpoint)
    r = s3.put_object(Bucket=bucket, Key="nm", Body=b"hello", ChecksumAlgorithm="CRC32",
                      ContentType="text/x-nm", Metadata={"m": "v"})
    etag = r["ETag"]
    # botocore validates a checksum it is given against the body: a 304 must carry none
    e = error_of(s3.get_object, Bucket=bucket, Key="nm", IfNoneMatch=etag, ChecksumMode="ENABLED")
    assert e == (304, "304"), e
    h = s3.get_object(Bucket=bucket, Key="nm", ChecksumMode="ENABLED")
    assert h["ChecksumCRC32"] and h["Body"].read() == b"hello", h
    # the raw head: validators only
    code, head = raw_get(endpoint, f"/{bucket}/nm", {"If-None-Match": etag,
                                                     "x-amz-checksum-mode": "ENABLED"})
    assert code == 304, code
    names = {ln.split(":", 1)[0].lower() for ln in head.split("\r\n")[1:] if ":" in ln}
    assert "etag" in names and "last-modified" in names, names
    for bad in ("x-amz-checksum-crc32", "content-type", "content-length", "x-amz-meta-m",
                "accept-ranges", "x-amz-checksum-type"):
        assert bad not in names, (bad, head)


def raw_get(endpoint, path, headers):
    """A SigV4-signed GET over a socket: (status, head text)."""
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
    req = botocore.awsrequest.AWSRequest(method="GET", url=endpoint + path, headers=headers)
    botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(zh.ACCESS_KEY, zh.SECRET_KEY),
                              "s3", "us-east-1").add_auth(req)
    host, port = urllib.parse.urlsplit(endpoint).netloc.split(":")
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{k}: {v}" for k, v in req.headers.items() if k.lower() != "host"]
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    return int(head.split(" ", 2)[1]), head


# ---------------------------------------------------------------- partNumber past the end

def check_part_number(endpoint, bucket):
    s3 = client(endpoint)
    s3.put_object(Bucket=bucket, Key="one", Body=b"x" * 100)
    for fn in (s3.get_object, s3.head_object):
        e = error_of(fn, Bucket=bucket, Key="one", PartNumber=2)
        assert e[0] == 416, (fn.__name__, e)
    code, body = curl(endpoint, f"{endpoint}/{bucket}/one?partNumber=2")
    assert code == 416 and b"<Code>InvalidPartNumber</Code>" in body, (code, body)
    r = s3.get_object(Bucket=bucket, Key="one", PartNumber=1)
    assert r["Body"].read() == b"x" * 100


# ---------------------------------------------------------------- Complete: a part twice

def check_part_twice(endpoint, bucket):
    s3 = client(endpoint)
    key = "twice"
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    p1 = os.urandom(5 << 20)
    first = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=1, Body=p1)["ETag"]
    p1b = os.urandom(5 << 20)  # sent again with other bytes: this upload is the part now
    again = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=1, Body=p1b)["ETag"]
    p2 = b"tail"
    e2 = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=2, Body=p2)["ETag"]
    # an ETag no upload of part 1 has, listed twice: InvalidPart, the upload stays open
    e = error_of(s3.complete_multipart_upload, Bucket=bucket, Key=key, UploadId=up,
                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"' + "0" * 32 + '"'},
                                            {"PartNumber": 1, "ETag": '"' + "1" * 32 + '"'},
                                            {"PartNumber": 2, "ETag": e2}]})
    assert e == (400, "InvalidPart"), e
    # descending numbers stay InvalidPartOrder
    e = error_of(s3.complete_multipart_upload, Bucket=bucket, Key=key, UploadId=up,
                 MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": e2},
                                            {"PartNumber": 1, "ETag": again}]})
    assert e == (400, "InvalidPartOrder"), e
    assert key not in keys(s3, bucket)
    r = s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": first},
                                   {"PartNumber": 1, "ETag": again},
                                   {"PartNumber": 2, "ETag": e2}]})
    md5 = hashlib.md5(bytes.fromhex(again.strip('"')) + bytes.fromhex(e2.strip('"')))
    assert r["ETag"] == f'"{md5.hexdigest()}-2"', r["ETag"]
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == p1b + p2


# ---------------------------------------------------------------- ListObjects v1 Prefix

def check_list_v1(endpoint, bucket):
    s3 = client(endpoint)
    s3.put_object(Bucket=bucket, Key="lp/a b=c/x", Body=b"")
    # botocore asks encoding-type=url and decodes keys, common prefixes, markers and the
    # delimiter in v1, not Prefix: AWS encodes it, so a client sees it encoded (v2 decodes)
    r = s3.list_objects(Bucket=bucket, Prefix="lp/a b=", Delimiter="/")
    assert r["EncodingType"] == "url", r
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["lp/a b=c/"], r
    assert r["Prefix"] == "lp/a%20b%3D", r["Prefix"]
    r2 = s3.list_objects_v2(Bucket=bucket, Prefix="lp/a b=", Delimiter="/")
    assert r2["Prefix"] == "lp/a b=", r2["Prefix"]
    code, body = curl(endpoint, f"{endpoint}/{bucket}?prefix=lp%2Fa%20b%3D&delimiter=%2F")
    assert code == 200 and b"<Prefix>lp/a b=</Prefix>" in body, body  # unencoded: as sent


# ---------------------------------------------------------------- non-ASCII metadata

def check_unicode_meta(endpoint, bucket):
    s3 = client(endpoint)
    text = "Hello World\u00e9 \u4e2d"

    def raw_meta(params, **kw):  # botocore refuses non-ASCII Metadata=: set the header
        params["headers"]["x-amz-meta-meta1"] = text
    s3.meta.events.register("before-call.s3.PutObject", raw_meta)
    s3.put_object(Bucket=bucket, Key="uni", Body=b"bar")
    s3.meta.events.unregister("before-call.s3.PutObject", raw_meta)
    for got in (s3.get_object(Bucket=bucket, Key="uni")["Metadata"]["meta1"],
                s3.head_object(Bucket=bucket, Key="uni")["Metadata"]["meta1"]):
        word = "=?UTF-8?B?" + base64.b64encode(text.encode()).decode() + "?="
        assert got == word, got
        assert str(email.header.make_header(email.header.decode_header(got))) == text
    # an encoded word sent is stored as the text it stands for
    word = email.header.Header(text, "utf-8").encode()
    s3.put_object(Bucket=bucket, Key="uni2", Body=b"", Metadata={"meta1": word, "a": "plain"})
    m = s3.head_object(Bucket=bucket, Key="uni2")["Metadata"]
    assert str(email.header.make_header(email.header.decode_header(m["meta1"]))) == text, m
    assert m["a"] == "plain", m
    ascii_word = "=?UTF-8?Q?just_ascii?="  # decodes to ASCII: presented as is
    s3.put_object(Bucket=bucket, Key="uni3", Body=b"", Metadata={"q": ascii_word})
    assert s3.head_object(Bucket=bucket, Key="uni3")["Metadata"]["q"] == "just ascii"


# ---------------------------------------------------------------- conditional writes

def check_conditional(endpoint, bucket):
    s3 = client(endpoint)
    key = "cond"
    # on a missing key: If-Match: * and If-Match: <etag> are NoSuchKey, nothing stored
    for im in ("*", '"' + "a" * 32 + '"'):
        e = error_of(s3.put_object, Bucket=bucket, Key=key, Body=b"x", IfMatch=im)
        assert e == (404, "NoSuchKey"), (im, e)
    assert key not in keys(s3, bucket)
    # If-None-Match: <etag> on a missing key: written
    v1 = s3.put_object(Bucket=bucket, Key=key, Body=b"v1", IfNoneMatch='"' + "b" * 32 + '"')
    # matching the current ETag: 412, the object stays
    e = error_of(s3.put_object, Bucket=bucket, Key=key, Body=b"v2", IfNoneMatch=v1["ETag"])
    assert e == (412, "PreconditionFailed"), e
    # another ETag: written
    v2 = s3.put_object(Bucket=bucket, Key=key, Body=b"v2", IfNoneMatch='"' + "c" * 32 + '"')
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v2"
    # If-Match mismatch 412, match and * written
    e = error_of(s3.put_object, Bucket=bucket, Key=key, Body=b"v3", IfMatch=v1["ETag"])
    assert e == (412, "PreconditionFailed"), e
    s3.put_object(Bucket=bucket, Key=key, Body=b"v3", IfMatch=v2["ETag"])
    v4 = s3.put_object(Bucket=bucket, Key=key, Body=b"v4", IfMatch="*")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v4"
    # curl sends the header as typed, unquoted
    code, body = curl(endpoint, "-X", "PUT", "--data-binary", "v5", "-H",
                      f"If-None-Match: {v4['ETag'].strip(chr(34))}", f"{endpoint}/{bucket}/{key}")
    assert code == 412 and b"PreconditionFailed" in body, (code, body)
    # CompleteMultipartUpload: the same rules
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    pe = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=1, Body=b"mp")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": pe}]}
    e = error_of(s3.complete_multipart_upload, Bucket=bucket, Key=key, UploadId=up,
                 MultipartUpload=parts, IfNoneMatch=v4["ETag"])
    assert e == (412, "PreconditionFailed"), e
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up, MultipartUpload=parts,
                                 IfNoneMatch='"' + "d" * 32 + '"')
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"mp"
    up = s3.create_multipart_upload(Bucket=bucket, Key="cond-mp")["UploadId"]
    pe = s3.upload_part(Bucket=bucket, Key="cond-mp", UploadId=up, PartNumber=1,
                        Body=b"mp")["ETag"]
    e = error_of(s3.complete_multipart_upload, Bucket=bucket, Key="cond-mp", UploadId=up,
                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": pe}]}, IfMatch="*")
    assert e == (404, "NoSuchKey"), e
    assert "cond-mp" not in keys(s3, bucket)
    s3.abort_multipart_upload(Bucket=bucket, Key="cond-mp", UploadId=up)


def check_stale(endpoint, bucket):
    """If-Match with the ETag the key had before another PUT: 412, the other PUT stays."""
    s3 = client(endpoint)
    old = s3.put_object(Bucket=bucket, Key="race", Body=b"old")["ETag"]
    s3.put_object(Bucket=bucket, Key="race", Body=b"new")
    e = error_of(s3.put_object, Bucket=bucket, Key="race", Body=b"x", IfMatch=old)
    assert e == (412, "PreconditionFailed"), e
    e = error_of(s3.put_object, Bucket=bucket, Key="race", Body=b"x", IfNoneMatch="*")
    assert e == (412, "PreconditionFailed"), e
    assert s3.get_object(Bucket=bucket, Key="race")["Body"].read() == b"new"


def check_conflict(endpoint, bucket, pause):
    """A write under If-None-Match: <etag> held (fault point s3.cond-seen) between the
    gateway's look at the key and its commit while another PUT lands: 409
    ConditionalRequestConflict, and the other PUT's object stays."""
    if not pause:
        print("no fault points in this build: the 409 race is not checked")
        return
    import threading
    s3 = client(endpoint)
    s3.put_object(Bucket=bucket, Key="conflict", Body=b"before")
    if os.path.exists(pause + ".reached"):
        os.unlink(pause + ".reached")
    open(pause, "w").close()
    box = {}

    def held():
        try:
            box["r"] = error_of(s3.put_object, Bucket=bucket, Key="conflict", Body=b"held",
                                IfNoneMatch='"' + "e" * 32 + '"')
        except AssertionError as e:
            box["r"] = str(e)
    t = threading.Thread(target=held)
    t.start()
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(pause + ".reached"):
            assert time.monotonic() < deadline, "the held PUT never reached s3.cond-seen"
            time.sleep(0.05)
        client(endpoint).put_object(Bucket=bucket, Key="conflict", Body=b"between")
    finally:
        os.unlink(pause)
        t.join(60)
    assert box.get("r") == (409, "ConditionalRequestConflict"), box
    assert s3.get_object(Bucket=bucket, Key="conflict")["Body"].read() == b"between"


# ---------------------------------------------------------------- chunked, no length

def curl_stdin(endpoint, url, data, *headers):
    p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time",
                        "60", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{zh.ACCESS_KEY}:{zh.SECRET_KEY}", "-H",
                        "Transfer-Encoding: chunked", *sum((["-H", h] for h in headers), []),
                        "-T", "-", url], input=data, capture_output=True, timeout=120)
    return int(p.stdout)


def aws_chunked(data, size=64 << 10):
    out = b""
    for i in range(0, len(data), size):
        out += b"%x\r\n" % len(data[i:i + size]) + data[i:i + size] + b"\r\n"
    return out + b"0\r\n\r\n"


def check_chunked(endpoint, bucket):
    """PUT with Transfer-Encoding: chunked and no decoded length (curl -T -): stored whole in
    both modes (the cluster places it in pieces as it arrives, the last one short); the
    same with aws-chunked framing and no x-amz-decoded-content-length."""
    s3 = client(endpoint)
    for n in (0, 1000, (8 << 20), (17 << 20) + 5):
        data = os.urandom(n)
        key = f"chunked/{n}"
        code = curl_stdin(endpoint, f"{endpoint}/{bucket}/{key}", data,
                          "x-amz-content-sha256: UNSIGNED-PAYLOAD")
        assert code == 200, (n, code)
        r = s3.get_object(Bucket=bucket, Key=key)
        assert r["ContentLength"] == n and r["Body"].read() == data, n
        assert r["ETag"] == f'"{hashlib.md5(data).hexdigest()}"', (n, r["ETag"])
    data = os.urandom((9 << 20) + 3)
    code = curl_stdin(endpoint, f"{endpoint}/{bucket}/chunked/aws", aws_chunked(data),
                      "x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                      "Content-Encoding: aws-chunked")
    assert code == 200, code
    assert s3.get_object(Bucket=bucket, Key="chunked/aws")["Body"].read() == data
    # conditions hold for it too, and a refused one leaves nothing (no piece either)
    code = curl_stdin(endpoint, f"{endpoint}/{bucket}/chunked/aws", data[:(8 << 20) + 1],
                      "x-amz-content-sha256: UNSIGNED-PAYLOAD", "If-None-Match: *")
    assert code == 412, code
    assert s3.get_object(Bucket=bucket, Key="chunked/aws")["Body"].read() == data
    # a part of unknown length (pieces too in the cluster), then the Complete of it
    up = s3.create_multipart_upload(Bucket=bucket, Key="chunked/mp")["UploadId"]
    p1 = os.urandom((8 << 20) + 7)
    code = curl_stdin(endpoint, f"{endpoint}/{bucket}/chunked/mp?partNumber=1&uploadId={up}",
                      p1, "x-amz-content-sha256: UNSIGNED-PAYLOAD")
    assert code == 200, code
    e2 = s3.upload_part(Bucket=bucket, Key="chunked/mp", UploadId=up, PartNumber=2,
                        Body=b"end")["ETag"]
    e1 = s3.list_parts(Bucket=bucket, Key="chunked/mp", UploadId=up)["Parts"][0]["ETag"]
    assert e1 == f'"{hashlib.md5(p1).hexdigest()}"', e1
    s3.complete_multipart_upload(Bucket=bucket, Key="chunked/mp", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                                            {"PartNumber": 2, "ETag": e2}]})
    assert s3.get_object(Bucket=bucket, Key="chunked/mp")["Body"].read() == p1 + b"end"
    r = s3.get_object(Bucket=bucket, Key="chunked/mp", PartNumber=1)
    assert r["Body"].read() == p1, "part 1"
    # overwrite with a smaller body: the record has the new size
    code = curl_stdin(endpoint, f"{endpoint}/{bucket}/chunked/aws", b"short",
                      "x-amz-content-sha256: UNSIGNED-PAYLOAD")
    assert code == 200, code
    assert s3.get_object(Bucket=bucket, Key="chunked/aws")["Body"].read() == b"short"


# ---------------------------------------------------------------- bad input

def check_bad_input(endpoint, bucket):
    s3 = client(endpoint)
    e = error_of(s3.put_object, Bucket=bucket, Key="bad", Body=b"abc",
                 ContentMD5=base64.b64encode(b"\0" * 16).decode())
    assert e == (400, "BadDigest"), e
    code, body = curl(endpoint, "-X", "PUT", "--data-binary", "abc", "-H",
                      "Date: Thu, 01 Jan 1970 00:00:01 XYZ", "-H", "Authorization: AWS "
                      f"{zh.ACCESS_KEY}:AAAA", f"{endpoint}/{bucket}/bad", sign=False)
    assert code == 403 and b"AccessDenied" in body, (code, body)
    e = error_of(s3.complete_multipart_upload, Bucket=bucket, Key="bad", UploadId="nope",
                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"' + "0" * 32 + '"'}]})
    assert e == (404, "NoSuchUpload"), e
    assert "bad" not in keys(s3, bucket)


def run_old(endpoint, bucket):
    """Debian's botocore: SigV2 with "-0000", 304 with checksum mode, the metadata word."""
    s3 = client(endpoint)
    check_date(endpoint, bucket)
    r = s3.put_object(Bucket=bucket, Key="old", Body=b"old")
    e = error_of(s3.get_object, Bucket=bucket, Key="old", IfNoneMatch=r["ETag"])
    assert e[0] == 304, e
    s3.put_object(Bucket=bucket, Key="old-meta", Body=b"",
                  Metadata={"m": email.header.Header("\u00e9t\u00e9", "utf-8").encode()})
    got = s3.head_object(Bucket=bucket, Key="old-meta")["Metadata"]["m"]
    assert str(email.header.make_header(email.header.decode_header(got))) == "\u00e9t\u00e9"
    def inm(params, **kw):  # this botocore has no IfNoneMatch parameter: the header
        params["headers"]["If-None-Match"] = r["ETag"]
    s3.meta.events.register("before-call.s3.PutObject", inm)
    e = error_of(s3.put_object, Bucket=bucket, Key="old", Body=b"x")
    assert e == (412, "PreconditionFailed"), e
    s3.meta.events.unregister("before-call.s3.PutObject", inm)
    e = error_of(s3.head_object, Bucket=bucket, Key="old", PartNumber=2)
    assert e[0] == 416, e
    print("old botocore: ok")


def old_botocore(endpoint, bucket):
    if not os.path.exists(OLD_PYTHON) or subprocess.run(
            [OLD_PYTHON, "-c", "import boto3"], capture_output=True).returncode:
        print("no Debian python3-boto3: old botocore part skipped")
        return
    env = dict(os.environ, PYTHONPATH="", PYTHONNOUSERSITE="1")
    p = subprocess.run([OLD_PYTHON, os.path.abspath(__file__), "--old", endpoint, bucket],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr


def minio_go(endpoint):
    exe = os.environ.get("ZEST_MINIO_CLIENT")
    if not exe or not os.path.exists(exe):
        print("no zest-minio-client: minio-go part skipped")
        return
    p = subprocess.run([exe, "-endpoint", urllib.parse.urlsplit(endpoint).netloc,
                        "-access-key", zh.ACCESS_KEY, "-secret-key", zh.SECRET_KEY,
                        "-region", "us-east-1", "-bucket", "conform-minio",
                        "-cases", "conform", "-timeout", "2m"],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr


def conform(endpoint, mode, pause):
    s3 = client(endpoint)
    bucket = "conform"
    s3.create_bucket(Bucket=bucket)
    for check in (check_date, check_date_forms, check_304, check_part_number,
                  check_part_twice, check_list_v1, check_unicode_meta, check_conditional,
                  check_stale, check_chunked, check_bad_input):
        check(endpoint, bucket)
        print(f"{mode}: {check.__name__} ok", flush=True)
    check_conflict(endpoint, bucket, pause)
    old_botocore(endpoint, "conform-old")
    minio_go(endpoint)


class Faults:
    """ZEST_FAULTS for the daemons started inside: s3.cond-seen armed pause:PATH (a test
    build), else nothing and path None."""

    def __enter__(self):
        self.saved = dict(os.environ)
        self.path = None
        if zh.faults_built():
            self.dir = tempfile.mkdtemp(prefix="zest-conform-")
            self.path = os.path.join(self.dir, "cond-seen")
            os.environ["ZEST_FAULTS"] = f"s3.cond-seen=pause:{self.path}"
        return self

    def started(self):
        os.environ.clear()
        os.environ.update(self.saved)

    def __exit__(self, *exc):
        self.started()
        if self.path:
            shutil.rmtree(self.dir, ignore_errors=True)


def test_single_node():
    with Faults() as f, zh.cluster() as c:
        f.started()
        client(c.endpoint).create_bucket(Bucket="conform-old")
        conform(c.endpoint, "single-node", f.path)


def test_cluster():
    import cluster_harness as ch
    try:
        ch.require_tools()
    except ch.Skip as e:
        print(f"cluster mode not checked: {e}")
        return
    with Faults() as f, ch.cluster(nodes=3, ec="2+1") as c:
        f.started()
        client(c.endpoint).create_bucket(Bucket="conform-old")
        conform(c.endpoint, "cluster", f.path)
        # the pieces of chunked bodies were composed into their objects or deleted
        left = c.etcd.keys("/zest/objects/.zest-mpu/c/")
        assert not left, left


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--old":
        run_old(sys.argv[2], sys.argv[3])
        sys.exit(0)
    try:
        import boto3  # noqa: F401
    except ImportError:
        print("boto3 missing: skip")
        sys.exit(77)
    zh.run_tests([test_single_node, test_cluster])
