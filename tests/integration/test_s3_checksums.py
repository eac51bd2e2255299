#!/usr/bin/env python3
"""Multipart checksums and ?partNumber= through the real stack (zest-s3gw + zest-datanode).

- minio-go's exchange replayed on the wire: CreateMultipartUpload with
  x-amz-checksum-algorithm: CRC32C, one 16 MiB part streamed with
  STREAMING-AWS4-HMAC-SHA256-PAYLOAD and x-amz-checksum-crc32c, then Complete with the
  COMPOSITE header (the CRC32C of the binary part CRC32Cs, no "-1" suffix); the reply must
  name the Bucket, GET ?partNumber=1 must give the part. A wrong composite header is 400
  BadDigest and leaves no object.
- boto3 of this interpreter (1.43: CRC32 by default, ChecksumType) and Debian's
  /usr/bin/python3 boto3 (1.26): every algorithm in COMPOSITE and FULL_OBJECT (the two
  combinations S3 refuses are refused), Complete replies, HEAD/GET with ChecksumMode,
  ListParts, get_object(PartNumber=N) for each part, a retried Complete, upload_file;
  33 parts beside 3.8 KB of metadata (the part table in its own record).

Run as `test_s3_checksums.py --client ENDPOINT AK SK` it is the boto3 client half, under
whichever interpreter runs it. Exits 77 (skip) when the daemons are not built.
"""
import base64
import hashlib
import hmac
import http.client
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402

EMPTY_SHA = hashlib.sha256(b"").hexdigest()


# ------------------------------------------------------------------ checksums, by the book

def _table(poly):
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        t.append(c)
    return t


_T32C = _table(0x82F63B78)
_T64NV = _table(0x9A6C9329AC4BC9B5)


def _crc(data, crc, t, mask):
    crc ^= mask
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ mask


def crc32c(data, crc=0):
    return _crc(data, crc, _T32C, 0xFFFFFFFF)


def crc64nvme(data, crc=0):
    return _crc(data, crc, _T64NV, 0xFFFFFFFFFFFFFFFF)


def digest(alg, data):
    """Binary checksum of data, as S3 base64-encodes it (big-endian CRCs)."""
    if alg == "CRC32":
        return zlib.crc32(data).to_bytes(4, "big")
    if alg == "CRC32C":
        return crc32c(data).to_bytes(4, "big")
    if alg == "CRC64NVME":
        return crc64nvme(data).to_bytes(8, "big")
    return hashlib.new(alg.lower(), data).digest()


def b64(b):
    return base64.b64encode(b).decode()


def composite(alg, part_digests):
    """COMPOSITE: the checksum of the concatenated binary part checksums, "-<parts>"."""
    return f"{b64(digest(alg, b''.join(part_digests)))}-{len(part_digests)}"


# ------------------------------------------------------------------ raw SigV4 requests

