#!/usr/bin/env python3
"""The local link: a gateway on the datanode's host over its --unix-socket (issue 15).

- The gateway starts with `--datanode unix:PATH` and no TLS flags; boto3 PUTs (single and
  multipart) and GETs are byte-identical, and the zero-copy marshaller copies nothing.
- The datanode's TCP port keeps its mutual TLS: plaintext there is still refused.
- Only the datanode's user gets in: a gateway run as `nobody` is refused by the kernel
  (EACCES) and stores nothing (when the test runs as root and can become nobody).
- A datanode killed with SIGKILL leaves its socket file; the restarted one replaces it and
  the gateway reconnects by itself.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402

DN_CLIENT = os.environ.get("ZEST_DN_CLIENT",
                           os.path.join(zh.BUILD, "tests", "integration", "dn_client"))


def s3(c):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))


def test_good_path_over_unix_socket():
    from boto3.s3.transfer import TransferConfig
    with zh.cluster(local=True, extra_dn=["--data-io", "buffered"]) as c:  # no align copy
        st = os.lstat(c.sock)
        assert oct(st.st_mode & 0o777) == "0o700", oct(st.st_mode)
        cl = s3(c)
        cl.create_bucket(Bucket="loc")
        bodies = {"empty": b"", "small": os.urandom(1000), "mid": os.urandom(3 << 20)}
        for k, b in bodies.items():
            cl.put_object(Bucket="loc", Key=k, Body=b)
        big = os.urandom(20 << 20)
        path = os.path.join(c.root, "big")
        with open(path, "wb") as f:
            f.write(big)
        cfg = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20)
        cl.upload_file(path, "loc", "big", Config=cfg)  # 3 parts
        bodies["big"] = big
        for k, b in bodies.items():
            assert cl.get_object(Bucket="loc", Key=k)["Body"].read() == b, k
        m = zh.metrics(c.dn_metrics)
        assert zh.metric_sum(m, "zest_payload_copied_bytes_total") == 0, m
        assert m["zest_payload_received_bytes_total"] >= sum(map(len, bodies.values()))
        with open(os.path.join(c.root, "s3gw.log"), errors="replace") as f:
            assert "datanode_tls=local" in f.read()
        # the TCP port is unchanged: mutual TLS, plaintext refused
        p = subprocess.run([DN_CLIENT, "--target", f"127.0.0.1:{c.dn_port}", "--insecure",
                            "lsb"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and "ERR 14" in p.stdout + p.stderr, p


def test_other_user_refused():
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("SKIP: needs root and setpriv to run a gateway as another user")
        return
    with zh.cluster(local=True) as c:
        # the folders let anyone reach the socket file: its own mode must stop them
        os.chmod(c.root, 0o755)
        # a gateway checks its datanodes at start: as nobody it cannot, and says why
        p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                            zh.GATEWAY, "--listen", "127.0.0.1:0", "--datanode",
                            f"unix:{c.sock}", "--access-key", zh.ACCESS_KEY,
                            "--secret-key", zh.SECRET_KEY],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "Permission denied" in p.stderr, (p.returncode, p.stderr)
        # nothing was stored; the datanode's own user (the harness's gateway) gets in
        cl = s3(c)
        assert cl.list_buckets()["Buckets"] == []
        cl.create_bucket(Bucket="good")


def test_restart_replaces_stale_socket():
    with zh.cluster(local=True) as c:
        cl = s3(c)
        cl.create_bucket(Bucket="rst")
        body = os.urandom(1 << 20)
        cl.put_object(Bucket="rst", Key="k", Body=body)
        c.dn.kill9()
        assert os.path.exists(c.sock)  # SIGKILL leaves the file behind
        assert zh.curl_status(f"{c.endpoint}/rst/k") == "503"
        c.start_datanode()
        deadline = time.time() + 60
        while True:
            try:
                assert cl.get_object(Bucket="rst", Key="k")["Body"].read() == body
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)


if __name__ == "__main__":
    if not (os.access(zh.DATANODE, os.X_OK) and os.access(zh.GATEWAY, os.X_OK)):
        print(f"SKIP: {zh.DATANODE} or {zh.GATEWAY} is not built")
        sys.exit(77)
    zh.run_tests([test_good_path_over_unix_socket, test_other_user_refused,
                  test_restart_replaces_stale_socket])
