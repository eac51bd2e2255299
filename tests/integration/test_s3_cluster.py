#!/usr/bin/env python3
"""The gateway in cluster mode (docs/cluster.md) with real parts: etcd over TLS (client
certificates required), six zest-datanode --cluster on 127.0.3.1-6 with their own
certificates (mutual TLS between every daemon), and zest-s3gw --cluster in front, driven
by boto3. Checked: bucket calls; PUT/GET/HEAD of 0, 1, 4 KiB and 5 MiB + 1 bytes with
their content type and metadata; ranges across cells, stripes and groups; multipart
uploads of three parts and of 100 (past the 63 a Complete took when it cost etcd ops per
part); listings with prefix, delimiter and pages; CopyObject (the gateway copies the
bytes: records never share cells); delete; a bucket that is not empty; then
GETs byte-identical with bad chunks in one node's cells, and while one and then two
datanodes are SIGKILLed (rebuilt from parity, counted in zest_degraded_reads_total); and
etcd down: a PUT is 503 SlowDown, nothing half-written. Exits 77 without etcd or boto3.
"""
import concurrent.futures
import glob
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3_meta_limit  # noqa: E402
import zest_harness as zh  # noqa: E402

ETCD = os.environ.get("ZEST_ETCD", "/usr/bin/etcd")
NODES = 6
CELL = 64 << 10  # small cells and groups: a 5 MiB object spans many of both
SPG = 2          # stripes per group: a group is 4 x 64 KiB x 2 = 512 KiB


def sh(*argv):
    subprocess.run(argv, check=True, timeout=60, stdout=subprocess.DEVNULL)


class Etcd:
    def __init__(self, root, certs):
        self.root, self.c = root, certs
        self.port, self.peer = zh.free_port(), zh.free_port()
        self.endpoint = f"https://127.0.0.1:{self.port}"
        self.log = open(os.path.join(root, "etcd.log"), "ab")
        c = certs
        self.proc = subprocess.Popen(
            [ETCD, "--name", "n0", "--data-dir", os.path.join(root, "etcd"),
             "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
             "--cert-file", f"{c}/etcd.pem", "--key-file", f"{c}/etcd.key",
             "--trusted-ca-file", f"{c}/ca.pem", "--client-cert-auth",
             "--listen-peer-urls", f"http://127.0.0.1:{self.peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer}",
             "--initial-cluster", f"n0=http://127.0.0.1:{self.peer}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_all(root):
    c = os.path.join(root, "certs")
    sh(zh.CERTS_SH, "ca", c)
    sh(zh.CERTS_SH, "server", c, "etcd", "IP:127.0.0.1,DNS:localhost")
    sh(zh.CERTS_SH, "client", c, "gateway")
    for i in range(1, NODES + 1):
        sh(zh.CERTS_SH, "server", c, f"dn-{i}", f"IP:127.0.3.{i},DNS:localhost")
    etcd = Etcd(root, c)
    nodes = {}
    port = zh.free_port()  # one port on six addresses
    for i in range(1, NODES + 1):
        name, addr, mport = f"dn-{i}", f"127.0.3.{i}", zh.free_port()
        drive = os.path.join(root, name, "d0")
        os.makedirs(drive, exist_ok=True)
        argv = [zh.DATANODE, "--listen", f"{addr}:{port}", "--metrics", f"127.0.0.1:{mport}",
                "--ec", "4+2", "--cell-size", str(CELL), "--stripes-per-group", str(SPG),
                "--cluster", etcd.endpoint, "--node", name, "--drive", drive,
                "--tls-ca", f"{c}/ca.pem", "--tls-cert", f"{c}/{name}.pem",
                "--tls-key", f"{c}/{name}.key"]
        deadline = time.time() + 60
        while True:  # the datanode exits at once while etcd is not up yet
            try:
                nodes[name] = zh.Daemon(argv, os.path.join(root, f"{name}.log"), mport)
                break
            except RuntimeError:
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
    gw_port, gw_metrics = zh.free_port(), zh.free_port()
    gw = zh.Daemon([zh.GATEWAY, "--listen", f"127.0.0.1:{gw_port}",
                    "--metrics", f"127.0.0.1:{gw_metrics}", "--cluster", etcd.endpoint,
                    "--access-key", zh.ACCESS_KEY, "--secret-key", zh.SECRET_KEY,
                    "--cluster-ca", f"{c}/ca.pem", "--cluster-cert", f"{c}/gateway.pem",
                    "--cluster-key", f"{c}/gateway.key"],
                   os.path.join(root, "s3gw.log"), gw_metrics)
    gw.port = gw_port
    return etcd, nodes, gw


def client(gw, retries=3):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{gw.port}",
                        aws_access_key_id=zh.ACCESS_KEY, aws_secret_access_key=zh.SECRET_KEY,
                        region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": retries, "mode": "standard"},
                                      connect_timeout=10, read_timeout=60))