def _key(amz):
    k = ("AWS4" + zh.SECRET_KEY).encode()
    for part in (amz[:8], "us-east-1", "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def signed(c, method, path, query=None, headers=None, body=b"", payload=None):
    """One signed request; returns (status, {lower-case header: value}, body, seed).
    payload: the x-amz-content-sha256 value (default: the body's SHA-256)."""
    query = query or {}
    amz = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    host = f"127.0.0.1:{c.gw_port}"
    payload = payload or hashlib.sha256(body).hexdigest()
    h = {k.lower(): str(v) for k, v in (headers or {}).items()}
    h.update({"host": host, "x-amz-date": amz, "x-amz-content-sha256": payload})
    names = ";".join(sorted(h))
    q = lambda s: urllib.parse.quote(s, safe="-_.~")  # noqa: E731
    cq = "&".join(f"{q(k)}={q(v)}" for k, v in sorted(query.items()))
    creq = "\n".join([method, path, cq, "".join(f"{k}:{h[k]}\n" for k in sorted(h)), names,
                      payload])
    scope = f"{amz[:8]}/us-east-1/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(creq.encode()).hexdigest()])
    sig = hmac.new(_key(amz), sts.encode(), hashlib.sha256).hexdigest()
    h["authorization"] = (f"AWS4-HMAC-SHA256 Credential={zh.ACCESS_KEY}/{scope}, "
                          f"SignedHeaders={names}, Signature={sig}")
    if callable(body):
        body = body(amz, scope, sig)
    h["content-length"] = str(len(body))
    conn = http.client.HTTPConnection("127.0.0.1", c.gw_port, timeout=120)
    target = path + ("?" + "&".join(f"{q(k)}={q(v)}" for k, v in query.items()) if query else "")
    conn.request(method, target, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    conn.close()
    return r.status, hdrs, data


def aws_chunked(data, chunk=64 << 10):
    """A body builder for signed(): STREAMING-AWS4-HMAC-SHA256-PAYLOAD framing with the
    chunk signature chain, 64 KiB chunks as minio-go sends them."""
    def build(amz, scope, seed):
        key, prev, out = _key(amz), seed, []
        for p in [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]:
            sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz, scope, prev, EMPTY_SHA,
                             hashlib.sha256(p).hexdigest()])
            prev = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
            out.append(f"{len(p):x};chunk-signature={prev}\r\n".encode() + p + b"\r\n")
        return b"".join(out)
    return build


