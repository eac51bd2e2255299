#!/usr/bin/env python3
"""The storage-aware admission experiment (issue 15, item 7), end to end on loopback.

    tools/bench/admission.py BUILD_DIR [--shape overload|slow] [--jobs N] [--concurrent N]
                             [--obj-size SIZE] [--rounds R] [--delay D] [--out DIR]
                             [--svg FILE] [--gw-workers N]

For each round, alternately with admission on (the datanode's defaults, L1/L2/L3 =
50 ms/200 ms/1 s) and off (--admission-l1 0 --admission-l2 0 --admission-l3 0), it starts a
fresh zest-datanode (4+2, six drive folders in a new temp dir on the machine's disk) and a
zest-s3gw in front of it (tests/integration/zest_harness.py: real daemons, mTLS between
them), runs `zest-bench admission put` (--jobs PUTs from --concurrent writers, each 503
SlowDown retried with backoff), samples the datanode's /metrics every second (admission
level, parked Writes, each drive's mean write latency), stops everything and removes the
folders. Then `zest-bench admission report` prints the runs side by side and, with --svg,
charts the first on/off pair.

Shapes: `overload` is plain overload (nothing slowed: more writers than the drives and two
shared cores absorb). `slow` slows drive 0: it needs a TEST BUILD (meson -Dtest_faults=true,
as the Makefile's build; never installed), whose zest-datanode reads
ZEST_FAULTS=drive.write/0=delay:DELAY (common/zc_fault.h), which delays each write of
drive 0 by DELAY on its ring thread.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
OFF = ["--admission-l1", "0", "--admission-l2", "0", "--admission-l3", "0"]


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def parse(text):
    """{series name with labels: value} of a Prometheus text page."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            try:
                out[name] = float(v)
            except ValueError:
                pass
    return out


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024)
    except OSError:
        pass
    return None


def sampler(port, stop, samples, ndrives, pids):
    """Every second: admission level, parked Writes, each drive's mean write latency since
    the last sample (from the zest_drive_write_seconds histogram's sum and count), and the
    daemons' resident memory."""
    t0, last = time.monotonic(), None
    while not stop.wait(1.0):
        try:
            m = parse(metrics(port))
        except OSError:
            continue
        cur = [(m.get(f'zest_drive_write_seconds_sum{{drive="{d}"}}', 0),
                m.get(f'zest_drive_write_seconds_count{{drive="{d}"}}', 0)) for d in range(ndrives)]
        lat = None
        if last:
            lat = [round((c[0] - p[0]) / (c[1] - p[1]) * 1000, 1) if c[1] > p[1] else None
                   for c, p in zip(cur, last)]
        last = cur
        samples.append({"t": round(time.monotonic() - t0, 1),
                        "level": m.get("zest_admission_level"),
                        "parked": m.get("zest_admission_parked"),
                        "inflight_mib": round(m.get("zest_inflight_bytes", 0) / 2**20, 1),
                        "drive_write_ms": lat,
                        "rss_mib": [rss_mib(p) for p in pids]})


