#!/usr/bin/env python3
"""zest-prof --s3 end to end, briefly: the copy marshaller and --data-io direct through the
real gateway and datanode over mTLS, PUT and GET, 3 alternating rounds of 0.5 s. Checks the
JSON's shape and the figures that do not depend on the machine's speed: the copy ledger
(3 user-space copies per payload byte with the copy marshaller, 1 with direct, none in the
gateway, none on GET), no failed requests, CPU and RSS figures present, the ratio object;
and that a mode --s3 cannot run is refused at once; --unix runs one short round over the
datanode's Unix socket. No throughput is asserted. Exits 77
(skip) when the daemons or zest-prof are not built.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402

PROF = os.path.join(zh.BUILD, "tools", "zest-prof")


def test_put_get_ledger():
    p = subprocess.run([PROF, "--s3", "--modes", "copy,direct", "--pairs", "3",
                        "--duration", "0.5s", "--warmup", "0.3s", "--obj.size", "1MiB",
                        "--concurrent", "2", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "over mutual TLS" in p.stderr, p.stderr[-1000:]
    j = json.loads(p.stdout)
    assert j["s3"] is True and j["grpc_tls"] is True and j["rounds"] == 3, j
    assert j["modes"] == ["copy", "direct"], j["modes"]
    want_dn = {"copy": 3.0, "direct": 1.0}
    for op in ("put", "get"):
        for mode in ("copy", "direct"):
            c = j[op][mode]
            where = f"{op} {mode}"
            assert c["errors"] == 0, (where, c)
            assert c["mib_per_s"] > 0 and c["obj_per_s"] > 0, (where, c)
            assert c["p50_ms"] <= c["p99_ms"] <= c["p99.9_ms"], (where, c)
            # "all" is the median of the rounds' sums, not the sum of the medians
            assert c["cpu_s_per_gib_all"] > 0 and c["cpu_ms_per_object"] > 0, (where, c)
            assert c["cpu_s_per_gib_gateway"] > 0 and c["cpu_s_per_gib_datanode"] > 0, (where, c)
            assert c["peak_rss_mib_gateway"] > 0 and c["peak_rss_mib_datanode"] > 0, (where, c)
            assert c["copied_per_byte_gateway"] < 0.01, (where, c)
            dn = want_dn[mode] if op == "put" else 0.0
            assert abs(c["copied_per_byte_datanode"] - dn) < 1e-6, (where, c)
            threads = c["threads_cpu_s_per_gib"]
            assert any(t.startswith("gw:") for t in threads), (where, threads)
            assert any(t.startswith("dn:") for t in threads), (where, threads)
        stages = j["put"]["copy"]["copied_per_byte_by_stage"]
        for s in ("dn:gather", "dn:unpack", "dn:align"):
            assert abs(stages[s] - 1.0) < 1e-6, stages
        assert "ratio_direct" in j[op], j[op].keys()
    # direct's align copy against copy's three: a third, in every round
    assert abs(j["put"]["ratio_direct"]["copied_per_byte_datanode"] - 1 / 3) < 1e-6


def test_unix_link():
    """--unix: the gateway over the datanode's Unix socket, one short PUT round."""
    p = subprocess.run([PROF, "--s3", "--unix", "--modes", "zerocopy", "--pairs", "3",
                        "--ops", "put", "--duration", "0.5s", "--warmup", "0.3s",
                        "--obj.size", "1MiB", "--concurrent", "2", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "over its Unix socket" in p.stderr, p.stderr[-1000:]
    j = json.loads(p.stdout)
    assert j["grpc_tls"] is False and j["grpc_link"] == "unix", j
    c = j["put"]["zerocopy"]
    assert c["errors"] == 0 and c["mib_per_s"] > 0, c
    assert c["copied_per_byte_gateway"] < 0.01 and c["copied_per_byte_datanode"] == 0, c


def test_refusals():
    for args, msg in ((["--unix", "--plaintext"], "one of them"),
                      (["--modes", "discard"], "cannot run discard"),
                      (["--ops", "list"], "bad value 'list'"),
                      (["--objects", "0"], "bad value '0'")):
        p = subprocess.run([PROF, "--s3", *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and msg in p.stderr, (args, p.returncode, p.stderr)


if __name__ == "__main__":
    if not all(os.path.exists(b) for b in (zh.DATANODE, zh.GATEWAY, PROF)):
        print("zest-prof or the daemons not built: skipping")
        sys.exit(77)
    zh.run_tests([test_refusals, test_put_get_ledger, test_unix_link])
