"""Drive faults on the real zest-datanode behind zest-s3gw, driven by curl (SigV4).

Faults, before and during writes: a drive folder removed, a drive made read-only (a
read-only bind mount), drives full (small tmpfs mounts, ENOSPC), a cell file with flipped bits.
Expected (docs/operations.md, "Failure handling"): reads stay byte-correct with up to m
faults and count degraded reads; writes keep going while --write-quorum cells per group are
durable and otherwise fail with a clear S3 error and nothing visible; corruption is caught
by the chunk CRCs, counted and healed; after `zest-datanode heal` everything reads back
right with no degraded read.

We run as root, so chmod cannot make a folder read-only: the cases that need mounts skip
(with a printed reason) when mount is not allowed; exit 77 only if every case skipped.
"""
import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402

CELL = 64 << 10
SKIPPED = []


class Skip(Exception):
    pass


def curl(c, *args, timeout=60):
    return subprocess.run(["curl", "-s", "--aws-sigv4", "aws:amz:us-east-1:s3",
                           "--user", f"{zh.ACCESS_KEY}:{zh.SECRET_KEY}",
                           "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", *args],
                          capture_output=True, timeout=timeout)


def put(c, bucket, key, data, rate=None):
    """PUT data; returns (http status, response body)."""
    src = os.path.join(c.root, "in-" + key.replace("/", "_"))
    with open(src, "wb") as f:
        f.write(data)
    extra = ["--limit-rate", rate] if rate else []
    p = curl(c, "-o", "-", "-w", "\n%{http_code}", "-T", src, *extra,
             f"{c.endpoint}/{bucket}/{key}", timeout=120)
    os.unlink(src)
    body, _, status = p.stdout.rpartition(b"\n")
    return int(status or 0), body


def get(c, bucket, key):
    dst = os.path.join(c.root, "out")
    p = curl(c, "-o", dst, "-w", "%{http_code}", f"{c.endpoint}/{bucket}/{key}")
    status = int(p.stdout or 0)
    data = b""
    if os.path.exists(dst):
        with open(dst, "rb") as f:
            data = f.read()
        os.unlink(dst)
    return status, data


def listing(c, bucket):
    p = curl(c, f"{c.endpoint}/{bucket}?list-type=2")
    return p.stdout.decode(errors="replace")


def mb(c, bucket):
    p = curl(c, "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", f"{c.endpoint}/{bucket}")
    assert p.stdout == b"200", p


def check_all(c, bucket, objs, what):
    for key, data in objs.items():
        st, got = get(c, bucket, key)
        assert st == 200 and got == data, f"{key} wrong {what}: status {st}, {len(got)} bytes"


def s3_error(st, body, code_wanted="ServiceUnavailable"):
    """A PUT that lost write quorum: drives failed -> the datanode's UNAVAILABLE
    "ServiceUnavailable: write quorum not met ..." -> 503 ServiceUnavailable; drives full ->
    RESOURCE_EXHAUSTED "InsufficientStorage: No space ..." -> 503 SlowDown. S3 clients retry
    both with backoff."""
    assert st == 503, (st, body)
    code = body.split(b"<Code>", 1)[-1].split(b"</Code>", 1)[0].decode(errors="replace")
    assert code == code_wanted, (st, body)
    print(f"     quorum lost -> {st} {code}", flush=True)


def degraded(c):
    return zh.metrics(c.dn_metrics)["zest_degraded_reads_total"]


def degraded_above(c, base, timeout=60.0):
    """Has the degraded-read counter passed base? The datanode counts a read when it closes
    it, which can come just after the client has its last byte: wait for it."""
    deadline = time.monotonic() + timeout
    while degraded(c) <= base and time.monotonic() < deadline:
        time.sleep(0.05)
    return degraded(c) > base


def drive_states(c):
    m = zh.metrics(c.dn_metrics)
    return [int(m[f'zest_drive_state{{drive="{i}"}}']) for i in range(c.k + c.m)]


