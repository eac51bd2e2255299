#!/usr/bin/env python3
"""minio-go, the client library MinIO's warp benchmark is built on, against the real stack.

tests/integration/minio_client/ (built by meson from Debian's minio-go v7.0.46) runs its cases
over plain HTTP (streaming-signed bodies) and over TLS (UNSIGNED-PAYLOAD): PutObject of
0 B .. 100 MiB (multipart from 16 MiB with CRC32C part checksums), ranged and partNumber GETs,
StatObject, CopyObject, ComposeObject, ListObjectsV2 with and without a delimiter, and
RemoveObjects. Each case checks what AWS S3 answers.

raw_multipart_crc32c replays minio-go's multipart exchange by hand (http.client and our own
SigV4 signer), so a failure names the request and the reply:
  POST ?uploads= (x-amz-checksum-algorithm: CRC32C), PUT ?partNumber=1&uploadId= with
  x-amz-checksum-crc32c (echoed back), POST ?uploadId= with the COMPOSITE checksum (the
  CRC32C of the binary part CRC32Cs) whose reply carries <Bucket> and <ChecksumCRC32C>X-1.

ZEST_MINIO_CASES=a,b,... runs only those cases (client case names and raw_multipart_crc32c);
the default is all. Without go the minio-go runs are skipped and the test exits 77 naming it.
Exits 77 too when the daemons are not built.
"""
import base64
import hashlib
import hmac
import http.client
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402

CLIENT = os.environ.get("ZEST_MINIO_CLIENT", "")
RAW = "raw_multipart_crc32c"
SKIPPED = []


def wanted():
    v = os.environ.get("ZEST_MINIO_CASES", "").strip()
    names = [n.strip() for n in v.split(",") if n.strip()] if v and v != "all" else []
    raw = not names or RAW in names
    client = [n for n in names if n != RAW]
    if names and not client:
        client = None  # only the replay was asked for
    elif not client:
        client = ["all"]
    return raw, client


# ---- CRC32C (Castagnoli, reflected 0x82f63b78), small inputs only ----

def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return (c ^ 0xFFFFFFFF).to_bytes(4, "big")


def b64(b):
    return base64.b64encode(b).decode()


# ---- a SigV4 signer for http.client ----

def sign(method, host, path, query, headers, body):
    """Headers for a SigV4 request (payload hash signed); query is a list of (k, v)."""
    amz = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    day = amz[:8]
    payload = hashlib.sha256(body).hexdigest()
    h = {k.lower(): v.strip() for k, v in headers.items()}
    h.update({"host": host, "x-amz-date": amz, "x-amz-content-sha256": payload})
    signed = ";".join(sorted(h))
    q = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                 for k, v in sorted(query))
    creq = "\n".join([method, urllib.parse.quote(path, safe="/-_.~"), q,
                      "".join(f"{k}:{h[k]}\n" for k in sorted(h)), signed, payload])
    scope = f"{day}/us-east-1/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + zh.SECRET_KEY).encode()
    for part in (day, "us-east-1", "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    h["authorization"] = (f"AWS4-HMAC-SHA256 Credential={zh.ACCESS_KEY}/{scope}, "
                          f"SignedHeaders={signed}, Signature={sig}")
    return h


def request(c, method, path, query=(), headers=None, body=b""):
    host = f"127.0.0.1:{c.gw_port}"
    h = sign(method, host, path, list(query), headers or {}, body)
    url = urllib.parse.quote(path, safe="/-_.~")
    if query:
        url += "?" + "&".join(f"{k}={urllib.parse.quote(v, safe='-_.~')}" for k, v in query)
    conn = http.client.HTTPConnection("127.0.0.1", c.gw_port, timeout=60)
    try:
        conn.request(method, url, body=body, headers=h)
        r = conn.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        conn.close()


def expect(what, st, hdrs, body, status=200):
    if st != status:
        raise AssertionError(f"{what}: HTTP {st}, want {status}: {body[:600]!r}")


def xml_field(body, name):
    m = re.search(rf"<{name}>([^<]*)</{name}>".encode(), body)
    return m.group(1).decode() if m else None


