#!/usr/bin/env python3
"""zest-bench's S3 load engine against the real gateway and datanode, briefly: `s3 put` and
`s3 mixed --json` for a second each (no errors, every mixed op counted), and `admission put`
(write jobs on the engine's single requests: every job done, one record each in its CSV);
and the endpoint flags both parse alike (bad values refused with exit 2, before any
request). No throughput is asserted. Exits 77 (skip) when the daemons are not built.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402


def bench(*args, timeout=120):
    return subprocess.run([zh.BENCH, *args], capture_output=True, text=True, timeout=timeout)


def test_refusals():
    for sub in (["s3", "put"], ["admission", "put"]):
        for flag, value in (("--concurrent", "0"), ("--concurrent", "1025"),
                            ("--concurrent", "8x"), ("--obj.size", "lots")):
            p = bench(*sub, flag, value, "--host", "127.0.0.1:1", timeout=30)
            assert p.returncode == 2 and f"bad value '{value}' for {flag}" in p.stderr, \
                (sub, flag, value, p.returncode, p.stderr)
    p = bench("admission", "put", "--obj.size", "0", timeout=30)
    assert p.returncode == 2 and "bad value '0' for --obj.size" in p.stderr, p.stderr
    # no gateway there: the bucket cannot be created, said once, nothing else runs
    p = bench("admission", "put", "--host", "127.0.0.1:1", "--jobs", "1", timeout=30)
    assert p.returncode == 1 and "zest-bench admission: cannot create bucket zest-adm: HTTP 0" \
        in p.stderr, p.stderr


def test_load_and_admission():
    with zh.cluster(ec="4+2") as c, tempfile.TemporaryDirectory() as tmp:
        ep = ["--host", f"127.0.0.1:{c.gw_port}", "--access-key", zh.ACCESS_KEY,
              "--secret-key", zh.SECRET_KEY, "--obj.size", "64KiB", "--concurrent", "2"]
        p = bench("s3", "put", "--duration", "1s", "--warmup", "0.2s", *ep)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "Operation: PUT. Concurrency: 2" in p.stdout, p.stdout

        p = bench("s3", "mixed", "--duration", "1s", "--warmup", "0.2s", "--objects", "8",
                  "--json", *ep)
        assert p.returncode == 0, p.stderr[-2000:]
        j = json.loads(p.stdout)
        assert [o["operation"] for o in j["ops"]] == ["PUT", "GET", "DELETE"], j
        for o in j["ops"]:
            assert o["errors"] == 0 and o["objects"] > 0, o

        csv = os.path.join(tmp, "run.csv")
        p = bench("admission", "put", "--jobs", "24", "--label", "smoke", "--csv", csv, *ep)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "# 24 jobs of 65536 bytes, 2 writers (2 started)" in p.stdout, p.stdout
        assert "| jobs done / run | 24 / 24 |" in p.stdout, p.stdout
        with open(csv) as f:
            lines = f.read().splitlines()
        assert lines[0].startswith("# zest-bench admission label=smoke obj_size=65536"), lines[0]
        rows = [r.split(",") for r in lines[2:]]
        assert len(rows) == 24, len(rows)
        for start, last, end, attempts, _, _, status in rows:
            assert status == "200" and int(attempts) >= 1, rows
            assert float(start) <= float(last) <= float(end), rows


if __name__ == "__main__":
    if not all(os.path.exists(b) for b in (zh.DATANODE, zh.GATEWAY, zh.BENCH)):
        print("zest-bench or the daemons not built: skipping")
        sys.exit(77)
    zh.run_tests([test_refusals, test_load_and_admission])