def heal(c, drives=None):
    """Run `zest-datanode heal` (the daemon must be stopped) on all drives or the given ones."""
    argv = [zh.DATANODE, "heal", "--ec", c.ec, "--cell-size", str(CELL)] + \
        [a for d in c.drives for a in ("--drive", d)]
    for d in drives if drives is not None else [None]:
        p = subprocess.run(argv + ([] if d is None else ["--heal-drive", str(d)]),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        if d is not None:
            assert f"healed drive={d} " in p.stderr, p.stderr


def objects(prefix, sizes):
    return {f"{prefix}{i}": os.urandom(s) for i, s in enumerate(sizes)}


SIZES = (1, CELL - 1, 4 * CELL + 3, 70 * CELL + 11)  # up to two block groups at 4+2


# ---- mounts (root only) ----

def sh(*argv):
    return subprocess.run(argv, capture_output=True, text=True)


def mount_ro(d):
    p = sh("mount", "--bind", d, d)
    if p.returncode:
        raise Skip(f"mount --bind not allowed: {p.stderr.strip()}")
    p = sh("mount", "-o", "remount,bind,ro", d)
    if p.returncode:
        sh("umount", d)
        raise Skip(f"remount,bind,ro not allowed: {p.stderr.strip()}")


def mount_tmpfs(d, size="2m"):
    p = sh("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", d)
    if p.returncode:
        raise Skip(f"mount -t tmpfs not allowed: {p.stderr.strip()}")


def umount(d):
    for _ in range(600):  # 60 s: a daemon that just exited may still hold it a moment
        if sh("umount", d).returncode == 0 or not os.path.ismount(d):
            return
        time.sleep(0.1)
    raise AssertionError(f"cannot unmount {d}")


@contextlib.contextmanager
def tmpfs_drives(tag, sizes):
    """A cluster root whose drive folders d<i> for i in `sizes` are tmpfs mounts of that
    size (Skip where mounting is not allowed); unmounted and removed afterwards."""
    root = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"zest-{tag}-{os.getpid()}")
    mounted = []
    try:
        for i, size in sizes.items():
            d = os.path.join(root, f"d{i}")
            os.makedirs(d)
            mount_tmpfs(d, size)
            mounted.append(d)
        yield root
    finally:
        for d in mounted:
            if os.path.ismount(d):
                umount(d)
        shutil.rmtree(root, ignore_errors=True)


def fill(d):
    """The operator's file fills drive folder d to the last byte; returns its path."""
    ballast = os.path.join(d, "ballast")
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * CELL) > 0:
            pass
    except OSError:
        pass
    os.close(fd)
    return ballast


