#!/usr/bin/env python3
"""Mutual TLS between the gateway, the tools and the datanode (issue 14).

- The datanode refuses to start without --tls-ca/--tls-cert/--tls-key or --insecure, and
  with a key that is not its certificate's; the gateway likewise without --cluster-* or
  --insecure.
- Plaintext etcd only with --insecure: zest-datanode --cluster and zest-s3gw --cluster given
  a plaintext (scheme-less or http://) etcd endpoint with their TLS files refuse to start
  (exit 2, the endpoint and --insecure named), before dialling anything.
- A datanode over mTLS refuses, and stores nothing for: plaintext (dn_client --insecure),
  a client certificate from another CA, and a TLS client without a certificate (Python's
  ssl: the handshake ends with the server's alert).
- A gateway whose datanode comes back with a certificate from another CA answers 503 at
  once (the datanode would accept the gateway: it trusts both CAs), and nothing hangs.
- The good path: PUT and GET through the gateway, and dn_client, over mTLS.
"""
import os
import socket
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402

DN_CLIENT = os.environ.get("ZEST_DN_CLIENT",
                           os.path.join(zh.BUILD, "tests", "integration", "dn_client"))


def dnc(c, tls_args, *args):
    p = subprocess.run([DN_CLIENT, "--target", f"127.0.0.1:{c.dn_port}", *tls_args,
                        *map(str, args)], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.strip() + p.stderr.strip()


def other_ca():
    """A second, unrelated cluster CA with its own datanode and client certificates."""
    return zh.make_certs(tempfile.mkdtemp(prefix="zest-certs-other-", dir=zh.certs()["dir"]))


def test_datanode_needs_security_flags():
    root = tempfile.mkdtemp(prefix="zest-it-", dir=zh.certs()["dir"])  # removed with the certs
    drives = [a for i in range(6) for a in ("--drive", os.path.join(root, f"d{i}"))]
    p = subprocess.run([zh.DATANODE, *drives], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, (p.returncode, p.stderr)
    for word in ("--tls-ca", "--tls-cert", "--tls-key", "--insecure"):
        assert word in p.stderr, p.stderr
    c = zh.certs()
    bad = ["--tls-ca", c["ca"], "--tls-cert", c["dn_cert"], "--tls-key", c["cl_key"]]
    p = subprocess.run([zh.DATANODE, *drives, *bad], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and c["cl_key"] in p.stderr and "does not belong" in p.stderr, \
        p.stderr
    p = subprocess.run([zh.DATANODE, *drives, "--tls-ca", c["ca"]], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 2 and "needs all of" in p.stderr, p.stderr
    p = subprocess.run([zh.GATEWAY, "--listen", "127.0.0.1:0", "--anonymous",
                        "--datanode", "127.0.0.1:1"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "--cluster-ca" in p.stderr and "--insecure" in p.stderr, \
        p.stderr
    p = subprocess.run([zh.GATEWAY, "--listen", "127.0.0.1:0", "--anonymous",
                        "--datanode", "127.0.0.1:1", "--cluster-ca", "/nonexistent.pem",
                        "--cluster-cert", c["cl_cert"], "--cluster-key", c["cl_key"]],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "/nonexistent.pem" in p.stderr, p.stderr


def test_plaintext_etcd_needs_insecure():
    root = tempfile.mkdtemp(prefix="zest-it-", dir=zh.certs()["dir"])  # removed with the certs
    c = zh.certs()
    dn_tls = ["--tls-ca", c["ca"], "--tls-cert", c["dn_cert"], "--tls-key", c["dn_key"]]
    gw_tls = ["--cluster-ca", c["ca"], "--cluster-cert", c["cl_cert"],
              "--cluster-key", c["cl_key"]]
    for eps in ("127.0.0.1:1", "http://127.0.0.1:1", "https://127.0.0.1:1,127.0.0.1:2"):
        p = subprocess.run([zh.DATANODE, "--drive", os.path.join(root, "d0"), *dn_tls,
                            "--cluster", eps, "--node", "dn-1"],
                           capture_output=True, text=True, timeout=10)
        assert p.returncode == 2, (eps, p.returncode, p.stderr)
        assert f"etcd endpoint in --cluster {eps} is plaintext" in p.stderr, p.stderr
        assert "--insecure for plaintext etcd" in p.stderr, p.stderr
        p = subprocess.run([zh.GATEWAY, "--listen", "127.0.0.1:0", "--anonymous", *gw_tls,
                            "--cluster", eps], capture_output=True, text=True, timeout=10)
        assert p.returncode == 2, (eps, p.returncode, p.stderr)
        assert f"etcd endpoint in --cluster {eps} is plaintext" in p.stderr, p.stderr
        assert "--insecure for plaintext etcd" in p.stderr, p.stderr


def test_datanode_refuses_unauthenticated_clients():
    with zh.cluster(gateway=False, tls=True) as c:
        o = other_ca()
        # the other cluster's client certificate, with a CA bundle that trusts our server
        bundle = os.path.join(o["dir"], "both.pem")
        with open(bundle, "w") as f:
            f.write(open(zh.certs()["ca"]).read() + open(o["ca"]).read())
        foreign = ["--cluster-ca", bundle, "--cluster-cert", o["cl_cert"],
                   "--cluster-key", o["cl_key"]]
        for name, args in (("plaintext", ["--insecure"]), ("other CA", foreign)):
            rc, out = dnc(c, args, "mb", "evil")
            assert rc == 1 and "ERR 14" in out, (name, rc, out)

        # TLS without a client certificate: refused in the handshake
        ctx = ssl.create_default_context(cafile=zh.certs()["ca"])
        ctx.set_alpn_protocols(["h2"])
        refused = None
        with socket.create_connection(("127.0.0.1", c.dn_port), timeout=10) as raw:
            try:
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    # TLS 1.3: the client's handshake is over before the server has checked
                    # the (missing) certificate; its verdict arrives as an alert
                    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                    # an accepting server would answer with its SETTINGS frame
                    data = s.recv(100)
                    refused = "closed without a byte" if data == b"" else None
            except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
                refused = str(e)
        assert refused, "a TLS client without a certificate got an HTTP/2 answer"

        # nothing was stored: the good client sees no bucket
        rc, out = dnc(c, c.client_args(), "lsb")
        assert rc == 0 and "evil" not in out, out
        rc, out = dnc(c, c.client_args(), "mb", "good")
        assert rc == 0, out
        rc, out = dnc(c, c.client_args(), "lsb")
        assert rc == 0 and out.split() == ["good"], out


def test_gateway_refuses_foreign_datanode():
    o = other_ca()
    # the datanode trusts both CAs (so it would accept the gateway) but shows a certificate
    # signed by the other one, which the gateway does not trust
    bundle = os.path.join(o["dir"], "both.pem")
    with open(bundle, "w") as f:
        f.write(open(zh.certs()["ca"]).read() + open(o["ca"]).read())
    dn = ["--tls-ca", bundle, "--tls-cert", o["dn_cert"], "--tls-key", o["dn_key"]]
    # refused calls fail fast: with the gateway's stream timeout at an hour, only the
    # refusal can end them (curl's 120 s is a hang check)
    with zh.cluster(tls=True, extra_gw=["--stream-timeout", "3600s"]) as c:
        # the gateway needs its datanodes at start; swap in the foreign one afterwards, on
        # the same port (extra_dn comes after the harness's --tls-* flags; the last wins)
        assert zh.curl_status("-X", "PUT", f"{c.endpoint}/before") == "200"
        assert c.dn.stop() == 0
        c.extra_dn = dn
        c.start_datanode()
        assert zh.curl_status("-X", "PUT", f"{c.endpoint}/bkt", timeout=120) == "503"
        assert zh.curl_status("-X", "PUT", "--data-binary", "hello", f"{c.endpoint}/bkt/k",
                              timeout=120) == "503"
        assert zh.curl_status(f"{c.endpoint}/bkt/k", timeout=120) == "503"
        # the datanode itself is fine: a client of its own CA gets in, and nothing was stored
        own = ["--cluster-ca", o["ca"], "--cluster-cert", o["cl_cert"], "--cluster-key",
               o["cl_key"]]
        rc, out = dnc(c, own, "lsb")
        assert rc == 0 and "bkt" not in out.split() and "before" in out.split(), out
        with open(os.path.join(c.root, "s3gw.log"), errors="replace") as f:
            assert "certificate verify failed" in f.read()


def test_good_path_over_mtls():
    with zh.cluster(tls=True, extra_dn=["--data-io", "buffered"]) as c:  # no align copy
        assert zh.curl_status("-X", "PUT", f"{c.endpoint}/good") == "200"
        body = os.urandom(3 << 20)
        path = os.path.join(c.root, "body")
        with open(path, "wb") as f:
            f.write(body)
        assert zh.curl_status("-X", "PUT", "--data-binary", f"@{path}", f"{c.endpoint}/good/k") == "200"
        out = os.path.join(c.root, "out")
        p = subprocess.run(["curl", "-s", "--max-time", "20", "--aws-sigv4", "aws:amz:us-east-1:s3",
                            "--user", f"{zh.ACCESS_KEY}:{zh.SECRET_KEY}",
                            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-o", out,
                            f"{c.endpoint}/good/k"], timeout=30)
        assert p.returncode == 0
        with open(out, "rb") as f:
            assert f.read() == body
        m = zh.metrics(c.dn_metrics)
        # zero-copy holds over TLS: gRPC decrypts into its own slices, which we parse in place
        assert zh.metric_sum(m, "zest_payload_copied_bytes_total") == 0, m
        assert m["zest_payload_received_bytes_total"] >= len(body)
        rc, out = dnc(c, c.client_args(), "ls", "good")
        assert rc == 0 and "key k " in out, out
        with open(os.path.join(c.root, "datanode.log")) as f:
            assert "tls=mtls" in f.read()


if __name__ == "__main__":
    if not (os.access(zh.DATANODE, os.X_OK) and os.access(zh.GATEWAY, os.X_OK)):
        print(f"SKIP: {zh.DATANODE} or {zh.GATEWAY} is not built")
        sys.exit(77)
    zh.run_tests([test_datanode_needs_security_flags,
                  test_plaintext_etcd_needs_insecure,
                  test_datanode_refuses_unauthenticated_clients,
                  test_gateway_refuses_foreign_datanode,
                  test_good_path_over_mtls])