def err_code(fn):
    from botocore.exceptions import ClientError
    try:
        fn()
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


def wait_for(what, cond, timeout):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def body(s3, key, rng=None, bucket="bk1"):
    kw = {"Range": rng} if rng else {}
    return s3.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


def degraded(gw):
    return zh.metrics(gw.metrics_port).get("zest_degraded_reads_total", 0)


def check_objects(s3, objs, gw):
    for k, v in objs.items():
        assert body(s3, k) == v, f"{k}: GET differs"
    big = objs["big"]
    for a, b in ((0, 0), (CELL - 1, CELL), (100, 200000), (4 * CELL * SPG - 5, 4 * CELL * SPG + 5),
                 (len(big) - 1000, len(big) - 1), (3 << 20, (3 << 20) + 3 * CELL + 17)):
        assert body(s3, "big", f"bytes={a}-{b}") == big[a:b + 1], f"range {a}-{b}"
    assert body(s3, "big", "bytes=-1000") == big[-1000:]
    assert body(s3, "big", f"bytes={len(big) - 10}-") == big[-10:]


def test_flags():
    """--cluster and --datanode together: exit 2; etcd unreachable at start: exit 1, said."""
    base = [zh.GATEWAY, "--listen", "127.0.0.1:0", "--anonymous", "--insecure"]
    p = subprocess.run(base + ["--cluster", "127.0.0.1:1", "--datanode", "127.0.0.1:2"],
                       capture_output=True, timeout=30)
    assert p.returncode == 2 and b"exclude each other" in p.stderr, p.stderr
    # it gives up on its own (the subprocess timeout is only a hang check)
    p = subprocess.run(base + ["--cluster", f"127.0.0.1:{zh.free_port()}"],
                       capture_output=True, timeout=120)
    assert p.returncode == 1 and b"cannot start in cluster mode" in p.stderr, p.stderr
    h = subprocess.run([zh.GATEWAY, "--help"], capture_output=True, timeout=10).stdout
    assert b"--cluster E1[,E2...]" in h


def promtool(port):
    if not shutil.which("promtool"):
        return
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read()
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


