#!/usr/bin/env python3
"""`make cluster` (tools/zest-cluster.sh) for a few seconds, in a folder of its own
(ZEST_CLUSTER_DIR): etcd, six datanodes on 127.0.0.11-16 and the gateway come up over
mutual TLS with the script's own CA; each datanode's certificate names its address and
localhost and is good for server and client use, the gateway's for client use; the six
register in etcd; etcd serves only TLS and refuses in the handshake a client without a
certificate of the CA (curl, etcdctl), and answers one with the script's etcdctl certificate;
boto3 puts and gets an object through the gateway (the gateway reaches
the datanodes only over mTLS; a gateway built without --cluster is not started, since the
datanodes coordinate every Write, and the round trip is left out); SIGTERM stops every
daemon and the script exits 0.

The script binds fixed addresses (etcd 127.0.1.1:2379/2380, datanodes 127.0.0.1N:7480/7481,
gateway metrics 127.0.0.1:9001): when any is taken (someone's `make cluster` or `make run`)
the test is skipped (77) rather than fight over it. Exits 77 without etcd, openssl or curl.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO, "tools", "zest-cluster.sh")
FIXED = ([("127.0.1.1", 2379), ("127.0.1.1", 2380), ("127.0.0.1", 9001)] +
         [(f"127.0.0.1{n}", p) for n in range(1, 7) for p in (7480, 7481)])


def free(addr):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "taken"
    try:
        s.bind(addr)
        return True
    except OSError:
        return False
    finally:
        s.close()


def ext(pem, name):
    return subprocess.run(["openssl", "x509", "-in", pem, "-noout", "-ext", name],
                          capture_output=True, text=True, check=True, timeout=10).stdout


def etcd_locked(certs, text):
    """etcd serves TLS only and refuses a client without a certificate of the CA, in the
    handshake; with the etcdctl certificate the script made, it answers."""
    ca = os.path.join(certs, "ca.pem")
    pem = os.path.join(certs, "etcd-1.pem")
    san = ext(pem, "subjectAltName")
    assert "IP Address:127.0.1.1" in san, san
    eku = ext(pem, "extendedKeyUsage")
    assert "Server Authentication" in eku and "Client Authentication" in eku, eku
    assert "etcd          https://127.0.1.1:2379 (1 member(s))" in text, text
    assert "client certificates of the CA required" in text, text
    mine = ["--cert", os.path.join(certs, "etcdctl.pem"),
            "--key", os.path.join(certs, "etcdctl.key")]
    assert f"--cacert {ca} {' '.join(mine)}" in text, text  # the etcdctl hint

    def curl(url, *args):
        return subprocess.run(["curl", "-sS", "-f", "-m", "10", *args, url],
                              capture_output=True, text=True, timeout=30)
    plain = curl("http://127.0.1.1:2379/health")
    assert plain.returncode != 0, plain
    # refused in or right after the TLS handshake (35, 55, 56 as curl sees the alert), not
    # unreachable (7) nor answered with an HTTP error (22)
    nocert = curl("https://127.0.1.1:2379/health", "--cacert", ca)
    assert nocert.returncode not in (0, 7, 22, 28), nocert
    good = curl("https://127.0.1.1:2379/health", "--cacert", ca, *mine)
    assert good.returncode == 0 and '"health":"true"' in good.stdout, good
    if shutil.which("etcdctl"):
        def ctl(*tls):
            return subprocess.run(["etcdctl", "--endpoints", "https://127.0.1.1:2379",
                                   "--dial-timeout", "5s", "--command-timeout", "5s", *tls,
                                   "get", "--prefix", "/zest/nodes/", "--keys-only"],
                                  env=dict(os.environ, ETCDCTL_API="3"), capture_output=True,
                                  text=True, timeout=60)
        refused = ctl("--cacert", ca)
        assert refused.returncode != 0 and "/zest/nodes/" not in refused.stdout, refused
        keys = [k for k in ctl("--cacert", ca, *mine).stdout.splitlines() if k]
        assert keys == [f"/zest/nodes/dn-{n}" for n in range(1, 7)], keys


def s3_round_trip(root, gw_port):
    """boto3 through the gateway: a bucket, six 1 MiB objects, read back."""
    with open(os.path.join(root, "log", "s3gw.log"), errors="replace") as f:
        assert "datanode_tls=mtls" in f.read()

    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{gw_port}",
                      aws_access_key_id=zh.ACCESS_KEY, aws_secret_access_key=zh.SECRET_KEY,
                      region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"}, read_timeout=30))
    s3.create_bucket(Bucket="clu")
    body = os.urandom(1 << 20)
    for i in range(6):  # the keys have several coordinators
        s3.put_object(Bucket="clu", Key=f"k{i}", Body=body)
    for i in range(6):
        assert s3.get_object(Bucket="clu", Key=f"k{i}")["Body"].read() == body


def main():
    if not shutil.which(os.environ.get("ZEST_ETCD", "etcd")) or not shutil.which("openssl") \
            or not shutil.which("curl"):
        print("skip: etcd, openssl or curl not installed")
        sys.exit(77)
    busy = [a for a in FIXED if not free(a)]
    if busy:
        print(f"skip: addresses in use: {busy}")
        sys.exit(77)
    root = tempfile.mkdtemp(prefix="zest-cluster-")
    gw_port = zh.free_port()
    env = dict(os.environ, ZEST_CLUSTER_DIR=root, ZEST_LISTEN=f"127.0.0.1:{gw_port}",
               ZEST_ACCESS_KEY=zh.ACCESS_KEY, ZEST_SECRET_KEY=zh.SECRET_KEY)
    env.pop("ZEST_INSECURE", None)
    out = open(os.path.join(root, "script.out"), "w+")
    p = subprocess.Popen([SCRIPT, zh.BUILD], env=env, stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True)
    ok = False
    try:
        deadline = time.time() + 60
        text = ""
        while "registered in /zest/nodes/ now" not in text:
            assert p.poll() is None, "zest-cluster.sh exited early"
            assert time.time() < deadline, "the cluster did not come up"
            time.sleep(0.3)
            out.seek(0)
            text = out.read()
        certs = os.path.join(root, "certs")
        assert f"mutual TLS, CA and certificates in {certs}/" in text, text
        assert "dn-1 dn-2 dn-3 dn-4 dn-5 dn-6" in text, text
        for n in range(1, 7):
            pem = os.path.join(certs, f"dn-{n}.pem")
            san = ext(pem, "subjectAltName")
            assert f"IP Address:127.0.0.1{n}" in san and "DNS:localhost" in san, san
            eku = ext(pem, "extendedKeyUsage")
            assert "Server Authentication" in eku and "Client Authentication" in eku, eku
            subprocess.run(["openssl", "verify", "-CAfile", os.path.join(certs, "ca.pem"), pem],
                           check=True, capture_output=True, timeout=10)
        eku = ext(os.path.join(certs, "gateway.pem"), "extendedKeyUsage")
        assert "Client Authentication" in eku and "Server" not in eku, eku
        etcd_locked(certs, text)
        if "this zest-s3gw has no --cluster" in text:
            # the datanodes coordinate every Write: a single-node gateway cannot serve
            print("no S3 round trip: the gateway has no --cluster on this build")
        else:
            s3_round_trip(root, gw_port)
        ok = True
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
        try:
            rc = p.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
            ok = False
        out.seek(0)
        if not ok or rc != 0:
            print(out.read())
            for name in sorted(os.listdir(os.path.join(root, "log"))):
                with open(os.path.join(root, "log", name), errors="replace") as f:
                    print(f"--- {name}\n{f.read()[-3000:]}")
        out.close()
    assert rc == 0, f"zest-cluster.sh exited {rc}"
    # every daemon is gone: the fixed addresses are free again
    assert all(free(a) for a in FIXED), [a for a in FIXED if not free(a)]
    shutil.rmtree(root, ignore_errors=True)
    print("ok   test_zest_cluster")


if __name__ == "__main__":
    main()
