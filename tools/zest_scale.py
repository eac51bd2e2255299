#!/usr/bin/env python3
"""The cluster scale simulation behind `make scale` (tools/zest-scale.sh): for each scheme,
etcd, NODES datanodes with DRIVES drive folders each on tmpfs (/dev/shm), the gateway
--cluster in front, and `zest-bench s3 put` with the seed's shape (64 MiB objects, 40
streams, 60 s). It measures, over the bench's run:

- ingest: payload bytes the gateway took in (zest_s3_payload_bytes_total{dir="in"}) per
  second, in total and per datanode;
- CPU: utime + stime of every datanode (/proc/<pid>/stat), per GiB of payload: the
  cluster's datanode CPU-seconds per payload GiB, its mean per node, and the busiest node's
  share; the gateway's, etcd's and the bench's separately;
- network: bytes the coordinators forwarded to peers (zest_cluster_forwarded_bytes_total)
  per payload byte, plus the payload's own hop into the coordinator (1): docs/cluster.md's
  1 + (k+m-c)/k; and loopback bytes (/proc/net/dev) per payload byte, which also count the
  client's hop into the gateway, TLS records, gRPC framing and, lo being machine-wide, every
  other process's loopback traffic (a cross-check on a quiet machine only).

docs/benchmarks.md ("Cluster") projects these to a real cluster and says what that assumes.
Everything runs on one machine, so the figures are costs per byte, not the cluster's speed.

Environment (all optional):
  ZEST_SCALE_SCHEMES   "4+2 8+4"        ZEST_SCALE_NODES     16
  ZEST_SCALE_DRIVES    10               ZEST_SCALE_SIZE      64MiB
  ZEST_SCALE_STREAMS   40               ZEST_SCALE_SECONDS   60
  ZEST_SCALE_DIR       /dev/shm         ZEST_SCALE_JSON      a file for the results
  ZEST_SCALE_MAX_GIB   3: payload after which the bench is stopped (tmpfs is RAM)
  ZEST_SCALE_IDLE      5: seconds of idle CPU measured first and subtracted (the
                       membership polls, keepalives and scans cost per second, not per byte)
  ZEST_INSECURE=1      plaintext internal gRPC (default mutual TLS)
  ZEST_SCALE_LOCAL=1   the gateway on dn-1's host (--local-node): dn-1 coordinates every
                       PUT, the payload's hop into it over its Unix socket
  ZEST_BUILD           the build folder (default build)
A quick run: ZEST_SCALE_SECONDS=10 ZEST_SCALE_STREAMS=8 ZEST_SCALE_SCHEMES=4+2.
The run stops early (and says so) after ZEST_SCALE_MAX_GIB of payload, when MemAvailable
falls under 6 GiB or the tmpfs has under 3 GiB left: the cells live in RAM, and a machine
shared with others must not reach its OOM killer. The figures are per payload byte, so a
shorter window changes their noise, not their meaning.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import cluster_harness as ch  # noqa: E402
import zest_harness as zh  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20


def env(name, default):
    return os.environ.get(name, default)


def size_bytes(s):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "": 1}
    for u in ("KiB", "MiB", "GiB", ""):
        if s.endswith(u) and s[:len(s) - len(u)].isdigit():
            return int(s[:len(s) - len(u)]) * units[u]
    raise SystemExit(f"zest-scale: bad size {s!r}")


def lo_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[0])  # received = sent on loopback
    return 0


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def mem_available():
    """MemAvailable of /proc/meminfo in bytes: tmpfs pages are RAM, shared with everyone."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def low_on_room(root, payload_now, cap):
    """Why the bench must stop now, or None."""
    if free_bytes(root) < 3 * GiB:
        return "tmpfs nearly full"
    if mem_available() < 6 * GiB:
        return "MemAvailable under 6 GiB"
    if payload_now >= cap:
        return f"payload cap ZEST_SCALE_MAX_GIB={cap / GiB:g} reached"
    return None


def snapshot(c):
    s = {"t": time.time(), "lo": lo_bytes(), "nodes": {}}
    for i, n in c.nodes.items():
        if not n.running:
            raise RuntimeError(f"{n.node} died (exit {n.proc.returncode}): "
                               f"{ch.tail(n.log_path, 1500)}")
        m = n.metrics()
        s["nodes"][i] = {
            "cpu": n.cpu_seconds(),
            "rx": ch.metric_sum(m, "zest_payload_received_bytes_total"),
            "fwd": ch.metric_sum(m, "zest_cluster_forwarded_bytes_total"),
            "copied": ch.metric_sum(m, "zest_payload_copied_bytes_total"),
            "has_fwd": any(k.startswith("zest_cluster_forwarded_bytes_total") for k in m),
        }
    gm = c.gw.metrics()
    s["gw_in"] = gm.get('zest_s3_payload_bytes_total{dir="in"}', 0.0)
    s["gw_cpu"] = c.gw.cpu_seconds()
    s["etcd_cpu"] = sum(p.cpu_seconds() for p in c.etcd.procs if p.running)
    return s


