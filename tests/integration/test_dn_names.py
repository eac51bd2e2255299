#!/usr/bin/env python3
"""Issue 14: the datanode checks every name it is given, whoever calls its gRPC port.

Hand-packed protobuf messages go straight to the datanode (dn_client raw: a raw gRPC core
call, past every client-side check) with a key holding a NUL, a bucket named with invalid
UTF-8, a key over 1024 bytes, names that break S3's bucket rules, and NULs in the other
string fields. Each must be refused with INVALID_ARGUMENT, the zest code InvalidArgument
and a message naming the field or name, and leave nothing behind (no bucket, no key, no
cell file). The gateway's reserved bucket is still taken, and the gateway's ListBuckets
(boto3) still works afterwards.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402

DN_CLIENT = os.environ.get("ZEST_DN_CLIENT",
                           os.path.join(zh.BUILD, "tests", "integration", "dn_client"))
INVALID_ARGUMENT = 3  # gRPC status
ZC_INVALID = 5        # common/zc_err.h
GOOD = "names-ok"

# ------------------------------------------------------------------ protobuf by hand


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def fld(num, value):
    """A field: bytes/str/message as length-delimited, int as varint, ('f32', v) fixed32."""
    if isinstance(value, tuple):
        return varint(num << 3 | 5) + value[1].to_bytes(4, "little")
    if isinstance(value, bool) or isinstance(value, int):
        return varint(num << 3) + varint(int(value))
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def write_chunk(bucket, key, data=b"", attrs=()):
    """One WriteChunk: open, the data, commit (with attrs)."""
    op = fld(1, bucket) + fld(2, key) + fld(3, len(data)) + fld(4, True)
    m = fld(1, op) + fld(2, 0)
    if data:
        m += fld(3, data) + fld(4, ("f32", crc32c(data)))
    m += fld(5, True) + fld(6, "etag")
    for n, v in attrs:
        m += fld(7, fld(1, n) + fld(2, v))
    return m


def obj_req(bucket, key, etag=""):
    return fld(1, bucket) + fld(2, key) + (fld(3, etag) if etag else b"")


def list_req(bucket, prefix="", start_after="", delimiter=""):
    m = fld(1, bucket)
    for num, v in ((2, prefix), (3, start_after), (5, delimiter)):
        if v:
            m += fld(num, v)
    return m


def compose_req(bucket, key, parts):
    m = fld(1, bucket) + fld(2, key)
    for pb, pk in parts:
        m += fld(3, obj_req(pb, pk))
    return m + fld(5, "etag")

# ------------------------------------------------------------------ calls


def dnc(c, *args):
    p = subprocess.run([DN_CLIENT, "--target", f"127.0.0.1:{c.dn_port}", *c.client_args(), *args],
                       capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace").strip()


def raw(c, method, msg):
    return dnc(c, "raw", method, msg.hex())


def refused(c, method, msg, *wants):
    rc, out = raw(c, method, msg)
    assert rc == 1, f"{method}: {out}"
    head = f"ERR {INVALID_ARGUMENT} zest={ZC_INVALID} InvalidArgument: "
    assert out.startswith(head), f"{method}: {out}"
    for want in wants:
        assert want in out, f"{method}: want {want!r} in {out!r}"


def accepted(c, method, msg):
    rc, out = raw(c, method, msg)
    assert rc == 0 and out == "OK", f"{method}: {out}"


def cell_files(c):
    n = 0
    for d in c.drives:
        for _, _, files in os.walk(os.path.join(d, "data")):
            n += len(files)
    return n


def buckets(c):
    rc, out = dnc(c, "lsb")
    assert rc == 0, out
    return out.split()


def keys(c, bucket):
    rc, out = dnc(c, "ls", bucket)
    assert rc == 0, out
    return [ln for ln in out.splitlines() if ln.startswith(("key ", "prefix "))]

# ------------------------------------------------------------------ tests

BAD_BUCKETS = [
    (b"bad\xff\xfe", "bucket name 'bad\\xff\\xfe' has a byte other than a-z"),
    (b"caf\xc3\xa9", "bucket name 'caf\\xc3\\xa9' has a byte other than a-z"),
    (b"Bad_Bucket", "bucket name 'Bad_Bucket' has a byte other than a-z"),
    (b"ab", "bucket name 'ab' is shorter than 3 bytes"),
    (b"b" * 64, "is longer than 63 bytes"),
    (b"192.168.1.1", "is formatted as an IP address"),
    (b"-abc", "does not start and end with a letter or digit"),
    (b"a..b", "has '..', '.-' or '-.'"),
    (b".zest-other", "does not start and end with a letter or digit"),
]

BAD_KEYS = [
    (b"k" * 1025, "is longer than 1024 bytes"),
    (b"bad\xffkey", "key 'bad\\xffkey' is not valid UTF-8"),
    (b"a/../b", "has a '.' or '..' path segment"),
]


def test_nul_in_strings():
    with zh.cluster(gateway=False) as c:
        assert dnc(c, "mb", GOOD)[0] == 0
        files = cell_files(c)
        refused(c, "Write", write_chunk(GOOD, b"a\0b", b"payload"), "WriteOpen.key contains NUL")
        refused(c, "Write", write_chunk(GOOD + "\0x", b"k", b"payload"),
                "WriteOpen.bucket contains NUL")
        refused(c, "Write", write_chunk(GOOD, b"k", b"payload", [(b"content-type", b"a\0b")]),
                "Attr.value contains NUL")
        refused(c, "Stat", obj_req(GOOD, b"a\0b"), "ObjectRequest.key contains NUL")
        refused(c, "Delete", obj_req(GOOD, b"a\0"), "ObjectRequest.key contains NUL")
        refused(c, "Read", fld(1, GOOD) + fld(2, b"a\0b"), "ReadRequest.key contains NUL")
        refused(c, "List", list_req(GOOD, prefix=b"a\0"), "ListRequest.prefix contains NUL")
        refused(c, "List", list_req(GOOD, delimiter=b"\0"), "ListRequest.delimiter contains NUL")
        refused(c, "Compose", compose_req(GOOD, b"t", [(b"", b"p\0q")]),
                "ObjectRequest.key contains NUL")
        refused(c, "CreateBucket", fld(1, b"nul\0bucket"), "BucketRequest.bucket contains NUL")
        # a NUL in the payload is just a byte
        accepted(c, "Write", write_chunk(GOOD, b"nul-in-data", b"x\0y"))
        assert keys(c, GOOD) == ["key nul-in-data 3"], keys(c, GOOD)
        assert buckets(c) == [GOOD]
        assert cell_files(c) > files
        rc, out = dnc(c, "stat", GOOD, "a")
        assert rc == 1 and "NoSuchKey" in out, out


def test_bad_buckets_and_keys():
    with zh.cluster(gateway=False) as c:
        assert dnc(c, "mb", GOOD)[0] == 0
        for name, want in BAD_BUCKETS:
            for method in ("CreateBucket", "HeadBucket", "DeleteBucket"):
                refused(c, method, fld(1, name), want)
            refused(c, "Write", write_chunk(name, b"k", b"data"), want)
            refused(c, "Read", fld(1, name) + fld(2, b"k"), want)
            refused(c, "Stat", obj_req(name, b"k"), want)
            refused(c, "Delete", obj_req(name, b"k"), want)
            refused(c, "List", list_req(name), want)
            refused(c, "Compose", compose_req(name, b"t", [(GOOD, b"p")]), want)
            refused(c, "Compose", compose_req(GOOD, b"t", [(name, b"p")]), "part 1: ", want)
        for key, want in BAD_KEYS:
            # an overlong key is the rpc layer's own limit on a Write open
            refused(c, "Write", write_chunk(GOOD, key, b"data"),
                    "key longer than 1024 bytes" if len(key) > 1024 else want)
            refused(c, "Read", fld(1, GOOD) + fld(2, key), want)
            refused(c, "Stat", obj_req(GOOD, key), want)
            refused(c, "Delete", obj_req(GOOD, key), want)
            refused(c, "Compose", compose_req(GOOD, key, [(GOOD, b"p")]), want)
            refused(c, "Compose", compose_req(GOOD, b"t", [(b"", b"p"), (b"", key)]),
                    "part 2: key", want)
        refused(c, "List", list_req(GOOD, prefix=b"p\xff"), "prefix 'p\\xff' is not valid UTF-8")
        refused(c, "List", list_req(GOOD, start_after=b"s" * 1025), "is longer than 1024 bytes")
        refused(c, "List", list_req(GOOD, delimiter=b"\xc3"), "delimiter '\\xc3' is not valid")
        # nothing stored: no bucket, no key, no cell file
        assert buckets(c) == [GOOD], buckets(c)
        assert keys(c, GOOD) == [], keys(c, GOOD)
        assert cell_files(c) == 0
        # good names still work, and the gateway's reserved bucket is a datanode name
        accepted(c, "CreateBucket", fld(1, ".zest-mpu"))
        accepted(c, "Write", write_chunk(".zest-mpu", b"u/" + GOOD.encode() + b"/id", b"r"))
        accepted(c, "Write", write_chunk(GOOD, "dir/caf\u00e9.txt".encode(), b"data"))
        accepted(c, "Write", write_chunk(GOOD, b"k" * 1024, b"data"))
        accepted(c, "List", list_req(GOOD, prefix="dir/caf\u00e9".encode(), delimiter=b"/"))
        assert len(keys(c, GOOD)) == 2, keys(c, GOOD)


def test_gateway_list_buckets_after_bad_calls():
    import boto3
    from botocore.config import Config

    with zh.cluster() as c:
        s3 = boto3.client("s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
                          aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                          config=Config(retries={"max_attempts": 1}))
        s3.create_bucket(Bucket=GOOD)
        for name, want in BAD_BUCKETS[:2]:
            refused(c, "CreateBucket", fld(1, name), want)
        refused(c, "Write", write_chunk(GOOD, b"a\0b", b"x"), "WriteOpen.key contains NUL")
        names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
        assert names == [GOOD], names
        assert s3.list_objects_v2(Bucket=GOOD)["KeyCount"] == 0
        # the reserved bucket (the gateway made it) stays out of a client's reach
        assert ".zest-mpu" in buckets(c)
        try:
            s3.list_objects_v2(Bucket=".zest-mpu")
            raise AssertionError("reserved bucket listed for a client")
        except s3.exceptions.ClientError as e:
            assert e.response["Error"]["Code"] in ("InvalidBucketName", "AccessDenied"), e


if __name__ == "__main__":
    zh.run_tests([test_nul_in_strings, test_bad_buckets_and_keys,
                  test_gateway_list_buckets_after_bad_calls])
