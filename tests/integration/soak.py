#!/usr/bin/env python3
"""Soak: mixed S3 load (60% GET, 20% PUT, 20% DELETE of its own objects) through the gateway
for a while (default 10 minutes), sampling both
daemons' RSS, open file descriptors and the datanode's in-flight bytes; fails if any of
them keeps growing.

  ZEST_SOAK_SECONDS   length of the load (default 600)
  ZEST_SOAK_REPORT    where to write the samples as CSV (default: print only)

Growth test: after a warm-up fifth, the mean of the last third of the samples may exceed
the mean of the first third by at most 25% + 16 MiB for RSS and by 8 for file descriptors;
in-flight bytes must return to 0 once the load stops.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402

SECONDS = int(os.environ.get("ZEST_SOAK_SECONDS", "600"))
INTERVAL = 5


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def grows(series, slack_abs, slack_rel):
    s = series[len(series) // 5:]
    third = max(1, len(s) // 3)
    first = sum(s[:third]) / third
    last = sum(s[-third:]) / third
    return last > first * (1 + slack_rel) + slack_abs, first, last


def test_soak():
    with zh.cluster(ec="4+2") as c:
        load = subprocess.Popen(
            [zh.BENCH, "s3", "mixed", "--host", f"127.0.0.1:{c.gw_port}",
             "--access-key", zh.ACCESS_KEY, "--secret-key", zh.SECRET_KEY,
             "--obj.size", "256KiB", "--concurrent", "8", "--objects", "200",
             # as many deletes as puts, so the stored data stays flat (a mix that keeps
             # objects fills the disk within minutes and measures that instead)
             "--get-distrib", "60", "--put-distrib", "20", "--delete-distrib", "20",
             "--duration", f"{SECONDS}s", "--warmup", "0s", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rows = []
        t0 = time.time()
        while load.poll() is None:
            m = zh.metrics(c.dn_metrics)
            rows.append((time.time() - t0, rss_mib(c.dn.proc.pid), fds(c.dn.proc.pid),
                         rss_mib(c.gw.proc.pid), fds(c.gw.proc.pid),
                         zh.metric_sum(m, "zest_inflight_bytes")))
            print("t=%5.0fs datanode rss=%6.1f MiB fds=%3d  gateway rss=%6.1f MiB fds=%3d  "
                  "inflight=%d" % rows[-1], flush=True)
            time.sleep(INTERVAL)
        out, err = load.communicate()
        if load.returncode != 0:
            try:
                first = [e for op in json.loads(out)["ops"] for e in op["first_errors"]]
            except (ValueError, KeyError):
                first = out[-2000:]
            raise AssertionError(f"load failed; first errors: {first} {err[-1000:]}")
        print(out.strip())
        if os.environ.get("ZEST_SOAK_REPORT"):
            with open(os.environ["ZEST_SOAK_REPORT"], "w") as f:
                f.write("seconds,dn_rss_mib,dn_fds,gw_rss_mib,gw_fds,inflight_bytes\n")
                for r in rows:
                    f.write(",".join(str(x) for x in r) + "\n")
        time.sleep(1)
        assert zh.metric_sum(zh.metrics(c.dn_metrics), "zest_inflight_bytes") == 0, \
            "in-flight bytes did not drain after the load"
        if len(rows) >= 10:
            for name, col, a, r in (("datanode RSS", 1, 16, 0.25), ("datanode fds", 2, 8, 0),
                                    ("gateway RSS", 3, 16, 0.25), ("gateway fds", 4, 8, 0)):
                bad, first, last = grows([row[col] for row in rows], a, r)
                print(f"{name}: {first:.1f} -> {last:.1f}")
                assert not bad, f"{name} grows: {first:.1f} -> {last:.1f}"


if __name__ == "__main__":
    zh.run_tests([test_soak])
