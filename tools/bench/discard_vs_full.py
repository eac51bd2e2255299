#!/usr/bin/env python3
"""Datanode --discard against the full write path, and what the difference is made of.

Starts zest-datanode alternately with --discard and without (fresh drive folders on tmpfs by
default), drives the same `zest-bench grpc` load at each, and reads the datanode's CPU time from
/proc and its payload counter from /metrics around the measured run. Then it measures, in the
same run, what the kernel charges to store bytes in the drive folders (plain write() of 1 MiB
blocks, fdatasync at the end) and prints the full path's CPU per GiB against
"discard + (k+m)/k x that store cost": the part of the gap no user-space change can remove.

usage: discard_vs_full.py [--pairs 3] [--drives DIR] [--ec 4+2] [--obj-size 4MiB]
                          [--concurrent 4] [--duration 6s] [--build build]
"""
import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")
GIB = float(1 << 30)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """(user, system) CPU seconds of a process, all its threads, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def received_bytes(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        m = re.search(r"^zest_payload_received_bytes_total (\S+)$", r.read().decode(), re.M)
    return float(m.group(1))


def wait_metrics(port, proc, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("datanode exited at start")
        try:
            received_bytes(port)
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("datanode did not answer /metrics")


def run_mode(a, mode, base):
    k, m = (int(x) for x in a.ec.split("+"))
    root = tempfile.mkdtemp(prefix=f"{mode}-", dir=base)
    drives = [os.path.join(root, f"d{i}") for i in range(k + m)]
    port, mport = free_port(), free_port()
    argv = [os.path.join(a.build, "datanode", "zest-datanode"), "--listen",
            f"127.0.0.1:{port}", "--metrics", f"127.0.0.1:{mport}", "--ec", a.ec]
    for d in drives:
        os.makedirs(d)
        argv += ["--drive", d]
    if mode == "discard":
        argv.append("--discard")
    log = open(os.path.join(root, "datanode.log"), "wb")
    dn = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    bench = [os.path.join(a.build, "tools", "zest-bench"), "grpc", "--datanode",
             f"127.0.0.1:{port}", "--obj.size", a.obj_size, "--concurrent", str(a.concurrent),
             "--json"]
    try:
        wait_metrics(mport, dn)
        subprocess.run(bench + ["--duration", "1s"], check=True, capture_output=True)
        u0, s0 = cpu_seconds(dn.pid)
        r0 = received_bytes(mport)
        out = subprocess.run(bench + ["--duration", a.duration], check=True,
                             capture_output=True, text=True).stdout
        u1, s1 = cpu_seconds(dn.pid)
        gib = (received_bytes(mport) - r0) / GIB
        res = json.loads(out)
        return {"mib_per_s": res["mib_per_s"], "user_s_per_gib": (u1 - u0) / gib,
                "sys_s_per_gib": (s1 - s0) / gib, "p99_ms": res["latency_ms"]["p99"]}
    finally:
        dn.terminate()
        dn.wait(30)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def store_cost(base, files, gib_total=1.5):
    """CPU seconds per GiB the kernel spends storing 1 MiB write()s in `files` files."""
    root = tempfile.mkdtemp(prefix="store-", dir=base)
    block = os.urandom(1 << 20)
    per_file = int(gib_total * 1024 / files)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    for i in range(files):
        fd = os.open(os.path.join(root, f"f{i}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for _ in range(per_file):
            os.write(fd, block)
        os.fdatasync(fd)
        os.close(fd)
    t1 = time.monotonic()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    shutil.rmtree(root, ignore_errors=True)
    gib = per_file * files / 1024
    return {"mib_per_s": gib * 1024 / (t1 - t0),
            "sys_s_per_gib": (r1.ru_stime - r0.ru_stime) / gib,
            "user_s_per_gib": (r1.ru_utime - r0.ru_utime) / gib}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--drives", default="/dev/shm", help="folder for the drive folders")
    p.add_argument("--ec", default="4+2")
    p.add_argument("--obj-size", dest="obj_size", default="4MiB")
    p.add_argument("--concurrent", type=int, default=4)
    p.add_argument("--duration", default="6s")
    p.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                   "build"))
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    k, m = (int(x) for x in a.ec.split("+"))
    base = tempfile.mkdtemp(prefix="zest-dvf-", dir=a.drives)
    runs = {"discard": [], "full": [], "store": []}
    try:
        for i in range(a.pairs):
            print(f"pair {i + 1}/{a.pairs}", file=sys.stderr)
            for mode in ("discard", "full"):
                runs[mode].append(run_mode(a, mode, base))
            runs["store"].append(store_cost(base, k + m))
    finally:
        shutil.rmtree(base, ignore_errors=True)

    med = {mode: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
           for mode, rs in runs.items()}
    amp = (k + m) / k
    cpu = {mode: med[mode]["user_s_per_gib"] + med[mode]["sys_s_per_gib"] for mode in med}
    expected = cpu["discard"] + amp * cpu["store"]
    if a.json:
        print(json.dumps({"median": med, "cpu_s_per_gib": cpu,
                          "expected_full_cpu_s_per_gib": expected,
                          "ratio_full_to_discard_mib_per_s":
                          med["full"]["mib_per_s"] / med["discard"]["mib_per_s"]}))
        return
    print(f"# {a.pairs} pairs, RS {a.ec}, {a.obj_size} objects, {a.concurrent} streams, "
          f"drives under {a.drives}; medians")
    print(f"{'':34}{'MiB/s':>9}{'user s/GiB':>12}{'sys s/GiB':>11}{'p99 ms':>9}")
    for mode, label in (("discard", "datanode --discard"), ("full", "datanode full path")):
        r = med[mode]
        print(f"{label:34}{r['mib_per_s']:9.0f}{r['user_s_per_gib']:12.3f}"
              f"{r['sys_s_per_gib']:11.3f}{r['p99_ms']:9.1f}")
    r = med["store"]
    print(f"{'kernel store, write() 1 MiB':34}{r['mib_per_s']:9.0f}{r['user_s_per_gib']:12.3f}"
          f"{r['sys_s_per_gib']:11.3f}")
    print(f"full / discard throughput: {med['full']['mib_per_s'] / med['discard']['mib_per_s']:.2f}")
    print(f"datanode CPU-s per payload GiB: discard {cpu['discard']:.2f}, full {cpu['full']:.2f}; "
          f"discard + {amp:.2f} x kernel store = {expected:.2f}")


if __name__ == "__main__":
    main()