def one_run(zh, args, label, admission, out_dir):
    extra_dn = [] if admission else list(OFF)
    if args.shape == "slow":
        os.environ["ZEST_FAULTS"] = f"drive.write/0=delay:{args.delay}"
    try:
        root = tempfile.mkdtemp(prefix="zest-adm-", dir=args.drives) if args.drives else None
        c = zh.Cluster(extra_dn=extra_dn, extra_gw=["--workers", str(args.gw_workers)],
                       root=root)
    finally:
        os.environ.pop("ZEST_FAULTS", None)
    csv = os.path.join(out_dir, f"{label}.csv")
    samples, stop, rc = [], threading.Event(), None
    th = threading.Thread(target=sampler, args=(c.dn_metrics, stop, samples, c.k + c.m,
                                                 (c.dn.proc.pid, c.gw.proc.pid)))
    try:
        th.start()
        cmd = [os.path.join(args.build, "tools", "zest-bench"), "admission", "put",
               "--host", f"127.0.0.1:{c.gw_port}", "--access-key", zh.ACCESS_KEY,
               "--secret-key", zh.SECRET_KEY, "--jobs", str(args.jobs),
               "--concurrent", str(args.concurrent), "--obj.size", args.obj_size,
               "--label", label, "--csv", csv]
        print("$", " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, timeout=args.timeout).returncode
    finally:
        stop.set()
        th.join()
        rcs = []
        for d in (c.gw, c.dn):
            try:
                rcs.append((os.path.basename(d.argv[0]), d.stop()))
            except RuntimeError as e:  # ignored SIGTERM: killed, and said so
                d.kill9()
                rcs.append((os.path.basename(d.argv[0]), str(e)))
        if rc != 0 or any(r != 0 for _, r in rcs):
            c.dump_logs()
        for log in ("datanode.log", "s3gw.log"):
            if os.path.exists(os.path.join(c.root, log)):
                shutil.copy(os.path.join(c.root, log), os.path.join(out_dir, f"{label}.{log}"))
        shutil.rmtree(c.root, ignore_errors=True)
    with open(os.path.join(out_dir, f"{label}.metrics.json"), "w") as f:
        json.dump(samples, f, indent=0)
    for s in samples[::max(1, len(samples) // 12)]:
        print(f"  {label} t={s['t']}s level={s['level']} parked={s['parked']} "
              f"inflight={s['inflight_mib']}MiB drive_write_ms={s['drive_write_ms']} "
              f"rss_mib(dn,gw)={s['rss_mib']}")
    print(f"  {label}: zest-bench rc={rc} daemons {rcs}", flush=True)
    return csv


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build", help="meson build dir")
    p.add_argument("--shape", choices=["overload", "slow"], default="overload")
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--concurrent", type=int, default=128)
    p.add_argument("--obj-size", default="1MiB")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--delay", default="20ms", help="slow shape: per-write delay of drive 0")
    p.add_argument("--gw-workers", type=int, default=256,
                   help="zest-s3gw --workers (default 256, its maximum, so the overload "
                        "reaches the datanode instead of waiting for a gateway worker)")
    p.add_argument("--drives", default=None,
                   help="make the drive folders under this folder (default: a temp dir in "
                        "$TMPDIR, the machine's disk here); /dev/shm for tmpfs")
    p.add_argument("--timeout", type=int, default=600, help="seconds per run")
    p.add_argument("--out", default=None, help="folder for the CSVs (default a temp dir)")
    p.add_argument("--svg", default=None, help="chart the first on/off pair here")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    os.environ["ZEST_BUILD"] = args.build
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
    import zest_harness as zh  # noqa: E402 (needs ZEST_BUILD first)
    if args.shape == "slow" and not zh.faults_built(args.build):
        sys.exit(f"admission.py: --shape slow needs a test build: {args.build} was not "
                 "configured with -Dtest_faults=true")

    out_dir = args.out or os.path.join("/tmp", f"zest-adm-{os.getpid()}")
    os.makedirs(out_dir, exist_ok=True)
    print(f"# admission.py {' '.join(sys.argv[1:])}; "
          f"commit {subprocess.run(['git', '-C', HERE, 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}; "
          f"{os.cpu_count()} CPUs; load {open('/proc/loadavg').read().split()[:3]}", flush=True)
    csvs = []
    for r in range(args.rounds):
        # alternate which goes first, so a drift of the shared machine hits both
        order = [("on", True), ("off", False)] if r % 2 == 0 else [("off", False), ("on", True)]
        for name, adm in order:
            csvs.append(one_run(zh, args, f"{args.shape}-{name}-{r + 1}", adm, out_dir))
    report = [os.path.join(args.build, "tools", "zest-bench"), "admission", "report"]
    if args.svg:
        first = [csvs.index(x) + 1 for x in csvs[:2]]
        report += ["--svg", args.svg, "--chart", ",".join(map(str, sorted(first))),
                   "--title", f"zest admission, {args.shape}: {args.jobs} PUTs of "
                              f"{args.obj_size}, {args.concurrent} writers"]
    print("$", " ".join(report + csvs), flush=True)
    return subprocess.run(report + csvs).returncode


if __name__ == "__main__":
    sys.exit(main())