def test_raw_multipart_crc32c():
    """minio-go's multipart upload with CRC32C checksums, one request at a time. A refused
    request stops the replay; every wrong field of an accepted one is reported together."""
    # the composite of one part is the CRC32C of its 4-byte CRC32C
    assert b64(crc32c(base64.b64decode("JWuJYA=="))) == "2chzKA==", "CRC32C helper"
    wrong = []
    with zh.cluster() as c:
        bucket, key = "rawcrc", "k (1)"
        path = f"/{bucket}/{key}"
        expect("CreateBucket", *request(c, "PUT", f"/{bucket}"))
        st, h, body = request(c, "POST", path, [("uploads", "")],
                              {"x-amz-checksum-algorithm": "CRC32C"})
        expect("CreateMultipartUpload (x-amz-checksum-algorithm: CRC32C)", st, h, body)
        upload = xml_field(body, "UploadId")
        assert upload, f"no UploadId: {body[:400]!r}"
        if h.get("x-amz-checksum-algorithm") != "CRC32C":  # S3 names algorithms upper-case
            wrong.append("CreateMultipartUpload reply x-amz-checksum-algorithm "
                         f"{h.get('x-amz-checksum-algorithm')!r}, want 'CRC32C'")
        part = os.urandom(1 << 20)
        pcrc = b64(crc32c(part))
        st, h, body = request(c, "PUT", path, [("partNumber", "1"), ("uploadId", upload)],
                              {"x-amz-checksum-crc32c": pcrc}, part)
        expect("UploadPart (x-amz-checksum-crc32c)", st, h, body)
        etag = h.get("etag", "")
        if etag.strip('"') != hashlib.md5(part).hexdigest():
            wrong.append(f"UploadPart ETag {etag!r}")
        if h.get("x-amz-checksum-crc32c") != pcrc:
            wrong.append("UploadPart reply x-amz-checksum-crc32c "
                         f"{h.get('x-amz-checksum-crc32c')!r}, want {pcrc!r} echoed")
        composite = b64(crc32c(base64.b64decode(pcrc)))
        done = (f"<CompleteMultipartUpload><Part><ETag>{etag}</ETag>"
                f"<ChecksumCRC32C>{pcrc}</ChecksumCRC32C><PartNumber>1</PartNumber></Part>"
                f"</CompleteMultipartUpload>").encode()
        st, h, body = request(c, "POST", path, [("uploadId", upload)],
                              {"x-amz-checksum-crc32c": composite}, done)
        expect(f"CompleteMultipartUpload (x-amz-checksum-crc32c: {composite}, the composite)"
               + "".join(f"; also: {w}" for w in wrong), st, h, body)
        if xml_field(body, "Bucket") != bucket:
            wrong.append(f"CompleteMultipartUpload <Bucket> {xml_field(body, 'Bucket')!r}")
        if xml_field(body, "Key") != key:
            wrong.append(f"CompleteMultipartUpload <Key> {xml_field(body, 'Key')!r}")
        got = xml_field(body, "ChecksumCRC32C")
        if got != f"{composite}-1":
            wrong.append(f"CompleteMultipartUpload <ChecksumCRC32C> {got!r}, "
                         f"want {composite + '-1'!r} (COMPOSITE)")
        md5s = hashlib.md5(hashlib.md5(part).digest()).hexdigest()
        tag = (xml_field(body, "ETag") or "").replace("&quot;", "").strip('"')
        if tag != f"{md5s}-1":
            wrong.append(f"CompleteMultipartUpload <ETag> {tag!r}, want {md5s}-1")
        st, h, body = request(c, "GET", path)
        expect("GetObject", st, h, body)
        if body != part:
            wrong.append("GetObject bytes differ")
        expect("DeleteObject", *request(c, "DELETE", path), status=204)
        expect("DeleteBucket", *request(c, "DELETE", f"/{bucket}"), status=204)
    assert not wrong, "; ".join(wrong)


def run_client(c, cases, tls):
    argv = [CLIENT, "-endpoint", f"127.0.0.1:{c.gw_port}", "-access-key", zh.ACCESS_KEY,
            "-secret-key", zh.SECRET_KEY, "-cases", ",".join(cases),
            "-bucket", "minio-go-tls" if tls else "minio-go"]
    if tls:
        argv.append("-tls")
    p = subprocess.run(argv, capture_output=True, timeout=280)
    out = p.stdout.decode(errors="replace")
    sys.stdout.write(f"--- minio-go over {'TLS' if tls else 'HTTP'} ---\n{out}")
    if p.returncode != 0:
        sys.stderr.write(p.stderr.decode(errors="replace")[-3000:])
        fails = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
        raise AssertionError(f"minio-go exited {p.returncode}: " + " | ".join(fails)[:2000])


def test_minio_go_http(cases):
    with zh.cluster() as c:
        run_client(c, cases, tls=False)


def test_minio_go_tls(cases):
    if not shutil.which("openssl"):
        SKIPPED.append("minio-go-tls(openssl)")
        return
    tmp = tempfile.mkdtemp(prefix="zest-minio-tls-")
    key, cert = os.path.join(tmp, "key.pem"), os.path.join(tmp, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    try:
        with zh.cluster(extra_gw=["--tls-cert", cert, "--tls-key", key]) as c:
            run_client(c, cases, tls=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if not (os.access(zh.DATANODE, os.X_OK) and os.access(zh.GATEWAY, os.X_OK)):
        print(f"SKIP: {zh.DATANODE} or {zh.GATEWAY} is not built")
        sys.exit(77)
    raw, cases = wanted()
    tests = [test_raw_multipart_crc32c] if raw else []
    have_go = bool(CLIENT) and os.access(CLIENT, os.X_OK)
    if cases and have_go:
        def http_run():
            test_minio_go_http(cases)

        def tls_run():
            test_minio_go_tls(cases)
        http_run.__name__, tls_run.__name__ = "minio_go_http", "minio_go_tls"
        tests += [http_run, tls_run]
    elif cases:
        SKIPPED.append("minio-go (go is not installed: Debian packages golang-go and "
                       "golang-github-minio-minio-go-v7-dev; `make deps` installs them)")
    if not tests:
        print("SKIP: " + " ".join(SKIPPED))
        sys.exit(77)
    import atexit
    atexit.register(lambda: print("skipped: " + (" ".join(SKIPPED) or "none")))
    if cases and not have_go:
        # the replay runs anyway; the test as a whole is a skip when it passes
        try:
            zh.run_tests(tests)
        except SystemExit as e:
            if e.code == 0:
                print("SKIP: minio-go not run: go is not installed")
                sys.exit(77)
            raise
    zh.run_tests(tests)