def test_minio_go_exchange():
    """minio-go's PutObject of 16 MiB, byte for byte the headers it sends."""
    with zh.cluster() as c:
        st, _, _ = signed(c, "PUT", "/mgo")
        assert st == 200, st
        part = os.urandom(16 << 20)
        pcrc = digest("CRC32C", part)
        comp = b64(digest("CRC32C", pcrc))  # minio-go sends it without "-1"
        for header, want in ((b64(b"\0\0\0\0"), 400), (comp, 200)):
            st, h, body = signed(c, "POST", "/mgo/obj", {"uploads": ""},
                                 {"x-amz-checksum-algorithm": "CRC32C"})
            assert st == 200, body
            assert h.get("x-amz-checksum-algorithm") == "CRC32C", h
            uid = body.split(b"<UploadId>")[1].split(b"<")[0].decode()
            st, h, body = signed(c, "PUT", "/mgo/obj", {"partNumber": "1", "uploadId": uid},
                                 {"x-amz-checksum-crc32c": b64(pcrc),
                                  "x-amz-decoded-content-length": str(len(part))},
                                 aws_chunked(part), "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
            assert st == 200, body
            assert h.get("x-amz-checksum-crc32c") == b64(pcrc), h
            etag = h["etag"]
            xml = (f"<CompleteMultipartUpload><Part><ChecksumCRC32C>{b64(pcrc)}"
                   f"</ChecksumCRC32C><ETag>{etag}</ETag><PartNumber>1</PartNumber></Part>"
                   f"</CompleteMultipartUpload>").encode()
            st, h, body = signed(c, "POST", "/mgo/obj", {"uploadId": uid},
                                 {"x-amz-checksum-crc32c": header,
                                  "content-type": "application/octet-stream"}, xml)
            assert st == want, (st, body)
            if want == 400:
                assert b"<Code>BadDigest</Code>" in body, body
                st, _, _ = signed(c, "HEAD", "/mgo/obj")
                assert st == 404, f"a refused Complete left an object ({st})"
                signed(c, "DELETE", "/mgo/obj", {"uploadId": uid})
                continue
            assert b"<Bucket>mgo</Bucket>" in body and b"<Key>obj</Key>" in body, body
            assert b"<Location>http://" in body and b"-1&quot;</ETag>" in body, body
            assert f"<ChecksumCRC32C>{comp}-1</ChecksumCRC32C>".encode() in body, body
        st, h, body = signed(c, "GET", "/mgo/obj", {"partNumber": "1"})
        assert st == 206 and body == part, (st, len(body))
        assert h["content-range"] == f"bytes 0-{len(part) - 1}/{len(part)}", h
        assert h["x-amz-mp-parts-count"] == "1", h
        st, h, body = signed(c, "GET", "/mgo/obj", {"partNumber": "2"})
        assert st == 416 and b"InvalidPartNumber" in body, (st, body)
        st, h, _ = signed(c, "HEAD", "/mgo/obj", headers={"x-amz-checksum-mode": "ENABLED"})
        assert h.get("x-amz-checksum-crc32c") == comp + "-1", h
        assert h.get("x-amz-checksum-type") == "COMPOSITE", h
        assert not any(k.startswith("zest-") for k in h), h


def test_boto3_clients():
    pys = [p for p in ("python3", "/usr/bin/python3") if shutil.which(p) and subprocess.run(
        [p, "-c", "import boto3"], capture_output=True).returncode == 0]
    assert pys, "no boto3 found (install python3-boto3)"
    with zh.cluster() as c:
        for py in pys:
            p = subprocess.run([py, "-W", "ignore", os.path.abspath(__file__), "--client",
                                c.endpoint, zh.ACCESS_KEY, zh.SECRET_KEY],
                               capture_output=True, timeout=400)
            out = p.stdout.decode() + p.stderr.decode()
            assert p.returncode == 0, f"{py}: {out[-4000:]}"
            print("   ", out.strip().splitlines()[-1], flush=True)


# ------------------------------------------------------------------ the boto3 half

def client(endpoint, ak, sk):
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    ver = tuple(int(x) for x in boto3.__version__.split(".")[:2])
    new = ver >= (1, 36)  # ChecksumType, CRC64NVME
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak,
                      aws_secret_access_key=sk, region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"},
                                    retries={"max_attempts": 1}))
    tag = f"boto3 {boto3.__version__}"
    # the older boto3 has no ChecksumType: send the header ourselves
    want_type = {}

    def add_type(request, **kw):
        if want_type.get("t"):
            request.headers["x-amz-checksum-type"] = want_type["t"]
    if not new:
        s3.meta.events.register("before-sign.s3.CreateMultipartUpload", add_type)

    def err(fn, **kw):
        try:
            fn(**kw)
        except ClientError as e:
            return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
        return None, 200

    bucket = "ck-" + boto3.__version__.replace(".", "-")
    s3.create_bucket(Bucket=bucket)
    p1, p2 = os.urandom(5 << 20), os.urandom(1000)
    size = len(p1) + len(p2)
    algs = ["CRC32", "CRC32C", "SHA1", "SHA256"] + (["CRC64NVME"] if new else [])
    done = 0
    for alg in algs:
        d1, d2 = digest(alg, p1), digest(alg, p2)
        if alg == "CRC32C":
            whole = crc32c(p2, int.from_bytes(d1, "big")).to_bytes(4, "big")
        elif alg == "CRC64NVME":
            whole = crc64nvme(p2, int.from_bytes(d1, "big")).to_bytes(8, "big")
        else:
            whole = digest(alg, p1 + p2)
        for typ in ("COMPOSITE", "FULL_OBJECT"):
            key = f"{alg}/{typ}"
            kw = {"ChecksumType": typ} if new else {}
            want_type["t"] = typ
            refused = (alg.startswith("SHA") and typ == "FULL_OBJECT") or (
                alg == "CRC64NVME" and typ == "COMPOSITE")
            if refused:
                e = err(s3.create_multipart_upload, Bucket=bucket, Key=key,
                        ChecksumAlgorithm=alg, **kw)
                assert e == ("InvalidRequest", 400), f"{tag} {key}: {e}"
                continue
            r = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm=alg, **kw)
            assert r.get("ChecksumAlgorithm") == alg, f"{tag} {key}: {r}"
            if new:
                assert r.get("ChecksumType") == typ, f"{tag} {key}: {r}"
            uid = r["UploadId"]
            if new:
                lu = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
                u = [x for x in lu if x["UploadId"] == uid]
                assert u and u[0].get("ChecksumAlgorithm") == alg, f"{tag} {key}: {lu}"
                assert u[0].get("ChecksumType") == typ, f"{tag} {key}: {lu}"
            parts = []
            for n, (data, d) in enumerate(((p1, d1), (p2, d2)), 1):
                r = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=n,
                                   Body=data, **{f"Checksum{alg}": b64(d)})
                assert r.get(f"Checksum{alg}") == b64(d), f"{tag} {key} part {n}: {r}"
                parts.append({"PartNumber": n, "ETag": r["ETag"], f"Checksum{alg}": b64(d)})
            lp = s3.list_parts(Bucket=bucket, Key=key, UploadId=uid)
            assert lp.get("ChecksumAlgorithm") == alg, f"{tag} {key}: {lp}"
            assert [p.get(f"Checksum{alg}") for p in lp["Parts"]] == [b64(d1), b64(d2)], lp
            value = composite(alg, [d1, d2]) if typ == "COMPOSITE" else b64(whole)
            wrong = (b64(whole) if typ == "COMPOSITE" else composite(alg, [d1, d2])
                     ).split("-")[0]
            e = err(s3.complete_multipart_upload, Bucket=bucket, Key=key, UploadId=uid,
                    MultipartUpload={"Parts": parts}, **{f"Checksum{alg}": wrong})
            assert e == ("BadDigest", 400), f"{tag} {key} wrong object checksum: {e}"
            assert err(s3.head_object, Bucket=bucket, Key=key)[1] == 404, f"{tag} {key}"
            bad = [dict(parts[0]), parts[1]]
            bad[0][f"Checksum{alg}"] = b64(d2)
            e = err(s3.complete_multipart_upload, Bucket=bucket, Key=key, UploadId=uid,
                    MultipartUpload={"Parts": bad})
            assert e == ("InvalidPart", 400), f"{tag} {key} wrong part checksum: {e}"
            r = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid,
                                             MultipartUpload={"Parts": parts},
                                             **{f"Checksum{alg}": value})
            assert r.get(f"Checksum{alg}") == value, f"{tag} {key}: {r} want {value}"
            assert r["Bucket"] == bucket and r["Key"] == key and r["ETag"].endswith('-2"'), r
            if new:
                assert r.get("ChecksumType") == typ, f"{tag} {key}: {r}"
            again = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid,
                                                 MultipartUpload={"Parts": parts})
            assert again["ETag"] == r["ETag"], f"{tag} {key} retried Complete: {again}"
            assert again.get(f"Checksum{alg}") == value, again
            h = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
            assert h.get(f"Checksum{alg}") == value, f"{tag} {key} HEAD: {h}"
            assert h["ContentLength"] == size
            if new:
                assert h.get("ChecksumType") == typ, f"{tag} {key} HEAD: {h}"
            g = s3.get_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
            assert g["Body"].read() == p1 + p2 and g.get(f"Checksum{alg}") == value, key
            off = 0
            for n, data in ((1, p1), (2, p2)):
                g = s3.get_object(Bucket=bucket, Key=key, PartNumber=n)
                assert g["ResponseMetadata"]["HTTPStatusCode"] == 206, g["ResponseMetadata"]
                assert g["Body"].read() == data, f"{tag} {key} part {n} bytes"
                assert g["PartsCount"] == 2 and g["ETag"] == r["ETag"], g
                assert g["ContentRange"] == f"bytes {off}-{off + len(data) - 1}/{size}", g
                h = s3.head_object(Bucket=bucket, Key=key, PartNumber=n)
                assert h["ContentLength"] == len(data) and h["PartsCount"] == 2, h
                off += len(data)
            e = err(s3.get_object, Bucket=bucket, Key=key, PartNumber=3)
            assert e == ("InvalidPartNumber", 416), f"{tag} {key} part 3: {e}"
            s3.delete_object(Bucket=bucket, Key=key)
            done += 1
    want_type["t"] = None

    # what the SDK does by itself: upload_file in parts (1.43: CRC32 on every part)
    from boto3.s3.transfer import TransferConfig
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"zest-ck-{os.getpid()}")
    blob = os.urandom(13 << 20)
    with open(path, "wb") as f:
        f.write(blob)
    try:
        s3.upload_file(path, bucket, "auto", Config=TransferConfig(
            multipart_threshold=5 << 20, multipart_chunksize=5 << 20, use_threads=False))
    finally:
        os.unlink(path)
    h = s3.head_object(Bucket=bucket, Key="auto", ChecksumMode="ENABLED")
    assert h["ContentLength"] == len(blob) and h["ETag"].endswith('-3"'), h
    got = b""
    for n in (1, 2, 3):
        g = s3.get_object(Bucket=bucket, Key="auto", PartNumber=n)
        assert g["PartsCount"] == 3, g
        got += g["Body"].read()
    assert got == blob, f"{tag} upload_file parts"
    if new:
        assert h.get("ChecksumCRC32"), f"{tag}: upload_file stored no CRC32: {h}"
        want = (b64(digest("CRC32", blob)) if h.get("ChecksumType") == "FULL_OBJECT" else
                composite("CRC32", [digest("CRC32", blob[i:i + (5 << 20)])
                                    for i in range(0, len(blob), 5 << 20)]))
        assert h["ChecksumCRC32"] == want, f"{tag} upload_file: {h} want {want}"
    s3.delete_object(Bucket=bucket, Key="auto")
    if new:
        # a part table too long for the object's 4 KiB of attrs (3.8 KB of attributes: 2 KiB
        # of user metadata, S3's most, and a long Content-Disposition; 33 runs of sizes) is
        # kept in its own record: every part must still be found
        uid = s3.create_multipart_upload(Bucket=bucket, Key="many",
                                         Metadata={"pad": "m" * 2045},
                                         ContentDisposition="d" * 1755)["UploadId"]
        pblob = os.urandom((5 << 20) + 1)
        parts = []
        for n in range(1, 34):
            r = s3.upload_part(Bucket=bucket, Key="many", UploadId=uid, PartNumber=n,
                               Body=pblob[:len(pblob) - (n & 1)])
            parts.append({"PartNumber": n, "ETag": r["ETag"]})
        s3.complete_multipart_upload(Bucket=bucket, Key="many", UploadId=uid,
                                     MultipartUpload={"Parts": parts})
        off = 0
        for n in range(1, 34):
            ln = len(pblob) - (n & 1)
            if n in (1, 2, 17, 33):
                hh = s3.head_object(Bucket=bucket, Key="many", PartNumber=n)
                assert hh["ContentLength"] == ln and hh["PartsCount"] == 33, (n, hh)
                assert hh["ContentRange"].startswith(f"bytes {off}-{off + ln - 1}/"), (n, hh)
                assert hh["Metadata"] == {"pad": "m" * 2045}, n
                assert hh.get("ContentDisposition") == "d" * 1755, n
            off += ln
        g = s3.get_object(Bucket=bucket, Key="many", PartNumber=2)
        assert g["Body"].read() == pblob, f"{tag} part 2 of the many-part object"
        s3.delete_object(Bucket=bucket, Key="many")
    # a plain object: part 1 is all of it, there is no part 2
    s3.put_object(Bucket=bucket, Key="plain", Body=b"0123456789")
    g = s3.get_object(Bucket=bucket, Key="plain", PartNumber=1)
    assert g["ResponseMetadata"]["HTTPStatusCode"] == 206 and g["Body"].read() == b"0123456789"
    assert g["ContentRange"] == "bytes 0-9/10", g
    e = err(s3.get_object, Bucket=bucket, Key="plain", PartNumber=2)
    assert e == ("InvalidPartNumber", 416), f"{tag} plain part 2: {e}"
    s3.delete_object(Bucket=bucket, Key="plain")
    s3.delete_bucket(Bucket=bucket)
    print(f"{tag}: {done} checksum uploads, upload_file "
          f"({h.get('ChecksumType', 'no type')} {h.get('ChecksumCRC32', '-')}), partNumber ok")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--client"]:
        client(*sys.argv[2:5])
        sys.exit(0)
    if not (os.path.exists(zh.DATANODE) and os.path.exists(zh.GATEWAY)):
        print("daemons not built")
        sys.exit(77)
    zh.run_tests([test_minio_go_exchange, test_boto3_clients])