class DuringWrite:
    """A rate-limited PUT in a thread; `fault()` is applied once the datanode has received
    `after` payload bytes, so the fault lands in the middle of the stream."""

    def __init__(self, c, bucket, key, data, rate="6M"):
        self.c, self.result = c, None
        self.base = zh.metric_sum(zh.metrics(c.dn_metrics), "zest_payload_received_bytes_total")
        self.t = threading.Thread(target=self.run, args=(bucket, key, data, rate))
        self.t.start()

    def run(self, bucket, key, data, rate):
        self.result = put(self.c, bucket, key, data, rate=rate)

    def wait_received(self, after, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = zh.metric_sum(zh.metrics(self.c.dn_metrics),
                                "zest_payload_received_bytes_total") - self.base
            if got >= after:
                return
            assert self.t.is_alive(), f"PUT ended before {after} bytes: {self.result}"
            time.sleep(0.02)
        raise AssertionError("PUT made no progress")

    def join(self):
        self.t.join(120)
        assert not self.t.is_alive(), "PUT hung"
        return self.result


# ---- cases ----

def test_removed_folder_before_and_during_writes():
    """One folder removed (before, then a second one during a write): reads stay correct;
    writes go on with 5 of 6 cells (quorum k+1); with two gone a write fails cleanly."""
    with zh.cluster(ec="4+2", cell_size=CELL) as c:
        mb(c, "rmd")
        objs = objects("a", SIZES)
        for key, data in objs.items():
            assert put(c, "rmd", key, data)[0] == 200
        base = degraded(c)
        shutil.rmtree(c.drives[4])  # a data-only drive, while the datanode runs
        check_all(c, "rmd", objs, "with drive 4 removed")
        assert degraded_above(c, base), f"degraded reads not counted: {degraded(c)} vs {base}"
        # a write after the fault: 5 cells per group still durable
        objs["b0"] = os.urandom(9 * CELL + 5)
        st, body = put(c, "rmd", "b0", objs["b0"])
        assert st == 200, (st, body)
        assert drive_states(c)[4] == 1, drive_states(c)
        # during a write: drive 1 (a metadata replica) goes too -> below quorum
        big = os.urandom(12 << 20)
        w = DuringWrite(c, "rmd", "mid", big)
        w.wait_received(3 << 20)
        shutil.rmtree(c.drives[1])
        st, body = w.join()
        s3_error(st, body)
        assert get(c, "rmd", "mid")[0] == 404, "a failed PUT became visible"
        assert "<Key>mid</Key>" not in listing(c, "rmd")
        st, body = put(c, "rmd", "c0", os.urandom(CELL))
        s3_error(st, body)
        assert get(c, "rmd", "c0")[0] == 404
        check_all(c, "rmd", objs, "with drives 1 and 4 removed")
        # clear the fault: empty folders back, heal one by one (metadata drive first)
        assert c.dn.stop() == 0
        for i in (1, 4):
            os.makedirs(c.drives[i])
        heal(c, [1, 4])
        c.start_datanode()
        base = degraded(c)
        check_all(c, "rmd", objs, "after heal")
        assert degraded(c) == base, "heal left gaps"
        assert drive_states(c) == [0] * 6
        assert put(c, "rmd", "d0", os.urandom(CELL))[0] == 200


def test_read_only_drive():
    """A drive made read-only before writes and another during one: with one read-only
    drive writes still commit; with two they fail (4 < quorum 5); all reads correct."""
    with zh.cluster(ec="4+2", cell_size=CELL) as c:
        mb(c, "rod")
        objs = objects("a", SIZES)
        for key, data in objs.items():
            assert put(c, "rod", key, data)[0] == 200
        mounted = []
        try:
            mount_ro(c.drives[5])
            mounted.append(c.drives[5])
            objs["b0"] = os.urandom(20 * CELL + 1)
            st, body = put(c, "rod", "b0", objs["b0"])
            assert st == 200, (st, body)
            assert drive_states(c)[5] == 1, drive_states(c)
            check_all(c, "rod", objs, "with drive 5 read-only")
            w = DuringWrite(c, "rod", "mid", os.urandom(12 << 20))
            w.wait_received(3 << 20)
            mount_ro(c.drives[3])
            mounted.append(c.drives[3])
            st, body = w.join()
            s3_error(st, body)
            assert get(c, "rod", "mid")[0] == 404, "a failed PUT became visible"
            assert "<Key>mid</Key>" not in listing(c, "rod")
            check_all(c, "rod", objs, "with drives 3 and 5 read-only")
            assert c.dn.stop() == 0
        finally:
            for d in mounted:
                umount(d)
        heal(c)
        c.start_datanode()
        base = degraded(c)
        check_all(c, "rod", objs, "after heal")
        assert degraded(c) == base, "heal left gaps"
        assert put(c, "rod", "d0", os.urandom(CELL))[0] == 200


def cell_count(d):
    return sum(len(files) for _, _, files in os.walk(os.path.join(d, "data")))


def rm(c, bucket, key):
    p = curl(c, "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE",
             f"{c.endpoint}/{bucket}/{key}")
    assert p.stdout == b"204", p


def test_full_drive_enospc():
    """Drive 5 is a 2 MiB tmpfs, drive 4 a 4 MiB one. A write fills drive 5 (ENOSPC): the
    drive is marked full (state 2), not failed, and the write commits on the other five;
    the next fills drive 4 too and fails cleanly (503, nothing visible), and a write with
    two full drives is refused at once ("No space" -> 503). Deleting an object frees space:
    a second later the next write re-probes, both drives are writable again (state 0) and
    the new object has its cell on drive 5, with no restart and no heal. Then heal (offline)
    fills in the cells the full drive missed."""
    with tmpfs_drives("faults", {5: "2m", 4: "4m"}) as root:
        d5 = os.path.join(root, "d5")
        with zh.cluster(ec="4+2", cell_size=CELL, root=root) as c:
            mb(c, "full")
            objs = objects("a", (CELL, 3 * CELL + 1))
            for key, data in objs.items():
                assert put(c, "full", key, data)[0] == 200
            assert drive_states(c) == [0] * 6, "a drive full too early"
            # 12 MiB puts ~3 MiB on each drive: drive 5 fills mid-write, quorum holds
            big = os.urandom(12 << 20)
            st, body = put(c, "full", "big", big)
            assert st == 200, (st, body)
            assert drive_states(c) == [0, 0, 0, 0, 0, 2], drive_states(c)
            objs["after"] = os.urandom(5 * CELL)
            assert put(c, "full", "after", objs["after"])[0] == 200
            base = degraded(c)
            check_all(c, "full", objs, "with drive 5 full")
            st, got = get(c, "full", "big")
            assert st == 200 and got == big
            assert degraded_above(c, base), "degraded reads not counted"
            # drive 4 fills during the next one: 4 of 6 cells, below quorum
            st, body = put(c, "full", "big2", os.urandom(12 << 20))
            s3_error(st, body, "SlowDown")
            assert get(c, "full", "big2")[0] == 404, "a failed PUT became visible"
            assert drive_states(c) == [0, 0, 0, 0, 2, 2], drive_states(c)
            # drives 4 and 5 hold no metadata replica (drives 0..m do): all three live
            assert zh.metrics(c.dn_metrics)["zest_meta_replicas_live"] == 3
            st, body = put(c, "full", "refused", os.urandom(CELL))
            s3_error(st, body, "SlowDown")
            assert get(c, "full", "refused")[0] == 404
            with open(os.path.join(root, "datanode.log"), "rb") as f:
                log = f.read()
            assert b"drive=5 " in log and b"ENOSPC: marked full" in log, log[-3000:]
            # the operator frees space: no restart, no heal
            rm(c, "full", "big")
            # a full drive is re-probed at most once a second; a scrape re-probes
            deadline = time.time() + 60
            while drive_states(c) != [0, 0, 0, 0, 0, 0]:
                assert time.time() < deadline, drive_states(c)
                time.sleep(0.1)
            before = cell_count(d5)
            objs["again"] = os.urandom(3 * CELL + 1)  # one stripe: a cell on every drive
            st, body = put(c, "full", "again", objs["again"])
            assert st == 200, (st, body)
            assert drive_states(c) == [0] * 6, drive_states(c)
            assert cell_count(d5) == before + 1, (before, cell_count(d5))
            base = degraded(c)
            check_all(c, "full", {"again": objs["again"]}, "after space came back")
            assert degraded(c) == base
            check_all(c, "full", objs, "after space came back")
            assert c.dn.stop() == 0
            heal(c, [4, 5])  # the cells of "after" that drive 5 missed
            c.start_datanode()
            base = degraded(c)
            check_all(c, "full", objs, "after heal")
            assert degraded(c) == base, "heal left gaps"


def cell_files(c):
    out = []
    for i, d in enumerate(c.drives):
        for dp, _, files in os.walk(os.path.join(d, "data")):
            for f in files:
                out.append((i, os.path.join(dp, f)))
    return out


def flip(path, off):
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x5a]))


