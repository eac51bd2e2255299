"""The real zest-datanode over loopback, driven by dn_client (rpc_client_*) and zest-bench.

Every cluster is stopped with SIGTERM and must exit 0: the datanode exits non-zero when a
payload ref or a gRPC buffer is still alive at exit, so each test also checks for leaks.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402

DN_CLIENT = os.environ.get("ZEST_DN_CLIENT",
                           os.path.join(zh.BUILD, "tests", "integration", "dn_client"))
CELL = 64 << 10


def dnc(c, *args, ok=True):
    p = subprocess.run([DN_CLIENT, "--target", f"127.0.0.1:{c.dn_port}", *c.client_args(),
                        *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    if ok and p.returncode != 0:
        raise AssertionError(f"dn_client {args} -> {p.returncode}: {p.stdout}{p.stderr}")
    if p.returncode != 0 and p.stderr.strip():  # why it failed, for the assertion's message
        return p.returncode, (p.stdout.strip() + "\n" + p.stderr.strip()).strip()
    return p.returncode, p.stdout.strip()


def put_bytes(c, bucket, key, data, chunk=1 << 20, ec=None):
    path = os.path.join(c.root, "in-" + key.replace("/", "_"))
    with open(path, "wb") as f:
        f.write(data)
    args = ["put", bucket, key, path, chunk] + ([ec] if ec else [])
    rc, out = dnc(c, *args)
    assert out.startswith(f"size={len(data)} "), out
    os.unlink(path)


def get_bytes(c, bucket, key, off=None, length=None, ok=True):
    path = os.path.join(c.root, "out")
    args = ["get", bucket, key, path] + ([off, length] if off is not None else [])
    rc, out = dnc(c, *args, ok=ok)
    if rc:
        return None, out
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    return data, out


def data_files(c):
    """{drive/relpath: bytes} of every cell file."""
    out = {}
    for i, d in enumerate(c.drives):
        root = os.path.join(d, "data")
        for dp, _, files in os.walk(root):
            for f in files:
                p = os.path.join(dp, f)
                with open(p, "rb") as fh:
                    out[f"d{i}/" + os.path.relpath(p, root)] = fh.read()
    return out


def sizes_for(k):
    stripe = k * CELL
    return [0, 1, CELL - 1, CELL, CELL + 1, 3 * stripe + 5, 2 * 5 * stripe + 7]


def test_round_trips_schemes_sizes_ranges():
    for ec in ("4+2", "2+1", "6+3"):
        k = int(ec.split("+")[0])
        with zh.cluster(ec=ec, gateway=False, cell_size=CELL,
                        extra_dn=["--stripes-per-group", "2"]) as c:
            dnc(c, "mb", "rtb")
            for n, size in enumerate(sizes_for(k)):
                data = os.urandom(size)
                # odd chunk sizes: WriteChunks never line up with cells
                put_bytes(c, "rtb", f"o{n}", data, chunk=[1 << 20, 100003, 4096][n % 3])
                got, _ = get_bytes(c, "rtb", f"o{n}")
                assert got == data, f"{ec} size {size}: {len(got)} bytes back"
                _, st = dnc(c, "stat", "rtb", f"o{n}")
                assert f"size={size} " in st and f"ec={ec}" in st, st
                if size > 2 * CELL + 20:
                    got, _ = get_bytes(c, "rtb", f"o{n}", CELL - 3, 2 * CELL + 10)
                    assert got == data[CELL - 3:3 * CELL + 7], f"{ec} range of {size}"
                    got, _ = get_bytes(c, "rtb", f"o{n}", size - 1, 1)
                    assert got == data[-1:]
            # a per-object scheme other than the default
            data = os.urandom(3 * CELL + 11)
            put_bytes(c, "rtb", "other", data, ec="2+1")
            assert get_bytes(c, "rtb", "other")[0] == data
            assert "ec=2+1" in dnc(c, "stat", "rtb", "other")[1]
            # a range past the end is refused precisely
            rc, out = get_bytes(c, "rtb", "other", len(data), 5, ok=False)
            assert rc is None and "InvalidArgument" in out, out


def test_marshallers_store_identical_files():
    objs = [(f"m{i}", os.urandom(s)) for i, s in enumerate((1, CELL + 1, 9 * CELL + 17, 0))]
    stores = []
    # buffered data cells: the marshallers' own copies are what is counted here
    bufd = ["--data-io", "buffered"]
    with zh.cluster(gateway=False, marshaller="zerocopy", cell_size=CELL, extra_dn=bufd) as a, \
            zh.cluster(gateway=False, marshaller="copy", cell_size=CELL, extra_dn=bufd) as b:
        for c in (a, b):
            dnc(c, "mb", "same")
            for key, data in objs:
                put_bytes(c, "same", key, data, chunk=77777)
            stores.append(data_files(c))
        ma, mb = zh.metrics(a.dn_metrics), zh.metrics(b.dn_metrics)
    assert stores[0] and stores[0].keys() == stores[1].keys(), (sorted(stores[0]),
                                                                 sorted(stores[1]))
    for p in stores[0]:
        assert stores[0][p] == stores[1][p], f"{p} differs between marshallers"
    assert zh.metric_sum(ma, "zest_payload_copied_bytes_total") == 0
    assert zh.metric_sum(mb, "zest_payload_copied_bytes_total") >= \
        ma["zest_payload_received_bytes_total"] > 0


def wait_received(c, at_least, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = zh.metrics(c.dn_metrics)
        if m.get("zest_payload_received_bytes_total", 0) >= at_least:
            return
        if proc.poll() is not None:
            raise AssertionError("the writer ended before the kill")
        time.sleep(0.02)
    raise AssertionError("the write did not get going")


def test_kill9_mid_write_leaves_nothing():
    with zh.cluster(gateway=False, cell_size=CELL) as c:
        dnc(c, "mb", "k9b")
        keep = os.urandom(5 * CELL + 3)
        put_bytes(c, "k9b", "keep", keep)
        before = set(data_files(c))
        big = os.path.join(c.root, "big")
        with open(big, "wb") as f:
            blk = os.urandom(1 << 20)
            for _ in range(512):
                f.write(blk)
        w = subprocess.Popen([DN_CLIENT, "--target", f"127.0.0.1:{c.dn_port}", *c.client_args(),
                              "put", "k9b", "big", big, str(1 << 20)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        base = zh.metrics(c.dn_metrics)["zest_payload_received_bytes_total"]
        wait_received(c, base + (64 << 20), w)
        c.dn.kill9()
        w.wait(30)
        assert w.returncode != 0
        os.unlink(big)
        c.start_datanode()
        rc, out = dnc(c, "stat", "k9b", "big", ok=False)
        assert rc == 1 and "NoSuchKey" in out, out
        _, ls = dnc(c, "ls", "k9b")
        assert "key big" not in ls and "key keep" in ls, ls
        assert set(data_files(c)) == before, "files of the killed write remain"
        for d in c.drives:
            for dp, _, files in os.walk(d):
                assert not [f for f in files if "tmp" in f or f.endswith(".heal")], files
        assert get_bytes(c, "k9b", "keep")[0] == keep


def test_sigterm_mid_write_exits_clean():
    with zh.cluster(gateway=False, cell_size=CELL) as c:
        dnc(c, "mb", "stb")
        big = os.path.join(c.root, "big")
        with open(big, "wb") as f:
            blk = os.urandom(1 << 20)
            for _ in range(256):
                f.write(blk)
        w = subprocess.Popen([DN_CLIENT, "--target", f"127.0.0.1:{c.dn_port}", *c.client_args(),
                              "put", "stb", "big", big, str(1 << 20)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        wait_received(c, 32 << 20, w)
        rc = c.dn.stop()
        w.wait(30)
        assert rc == 0, f"datanode exit {rc} (leak or unclean stop)"
        c.start_datanode()
        # the write either finished within the grace period or left nothing
        rc, out = dnc(c, "stat", "stb", "big", ok=False)
        assert (rc == 0 and "size=268435456" in out) or "NoSuchKey" in out, out


def test_degraded_reads_heal_and_corruption():
    with zh.cluster(gateway=False, cell_size=CELL) as c:
        dnc(c, "mb", "dgb")
        objs = {f"g{i}": os.urandom(s) for i, s in enumerate((1, 7 * CELL + 5, 40 * CELL))}
        for key, data in objs.items():
            put_bytes(c, "dgb", key, data)
        assert c.dn.stop() == 0
        for i in (1, 4):  # m = 2 drive folders lost and replaced by empty ones
            shutil.rmtree(c.drives[i])
            os.makedirs(c.drives[i])
        c.start_datanode()
        for key, data in objs.items():
            assert get_bytes(c, "dgb", key)[0] == data, f"{key} wrong with 2 drives gone"
        deg = zh.metrics(c.dn_metrics)["zest_degraded_reads_total"]
        assert deg >= 2, deg
        assert c.dn.stop() == 0
        argv = [zh.DATANODE, "heal", "--ec", "4+2", "--cell-size", str(CELL)] + \
            [a for d in c.drives for a in ("--drive", d)]
        heal = subprocess.run(argv + ["--heal-drive", "1"], capture_output=True, text=True,
                              timeout=60)
        assert heal.returncode == 0, heal.stderr
        assert "healed drive=1 " in heal.stderr and "drive=4" not in heal.stderr, heal.stderr
        heal = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert heal.returncode == 0, heal.stderr
        assert "healed drive=4 " in heal.stderr, heal.stderr
        c.start_datanode()
        for key, data in objs.items():
            assert get_bytes(c, "dgb", key)[0] == data
        assert zh.metrics(c.dn_metrics)["zest_degraded_reads_total"] == 0, "heal left gaps"
        # flip a byte in one cell file: the CRC catches it, the read rebuilds
        # a data cell (cell index < k), which a plain read uses
        files = sorted(p for p, b in data_files(c).items()
                       if len(b) > 1000 and int(p.rsplit(".", 1)[1]) < c.k)
        drive, rel = files[0].split("/", 1)
        victim = os.path.join(c.drives[int(drive[1:])], "data", rel)
        with open(victim, "r+b") as f:
            f.seek(100)
            b = f.read(1)
            f.seek(100)
            f.write(bytes([b[0] ^ 0xff]))
        m = zh.metrics(c.dn_metrics)
        assert all(m[f'zest_checksum_mismatches_total{{drive="{i}"}}'] == 0
                   for i in range(6)), m
        for key, data in objs.items():
            assert get_bytes(c, "dgb", key)[0] == data, f"{key} wrong after corruption"
        m = zh.metrics(c.dn_metrics)
        assert m["zest_degraded_reads_total"] >= 1
        # counted on their own, against the drive that holds the bad chunk
        bad = {i: m[f'zest_checksum_mismatches_total{{drive="{i}"}}'] for i in range(6)}
        assert bad[int(drive[1:])] >= 1, bad
        assert sum(bad.values()) == bad[int(drive[1:])], bad


def test_list_compose_buckets_over_grpc():
    with zh.cluster(gateway=False, cell_size=CELL) as c:
        assert dnc(c, "lsb")[1] == ""
        dnc(c, "mb", "lb1")
        dnc(c, "mb", "lb2")
        rc, out = dnc(c, "mb", "lb1", ok=False)
        assert rc == 1 and "BucketAlreadyOwnedByYou" in out, out
        assert dnc(c, "lsb")[1].split() == ["lb1", "lb2"]
        dnc(c, "hb", "lb1")
        rc, out = dnc(c, "hb", "nob", ok=False)
        assert "NoSuchBucket: nob" in out, out
        parts = [os.urandom(CELL * 3 + 1), os.urandom(17), os.urandom(2 * CELL)]
        for i, p in enumerate(parts):
            put_bytes(c, "lb1", f"a/p{i}", p)
        put_bytes(c, "lb1", "b/x", b"x")
        put_bytes(c, "lb1", "top", b"t")
        _, out = dnc(c, "ls", "lb1", "", "/")
        assert out.splitlines() == ["key top 1", "prefix a/", "prefix b/",
                                    "truncated=0 next="], out
        _, out = dnc(c, "ls", "lb1", "a/", "", "", 2)
        assert out.splitlines()[:2] == [f"key a/p0 {len(parts[0])}", "key a/p1 17"], out
        assert "truncated=1" in out, out
        _, out = dnc(c, "compose", "lb1", "whole", 1, "a/p0", "a/p1", "a/p2")
        assert out.startswith(f"size={sum(map(len, parts))} "), out
        assert get_bytes(c, "lb1", "whole")[0] == b"".join(parts)
        assert get_bytes(c, "lb1", "whole", CELL * 3, 18)[0] == (b"".join(parts))[CELL * 3:
                                                                             CELL * 3 + 18]
        rc, out = dnc(c, "stat", "lb1", "a/p0", ok=False)
        assert "NoSuchKey" in out, out  # delete_parts dropped them
        rc, out = dnc(c, "compose", "lb1", "bad", 0, "nokey", ok=False)
        assert rc == 1 and "NoSuchKey" in out, out
        # parts from another bucket of the same datanode
        put_bytes(c, "lb2", "x", parts[1])
        _, out = dnc(c, "compose", "lb1", "cross", 0, "lb2::x", "b/x", "lb2::x")
        assert out.startswith(f"size={2 * len(parts[1]) + 1} "), out
        assert get_bytes(c, "lb1", "cross")[0] == parts[1] + b"x" + parts[1]
        rc, out = dnc(c, "compose", "lb1", "bad", 0, "nob::x", ok=False)
        assert rc == 1 and "NoSuchBucket: " in out, out  # a part's bucket
        assert dnc(c, "rm", "lb1", "cross")[1] == "existed=1"
        assert dnc(c, "rm", "lb2", "x")[1] == "existed=1"
        rc, out = dnc(c, "rb", "lb1", ok=False)
        assert "BucketNotEmpty: lb" in out, out
        for k in ("whole", "b/x", "top"):
            assert dnc(c, "rm", "lb1", k)[1] == "existed=1"
        assert dnc(c, "rm", "lb1", "top")[1] == "existed=0"
        rc, out = dnc(c, "rm", "nob", "k", ok=False)
        assert "NoSuchBucket" in out, out
        rc, out = dnc(c, "put", "nob", "k", "-", ok=False)
        assert "NoSuchBucket: nob" in out, out
        dnc(c, "rb", "lb1")
        assert dnc(c, "lsb")[1].split() == ["lb2"]


def test_discard_receives_and_drops():
    for marshaller in ("zerocopy", "copy"):
        with zh.cluster(gateway=False, marshaller=marshaller, extra_dn=["--discard"]) as c:
            dnc(c, "mb", "ddb")
            data = os.urandom(5 * (1 << 20) + 3)
            put_bytes(c, "ddb", "gone", data, chunk=300007)
            m = zh.metrics(c.dn_metrics)
            assert m["zest_payload_received_bytes_total"] == len(data), m
            assert not data_files(c), "--discard wrote cell files"


def test_one_gib_stream_each_marshaller():
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    for marshaller in ("zerocopy", "copy"):
        root = tempfile.mkdtemp(prefix="zest-it-", dir=shm)
        with zh.cluster(gateway=False, marshaller=marshaller, root=root,
                        extra_dn=["--data-io", "buffered"]) as c:  # the marshaller's copies
            dnc(c, "mb", "bench")
            p = subprocess.run([zh.BENCH, "grpc", "--datanode", f"127.0.0.1:{c.dn_port}", *c.client_args(),
                                "--obj.size", "64MiB", "--objects", "16", "--concurrent", "2"],
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, p.stdout + p.stderr
            m = zh.metrics(c.dn_metrics)
            rx = m["zest_payload_received_bytes_total"]
            cp = zh.metric_sum(m, "zest_payload_copied_bytes_total")
            assert rx >= 1 << 30, rx
            assert m["zest_objects_committed_total"] >= 16, m
            print(f"     {marshaller}: received={int(rx)} copied={int(cp)} "
                  f"copied/received={cp / rx:.2f}", flush=True)
            if marshaller == "zerocopy":
                assert cp == 0, cp
            else:
                assert cp >= rx, (cp, rx)
        if os.path.isdir(root):
            shutil.rmtree(root, ignore_errors=True)


def test_binding_flags():
    """--write-workers, --readers, --call-queue-cap, --shutdown-grace: listed in --help,
    accepted (a round trip through a 1-worker, 1-reader, 64 KiB-queue daemon), and a bad
    value is refused at start with exit 2 and a message naming the flag."""
    p = subprocess.run([zh.DATANODE, "--help"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0
    for flag, default in (("--write-workers", "default 4"), ("--readers", "default 4"),
                          ("--call-queue-cap", "default 8MiB"),
                          ("--shutdown-grace", "default 5s")):
        line = p.stdout.split(flag, 1)[1]
        assert default in line.split("--", 1)[0], (flag, p.stdout)
    with zh.cluster(gateway=False, cell_size=CELL,
                    extra_dn=["--write-workers", "1", "--readers", "1",
                              "--call-queue-cap", "64KiB", "--shutdown-grace", "300ms"]) as c:
        dnc(c, "mb", "flb")
        data = os.urandom(9 * CELL + 5)
        put_bytes(c, "flb", "o", data, chunk=100003)  # many chunks against a 64 KiB cap
        assert get_bytes(c, "flb", "o")[0] == data
        with open(os.path.join(c.root, "datanode.log")) as f:
            log = f.read()
        assert "write_workers=1 readers=1 call_queue_cap=65536" in log, log[-2000:]
        assert c.dn.stop() == 0  # SIGTERM honoured (a daemon that ignores it fails the stop)
        with open(os.path.join(c.root, "datanode.log")) as f:
            assert "grace 300 ms" in f.read()
    root = tempfile.mkdtemp(prefix="zest-it-")
    drives = [a for i in range(6) for a in ("--drive", os.path.join(root, f"d{i}"))]
    try:
        for flag, value in (("--write-workers", "0"), ("--readers", "x"),
                            ("--call-queue-cap", "1KiB"), ("--shutdown-grace", "1y")):
            p = subprocess.run([zh.DATANODE, *drives, flag, value], capture_output=True,
                               text=True, timeout=10)
            assert p.returncode == 2, (flag, value, p.returncode, p.stderr)
            assert f"bad value for {flag}: {value}" in p.stderr, p.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_write_below_quorum_is_unavailable():
    """Two drive folders gone (drive 3 and 4, no metadata replica): a Write loses its
    quorum (4 of 6 cells < k + 1) and fails with UNAVAILABLE "write quorum not met: N of M
    drives", not INTERNAL; the next one is refused the same way at open; nothing shows."""
    with zh.cluster(gateway=False, cell_size=CELL) as c:
        dnc(c, "mb", "qqq")
        keep = os.urandom(3 * CELL + 7)
        put_bytes(c, "qqq", "keep", keep)
        for i in (3, 4):
            shutil.rmtree(c.drives[i])
        path = os.path.join(c.root, "in")
        with open(path, "wb") as f:
            f.write(os.urandom(6 * CELL + 1))
        for key in ("lost", "refused"):
            rc, out = dnc(c, "put", "qqq", key, path, 1 << 20, ok=False)
            assert rc != 0, out
            assert out.startswith("ERR 14 ServiceUnavailable: write quorum not met: 4 of 6 "
                                  "drives (quorum 5)"), out  # 14: UNAVAILABLE
            rc, out = dnc(c, "stat", "qqq", key, ok=False)
            assert "NoSuchKey" in out, out
        assert get_bytes(c, "qqq", "keep")[0] == keep
        m = zh.metrics(c.dn_metrics)
        assert [m[f'zest_drive_state{{drive="{i}"}}'] for i in range(6)] == [0, 0, 0, 1, 1, 0]


if __name__ == "__main__":
    zh.run_tests([
        test_binding_flags,
        test_write_below_quorum_is_unavailable,
        test_round_trips_schemes_sizes_ranges,
        test_marshallers_store_identical_files,
        test_kill9_mid_write_leaves_nothing,
        test_sigterm_mid_write_exits_clean,
        test_degraded_reads_heal_and_corruption,
        test_list_compose_buckets_over_grpc,
        test_discard_receives_and_drops,
        test_one_gib_stream_each_marshaller,
    ])