def run_scheme(ec, nodes, drives, size, streams, seconds, base, cap):
    root = tempfile.mkdtemp(prefix=f"zest-scale-{ec.replace('+', '-')}-", dir=base)
    print(f"== RS({ec}): {nodes} datanodes x {drives} drive folders in {root}", flush=True)
    local = 1 if env("ZEST_SCALE_LOCAL", "0") == "1" else None
    c = ch.Cluster(nodes=nodes, ec=ec, drives=drives, root=root, data_io="buffered",
                   extra_gw=["--workers", str(max(16, streams + 8))], local=local)
    result = {"ec": ec, "nodes": nodes, "drives": drives, "obj_size": size,
              "streams": streams, "seconds_asked": seconds, "local_node": bool(local)}
    stopped_early = threading.Event()
    why = []
    failed = True
    try:
        bench = [zh.BENCH, "s3", "put", "--host", f"127.0.0.1:{c.gw_port}",
                 "--access-key", zh.ACCESS_KEY, "--secret-key", zh.SECRET_KEY,
                 "--bucket", "scale", "--obj.size", str(size), "--concurrent", str(streams),
                 "--duration", f"{seconds}s", "--warmup", "0s", "--noclear", "--json"]
        # what the cluster burns idle (membership polls, lease keepalives, the healers' and
        # collectors' scans): a rate per second, not per byte, subtracted below
        idle = float(env("ZEST_SCALE_IDLE", "5"))
        i0 = snapshot(c)
        time.sleep(idle)
        s0 = snapshot(c)
        idle_dn = sum(s0["nodes"][i]["cpu"] - i0["nodes"][i]["cpu"] for i in c.nodes) / idle
        idle_gw = (s0["gw_cpu"] - i0["gw_cpu"]) / idle
        idle_etcd = (s0["etcd_cpu"] - i0["etcd_cpu"]) / idle
        p = subprocess.Popen(bench, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def guard():  # stop before tmpfs fills RAM: the figures are per byte anyway
            while p.poll() is None:
                try:
                    gw_in = c.gw.metrics().get('zest_s3_payload_bytes_total{dir="in"}', 0.0)
                except OSError:
                    gw_in = 0.0
                w = low_on_room(root, gw_in - s0["gw_in"], cap)
                if w:
                    why.append(w)
                    stopped_early.set()
                    p.terminate()
                    return
                time.sleep(0.5)

        g = threading.Thread(target=guard, daemon=True)
        g.start()
        bench_cpu0 = os.times()
        out, err = p.communicate(timeout=seconds + 600)
        s1 = snapshot(c)
        bench_cpu = (os.times().children_user + os.times().children_system -
                     bench_cpu0.children_user - bench_cpu0.children_system)
        if p.returncode != 0 and not stopped_early.is_set():
            raise RuntimeError(f"zest-bench s3 exited {p.returncode}:\n{err[-3000:]}")
        try:
            result["bench"] = json.loads(out)
        except ValueError:
            result["bench"] = None
        wall = s1["t"] - s0["t"]
        payload = s1["gw_in"] - s0["gw_in"]
        if payload <= 0:
            raise RuntimeError("the gateway took in no payload")
        cpu = {i: s1["nodes"][i]["cpu"] - s0["nodes"][i]["cpu"] for i in c.nodes}
        rx = {i: s1["nodes"][i]["rx"] - s0["nodes"][i]["rx"] for i in c.nodes}
        fwd = sum(s1["nodes"][i]["fwd"] - s0["nodes"][i]["fwd"] for i in c.nodes)
        copied = sum(s1["nodes"][i]["copied"] - s0["nodes"][i]["copied"] for i in c.nodes)
        pg = payload / GiB
        # labelled by peer: a node that forwarded nothing has no series at all
        has_fwd = any(n["has_fwd"] for n in s1["nodes"].values())
        result.update({
            "wall_s": round(wall, 2), "stopped_early": why[0] if why else None,
            "payload_bytes": payload,
            "ingest_gibps": payload / wall / GiB,
            "ingest_per_node_gibps": payload / wall / GiB / nodes,
            "idle_cores": {"datanodes": round(idle_dn, 3), "gateway": round(idle_gw, 3),
                           "etcd": round(idle_etcd, 3)},
            "dn_cpu_s_per_gib_net": (sum(cpu.values()) - idle_dn * wall) / pg,
            "gw_cpu_s_per_gib_net": (s1["gw_cpu"] - s0["gw_cpu"] - idle_gw * wall) / pg,
            "etcd_cpu_s_per_gib_net": (s1["etcd_cpu"] - s0["etcd_cpu"] - idle_etcd * wall) / pg,
            "dn_cpu_s_per_gib": sum(cpu.values()) / pg,
            "dn_cpu_s_per_gib_per_node_mean": sum(cpu.values()) / pg / nodes,
            "dn_cpu_s_per_gib_per_node_max": max(cpu.values()) / pg,
            "dn_cpu_cores_used": sum(cpu.values()) / wall,
            "gw_cpu_s_per_gib": (s1["gw_cpu"] - s0["gw_cpu"]) / pg,
            "etcd_cpu_s_per_gib": (s1["etcd_cpu"] - s0["etcd_cpu"]) / pg,
            "bench_cpu_s_per_gib": bench_cpu / pg,
            "dn_received_per_payload": sum(rx.values()) / payload,
            "forwarded_per_payload": fwd / payload if has_fwd else None,
            "network_per_payload": 1 + fwd / payload if has_fwd else None,
            "loopback_per_payload": (s1["lo"] - s0["lo"]) / payload,
            "copied_bytes": copied,
            "cpu_s_per_node": {f"dn-{i}": round(v, 2) for i, v in cpu.items()},
        })
        failed = False
        return result
    finally:
        bad = c.close(failed=False)
        if bad:
            print(f"   daemons exited non-zero: {bad}", flush=True)
        if failed or bad:  # the logs leave the tmpfs, the data does not
            keep = tempfile.mkdtemp(prefix="zest-scale-logs-")
            for f in os.listdir(root):
                if f.endswith(".log"):
                    shutil.copy(os.path.join(root, f), keep)
            print(f"   logs kept in {keep}", flush=True)
        shutil.rmtree(root, ignore_errors=True)


def report(r):
    k, m = (int(x) for x in r["ec"].split("+"))
    print(f"-- RS({r['ec']}), {r['nodes']} datanodes x {r['drives']} tmpfs drives, "
          f"{r['obj_size'] >> 20} MiB objects, {r['streams']} streams, {r['wall_s']:.0f} s"
          + (f" (stopped early: {r['stopped_early']})" if r["stopped_early"] else "")
          + (", the gateway on dn-1's host (--local-node)" if r.get("local_node") else ""))
    print(f"   payload {r['payload_bytes'] / GiB:.2f} GiB: {r['ingest_gibps'] * 1024:.0f} MiB/s, "
          f"{r['ingest_per_node_gibps'] * 1024:.1f} MiB/s per datanode")
    print(f"   datanode CPU: {r['dn_cpu_s_per_gib']:.2f} CPU-s per payload GiB in all "
          f"({r['dn_cpu_s_per_gib_per_node_mean']:.3f} per node on average, busiest node "
          f"{r['dn_cpu_s_per_gib_per_node_max']:.3f}); {r['dn_cpu_cores_used']:.2f} cores busy")
    print(f"   gateway {r['gw_cpu_s_per_gib']:.2f}, etcd {r['etcd_cpu_s_per_gib']:.3f}, "
          f"zest-bench {r['bench_cpu_s_per_gib']:.2f} CPU-s per payload GiB")
    ic = r["idle_cores"]
    print(f"   idle before the load: datanodes {ic['datanodes']:.3f} cores in all, gateway "
          f"{ic['gateway']:.3f}, etcd {ic['etcd']:.3f}; less that: datanodes "
          f"{r['dn_cpu_s_per_gib_net']:.2f}, gateway {r['gw_cpu_s_per_gib_net']:.2f}, etcd "
          f"{r['etcd_cpu_s_per_gib_net']:.3f} CPU-s per payload GiB")
    if r["network_per_payload"] is not None:
        print(f"   network: {r['network_per_payload']:.3f} bytes per payload byte into and out "
              f"of the datanodes (1 in + {r['forwarded_per_payload']:.3f} forwarded; "
              f"1 + {k + m - 1}/{k} = {1 + (k + m - 1) / k:.3f} with one cell kept local"
              + ("; the PUTs cut off by the early stop never sent their parity" if
                 r["stopped_early"] else "") + ")")
    else:
        print("   network: this datanode exports no zest_cluster_forwarded_bytes_total")
    print(f"   loopback {r['loopback_per_payload']:.3f} bytes per payload byte (machine-wide: "
          f"the client hop, TLS, framing and other processes' traffic); datanodes received "
          f"{r['dn_received_per_payload']:.3f}; payload copied {r['copied_bytes']:.0f} B",
          flush=True)


def main():
    try:
        ch.require_tools()
        if not ch.has_flag(zh.GATEWAY, "--cluster"):
            raise ch.Skip("zest-s3gw has no --cluster (issue #14 not built)")
    except ch.Skip as e:
        print(f"zest-scale: cannot run: {e}", file=sys.stderr)
        return 2
    if not os.access(zh.BENCH, os.X_OK):
        print(f"zest-scale: {zh.BENCH} is not built", file=sys.stderr)
        return 2
    schemes = env("ZEST_SCALE_SCHEMES", "4+2 8+4").split()
    nodes = int(env("ZEST_SCALE_NODES", "16"))
    drives = int(env("ZEST_SCALE_DRIVES", "10"))
    size = size_bytes(env("ZEST_SCALE_SIZE", "64MiB"))
    streams = int(env("ZEST_SCALE_STREAMS", "40"))
    seconds = int(env("ZEST_SCALE_SECONDS", "60"))
    base = env("ZEST_SCALE_DIR", "/dev/shm")
    cap = float(env("ZEST_SCALE_MAX_GIB", "3")) * GiB
    results = []
    for ec in schemes:
        r = run_scheme(ec, nodes, drives, size, streams, seconds, base, cap)
        report(r)
        results.append(r)
    out = os.environ.get("ZEST_SCALE_JSON")
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