def test_flipped_bits_detected_and_healed():
    """Bits flipped in cell files of one group (at most m = 2 per stripe), before and during
    a write: the CRCs catch them, reads rebuild and are counted; heal rewrites the files."""
    with zh.cluster(ec="4+2", cell_size=CELL) as c:
        mb(c, "bits")
        objs = objects("a", (8 * CELL + 7,))
        for key, data in objs.items():
            assert put(c, "bits", key, data)[0] == 200
        files = sorted(p for _, p in cell_files(c) if os.path.getsize(p) > 2 * 1000)
        data_cells = [p for p in files if int(p.rsplit(".", 1)[1]) < c.k]
        assert len(data_cells) >= 3, files
        before = {p: open(p, "rb").read() for p in data_cells[:3]}
        flip(data_cells[0], 100)
        flip(data_cells[1], CELL + 5)  # second stripe of that cell file
        base = degraded(c)
        check_all(c, "bits", objs, "with two corrupted cells")
        assert degraded_above(c, base), "corruption not counted"
        assert zh.metric_sum(zh.metrics(c.dn_metrics), "zest_checksum_mismatches_total") >= 2
        # during a write: a cell of an older object is corrupted while new data arrives
        w = DuringWrite(c, "bits", "mid", os.urandom(6 << 20))
        w.wait_received(1 << 20)
        flip(data_cells[2], 200)  # stripe 0 now has two bad cells (m = 2)
        st, _ = w.join()
        assert st == 200
        base = degraded(c)
        check_all(c, "bits", objs, "with three corrupted cells")
        assert degraded_above(c, base), "corruption not counted"
        assert c.dn.stop() == 0
        heal(c)
        for p, b in before.items():
            assert open(p, "rb").read() == b, f"heal did not rewrite {p}"
        c.start_datanode()
        base = degraded(c)
        check_all(c, "bits", objs, "after heal")
        assert degraded(c) == base, "heal left gaps"