def test_cluster():
    if not os.path.exists(ETCD):
        print("skip: no etcd")
        sys.exit(77)
    try:
        import boto3  # noqa: F401
    except ImportError:
        print("skip: no boto3")
        sys.exit(77)
    root = tempfile.mkdtemp(prefix="zest-s3cl-")
    etcd = nodes = gw = None
    ok = False
    try:
        etcd, nodes, gw = start_all(root)
        # every view complete first: a coordinator that sees five places two cells of a
        # group on one node, and two dead nodes would then lose data
        for d in [gw] + list(nodes.values()):
            wait_for("6 live nodes in every view",
                     lambda: zh.metrics(d.metrics_port).get("zest_cluster_live_nodes") == NODES,
                     60)
        s3 = client(gw)
        # buckets
        s3.create_bucket(Bucket="bk1")
        s3.create_bucket(Bucket="bk1")  # us-east-1: 200 for a bucket one owns
        s3.head_bucket(Bucket="bk1")
        assert "bk1" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
        assert err_code(lambda: s3.head_bucket(Bucket="nope")) in ("404", "NoSuchBucket")
        s3_meta_limit.check(s3, "bk1")
        # objects, with their attributes
        r = random.Random(14)
        objs = {"one": b"x", "4k": r.randbytes(4096),
                "big": r.randbytes((5 << 20) + 1)}
        for k, v in objs.items():
            s3.put_object(Bucket="bk1", Key=k, Body=v, ContentType="application/x-zest",
                          Metadata={"color": "blue"})
        for k, v in objs.items():
            h = s3.head_object(Bucket="bk1", Key=k)
            assert h["ContentLength"] == len(v), k
            assert h["ETag"] == '"%s"' % hashlib.md5(v).hexdigest(), k
            assert h["ContentType"] == "application/x-zest", k
            assert h["Metadata"] == {"color": "blue"}, k
        assert err_code(lambda: s3.head_object(Bucket="bk1", Key="nope")) == "404"
        assert err_code(lambda: s3.get_object(Bucket="bk1", Key="nope")) == "NoSuchKey"
        # multipart: three parts
        up = s3.create_multipart_upload(Bucket="bk1", Key="mpu")["UploadId"]
        parts, whole = [], b""
        for n, size in ((1, 5 << 20), (2, 5 << 20), (3, 1024)):
            data = r.randbytes(size)
            whole += data
            e = s3.upload_part(Bucket="bk1", Key="mpu", UploadId=up, PartNumber=n, Body=data)
            parts.append({"PartNumber": n, "ETag": e["ETag"]})
        s3.complete_multipart_upload(Bucket="bk1", Key="mpu", UploadId=up,
                                     MultipartUpload={"Parts": parts})
        objs["mpu"] = whole
        assert s3.head_object(Bucket="bk1", Key="mpu")["ETag"].endswith('-3"')
        check_objects(s3, objs, gw)
        assert body(s3, "mpu", "bytes=%d-%d" % ((5 << 20) - 7, (5 << 20) + 7)) == \
            whole[(5 << 20) - 7:(5 << 20) + 8]  # across two parts' extents
        # multipart of 100 parts (5 MiB, S3's minimum, but the last): past the 63 parts a
        # Complete took when it cost etcd ops per part (--max-txn-ops 128 by default)
        up = s3.create_multipart_upload(Bucket="bk1", Key="mpu100")["UploadId"]
        base = r.randbytes(5 << 20)
        chunks = [str(n).encode().rjust(8, b"0") + base[8:] for n in range(1, 100)] + [b"end"]

        def part(n):
            e = s3.upload_part(Bucket="bk1", Key="mpu100", UploadId=up, PartNumber=n,
                               Body=chunks[n - 1])
            return {"PartNumber": n, "ETag": e["ETag"]}
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            parts = list(ex.map(part, range(1, 101)))
        s3.complete_multipart_upload(Bucket="bk1", Key="mpu100", UploadId=up,
                                     MultipartUpload={"Parts": parts})
        whole = b"".join(chunks)
        assert s3.head_object(Bucket="bk1", Key="mpu100")["ETag"].endswith('-100"')
        got = body(s3, "mpu100")
        assert len(got) == len(whole) and got == whole
        assert err_code(lambda: s3.list_parts(Bucket="bk1", Key="mpu100",
                                              UploadId=up)) == "NoSuchUpload"
        del whole, got, chunks
        s3.delete_object(Bucket="bk1", Key="mpu100")
        # listings
        for k in ("d/a/1", "d/a/2", "d/b/1", "d/c"):
            s3.put_object(Bucket="bk1", Key=k, Body=k.encode())
        l = s3.list_objects_v2(Bucket="bk1", Prefix="d/", Delimiter="/")
        assert [p["Prefix"] for p in l["CommonPrefixes"]] == ["d/a/", "d/b/"]
        assert [o["Key"] for o in l["Contents"]] == ["d/c"]
        l = s3.list_objects_v2(Bucket="bk1", Prefix="d/a/")
        assert [o["Key"] for o in l["Contents"]] == ["d/a/1", "d/a/2"]
        assert l["Contents"][0]["Size"] == 5
        seen, tok = [], None
        while True:
            kw = {"ContinuationToken": tok} if tok else {}
            l = s3.list_objects_v2(Bucket="bk1", Prefix="d/", Delimiter="/", MaxKeys=1, **kw)
            seen += [p["Prefix"] for p in l.get("CommonPrefixes", [])]
            seen += [o["Key"] for o in l.get("Contents", [])]
            if not l["IsTruncated"]:
                break
            tok = l["NextContinuationToken"]
        assert seen == ["d/a/", "d/b/", "d/c"], seen
        top = s3.list_objects_v2(Bucket="bk1", Delimiter="/")
        assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["d/"]
        assert sorted(o["Key"] for o in top["Contents"]) == sorted(objs)
        # copy: the gateway streams the bytes
        s3.copy_object(Bucket="bk1", Key="big-copy", CopySource={"Bucket": "bk1", "Key": "big"})
        assert body(s3, "big-copy") == objs["big"]
        # delete, and a bucket that is not empty
        s3.delete_object(Bucket="bk1", Key="big-copy")
        assert err_code(lambda: s3.get_object(Bucket="bk1", Key="big-copy")) == "NoSuchKey"
        s3.delete_object(Bucket="bk1", Key="big-copy")  # again: 204
        s3.create_bucket(Bucket="bk2")
        s3.put_object(Bucket="bk2", Key="k", Body=b"v")
        assert err_code(lambda: s3.delete_bucket(Bucket="bk2")) == "BucketNotEmpty"
        s3.delete_object(Bucket="bk2", Key="k")
        s3.delete_bucket(Bucket="bk2")
        assert err_code(lambda: s3.head_bucket(Bucket="bk2")) in ("404", "NoSuchBucket")
        # a bad chunk: every cell 0 on dn-1 with a byte flipped is read around (the node
        # answers DATA_LOSS for the chunk), then put back
        assert degraded(gw) == 0
        saved = {}
        for f in glob.glob(os.path.join(root, "dn-1", "d0", "data", "*", "*.*.0")):
            with open(f, "r+b") as fh:
                data = fh.read()
                if data:
                    saved[f] = data
                    fh.seek(len(data) // 2)
                    fh.write(bytes([data[len(data) // 2] ^ 0xFF]))
        assert saved, "dn-1 holds no cell 0"
        check_objects(s3, objs, gw)
        assert degraded(gw) > 0, "no degraded read counted for the bad chunks"
        for f, data in saved.items():
            with open(f, "r+b") as fh:
                fh.write(data)
        # degraded reads: one node, then two, SIGKILLed
        for name in ("dn-2", "dn-5"):
            before = degraded(gw)
            nodes[name].kill9()
            check_objects(s3, objs, gw)
            assert degraded(gw) > before, f"no degraded read counted after {name} died"
        promtool(gw.metrics_port)
        # an empty object (no extent, no cell)
        s3.put_object(Bucket="bk1", Key="empty", Body=b"", Metadata={"color": "none"})
        assert body(s3, "empty") == b""
        h = s3.head_object(Bucket="bk1", Key="empty")
        assert h["ContentLength"] == 0 and h["Metadata"] == {"color": "none"}
        # etcd down: writes are refused with 503, never half done
        etcd.stop()
        s3n = client(gw, retries=1)
        assert err_code(lambda: s3n.put_object(Bucket="bk1", Key="late", Body=b"z")) in (
            "SlowDown", "503", "ServiceUnavailable")
        ok = True
    finally:
        rcs = []
        for d in [gw] + list((nodes or {}).values()):
            if d is not None and d.proc.poll() is None:
                rcs.append((d.log_path, d.stop()))
        if etcd:
            etcd.stop()
        if not ok:
            for f in sorted(os.listdir(root)):
                if f.endswith(".log"):
                    with open(os.path.join(root, f), "rb") as fh:
                        tail = fh.read()[-4000:].decode(errors="replace")
                    sys.stderr.write(f"----- {f} (tail) -----\n{tail}\n")
        bad = [(p, rc) for p, rc in rcs if rc != 0]
        if ok and bad:
            raise AssertionError(f"daemons exited non-zero: {bad}")
        if ok and not os.environ.get("ZEST_KEEP"):
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    zh.run_tests([test_flags, test_cluster])