def test_background_heal_after_full():
    """Drive 5 is a 4 MiB tmpfs and the healer runs every 500 ms. A file fills drive 5; a
    2 MiB PUT commits at quorum with its drive-5 cells missing (the drive is marked full);
    the operator removes the file; the healer rebuilds the missing cells by itself
    (zest_cells_healed_total rises, no restart, no `heal`), and the object then reads
    without a degraded read."""
    with tmpfs_drives("bgheal", {5: "4m"}) as root:
        with zh.cluster(ec="4+2", cell_size=CELL, root=root,
                        extra_dn=["--heal-interval", "500ms"]) as c:
            mb(c, "bgh")
            # Let the start-up heal turn go by: then only the PUT's own note can wake the
            # healer (a commit path that forgot it passed here on timing alone).
            time.sleep(1.5)
            ballast = fill(os.path.join(root, "d5"))
            data = os.urandom(2 << 20)
            st, body = put(c, "bgh", "victim", data)
            assert st == 200, (st, body)
            assert drive_states(c)[5] == 2, drive_states(c)
            healed = zh.metrics(c.dn_metrics)["zest_cells_healed_total"]
            os.unlink(ballast)  # room again: a re-probe makes drive 5 writable
            deadline = time.time() + 60
            while time.time() < deadline:
                m = zh.metrics(c.dn_metrics)
                if m['zest_drive_state{drive="5"}'] == 0 and m["zest_cells_healed_total"] > healed:
                    break
                time.sleep(0.2)
            assert m["zest_cells_healed_total"] > healed, "the healer rebuilt nothing"
            # a turn that started may still be healing: wait for a read that needs no
            # rebuild (every cell back), each read checked byte for byte
            deadline = time.time() + 60
            while True:
                base = degraded(c)
                st, got = get(c, "bgh", "victim")
                assert st == 200 and got == data
                if degraded(c) == base:
                    break
                assert time.time() < deadline, "cells still missing after the background heal"
                time.sleep(0.2)


def test_meta_replica_back_after_full():
    """Drive 2 holds a metadata replica (drives 0..m do) and is a 4 MiB tmpfs; the healer
    runs every 500 ms. A file fills drive 2; small PUTs with long keys and attributes go on
    at quorum until LMDB's own write on that replica gets ENOSPC: the replica is dropped
    (zest_meta_replicas_live 2 of 3) and the drive is full. The operator removes the file:
    with no restart the healer copies the primary over the replica and puts it back
    (zest_meta_replicas_live 3, zest_meta_replicas_rebuilt_total 1); later commits reach it,
    so a restart finds every replica at the same generation and copies nothing."""
    with tmpfs_drives("metafull", {2: "4m"}) as root:
        with zh.cluster(ec="4+2", cell_size=CELL, root=root,
                        extra_dn=["--heal-interval", "500ms"]) as c:
            mb(c, "mfull")
            m = zh.metrics(c.dn_metrics)
            assert (m["zest_meta_replicas"], m["zest_meta_replicas_live"]) == (3, 3), m
            ballast = fill(os.path.join(root, "d2"))
            pad = "p" * 1500
            objs = {}
            src = os.path.join(c.root, "in-meta")
            for i in range(150):
                key = f"k{i:03d}-" + "x" * 400  # LMDB keys: at most 511 bytes
                objs[key] = os.urandom(100 + i)
                with open(src, "wb") as f:
                    f.write(objs[key])
                p = curl(c, "-o", "/dev/null", "-w", "%{http_code}", "-T", src,
                         "-H", f"x-amz-meta-pad: {pad}", f"{c.endpoint}/mfull/{key}")
                assert p.stdout == b"200", (i, p)
                if zh.metrics(c.dn_metrics)["zest_meta_replicas_live"] == 2:
                    break
            os.unlink(src)
            m = zh.metrics(c.dn_metrics)
            assert m["zest_meta_replicas_live"] == 2, f"LMDB never hit ENOSPC on d2: {m}"
            assert drive_states(c)[2] == 2, drive_states(c)
            with open(os.path.join(root, "datanode.log"), "rb") as f:
                log = f.read()
            assert b"d2/meta write failed" in log, log[-3000:]
            print(f"     replica on d2 dropped after {i + 1} PUTs", flush=True)
            time.sleep(1.5)  # still full: the healer leaves it out
            assert zh.metrics(c.dn_metrics)["zest_meta_replicas_live"] == 2
            os.unlink(ballast)  # room again
            deadline = time.time() + 60
            while time.time() < deadline:
                m = zh.metrics(c.dn_metrics)
                if m["zest_meta_replicas_live"] == 3:
                    break
                time.sleep(0.2)
            assert m["zest_meta_replicas_live"] == 3, f"the replica did not come back: {m}"
            assert m["zest_meta_replicas_rebuilt_total"] == 1, m
            with open(os.path.join(root, "datanode.log"), "rb") as f:
                log = f.read()
            assert b"d2/meta gen=" in log and b"live again (3 of 3)" in log, log[-3000:]
            objs["after"] = os.urandom(3 * CELL + 1)
            assert put(c, "mfull", "after", objs["after"])[0] == 200
            check_all(c, "mfull", objs, "after the replica came back")
            assert c.dn.stop() == 0
            size = os.path.getsize(os.path.join(root, "datanode.log"))
            c.start_datanode()
            with open(os.path.join(root, "datanode.log"), "rb") as f:
                f.seek(size)
                log = f.read()
            assert b"behind" not in log, log[-3000:]  # every replica at one generation
            check_all(c, "mfull", objs, "after a restart")


def main():
    tests = [test_removed_folder_before_and_during_writes, test_read_only_drive,
             test_full_drive_enospc, test_background_heal_after_full,
             test_meta_replica_back_after_full, test_flipped_bits_detected_and_healed]
    ran = []

    def wrap(t):
        def f():
            try:
                t()
            except Skip as e:
                SKIPPED.append(t.__name__)
                print(f"skip {t.__name__}: {e}", flush=True)
                return
            ran.append(t.__name__)
        f.__name__ = t.__name__
        return f

    if not shutil.which("curl"):
        print("skip: no curl")
        sys.exit(77)
    wrapped = [wrap(t) for t in tests]
    failed = 0
    for t in wrapped:
        t0 = time.time()
        try:
            t()
            if t.__name__ not in SKIPPED:
                print(f"ok   {t.__name__} ({time.time() - t0:.1f}s)", flush=True)
        except Exception as e:
            failed += 1
            import traceback
            traceback.print_exc()
            print(f"FAIL {t.__name__}: {e}", flush=True)
    print(f"{len(tests) - failed - len(SKIPPED)} passed, {failed} failed, "
          f"{len(SKIPPED)} skipped")
    if len(SKIPPED) == len(tests):
        sys.exit(77)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
