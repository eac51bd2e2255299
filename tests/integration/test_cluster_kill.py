#!/usr/bin/env python3
"""Issue #14's kill test: 8 datanodes, etcd and the gateway --cluster, RS(4,2) spread over the
nodes (docs/cluster.md). boto3 clients PUT objects of 0 B to 70 MiB (the largest as multipart
uploads) from several threads; two datanodes are SIGKILLed in the middle of the load:

- PUTs go on: a PUT that fails is tried again (a coordinator died under it, or a group lost
  its quorum while the dead nodes were still in the views), and every PUT started once the
  two have left the membership views succeeds at its first attempt;
- every acknowledged object reads back byte-identical with the two down (degraded reads,
  zest_degraded_reads_total), and an object whose PUT was never acknowledged reads back
  whole or not at all;
- one of the two comes back with wiped drive folders before --heal-after (its cells are
  found missing by the records that name it), the other stays away past --heal-after (its
  cells are rebuilt elsewhere) and then comes back with its drives intact; the healers
  rebuild every cell the two held (zest_heal_pending_cells 0 on every node for a while,
  zest_heal_cells_total > 0);
- then two *other* datanodes are SIGKILLed and every object still reads back byte-identical:
  only a complete heal leaves every group k cells on the remaining six.

Small cells (64 KiB) and groups (2 stripes, 512 KiB of data) keep a 70 MiB object at 140
groups. Exits 77 without etcd or without the gateway's --cluster.
"""
import os
import sys
import threading
import time

from boto3.s3.transfer import TransferConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

MiB = 1 << 20
BUCKET = "kill"
# the load's size cycle; the 70 MiB ones are multipart uploads of 16 MiB parts
SIZES = [0, 1, 4095, 65536, 65537, 262147, MiB, 3 * MiB + 11, 8 * MiB, 70 * MiB, 20 * MiB,
         512 * 1024 + 1]
MPU = TransferConfig(multipart_threshold=16 * MiB, multipart_chunksize=16 * MiB,
                     max_concurrency=2, use_threads=True)
# s: far past the first read-back with both down, however slow the machine, so that the
# read-back comes before any heal of their absence (asserted by zest_heal_scans_total); the
# heal of dn-b's absence is waited for by its event, not for this long
HEAL_AFTER = 90
THREADS = 4
RETRY_FOR = 120  # s: a PUT still failing after this is never acknowledged
BIG = 3  # 70 MiB uploads at most: the load must stay short
if ch.zh.SANITIZED:  # ASan daemons: a third of the bytes, the same steps
    # the one 70 MiB upload first (thread 0's first PUT), not thirteenth: on a busy machine
    # a thread's twelve PUTs before it could outlast the load
    SIZES = [70 * MiB] + [s if s < 8 * MiB else s // 8 for s in SIZES]
    THREADS = 3
    BIG = 1


class Load:
    """PUT threads: object i of thread t is key t/i of SIZES[(i + t) % len]. Each PUT is tried
    until it succeeds (attempts 1 s apart, for up to RETRY_FOR s: a key placed on both dead
    nodes fails until the views drop them, a lease TTL later); what happened is kept per
    key."""

    def __init__(self, c):
        self.c = c
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked = {}      # key -> (size, sha256)
        self.failed = {}     # key -> (size, sha256, [errors]): never acknowledged
        self.first_try = []  # (start time, key, ok at the first attempt, errors)
        self.big = 0         # 70 MiB objects started (at most BIG)
        self.threads = [threading.Thread(target=self.run, args=(t,), daemon=True)
                        for t in range(THREADS)]

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(300)
            assert not t.is_alive(), "a PUT thread hung"

    def run(self, t):
        s3 = self.c.s3(retries=0, read_timeout=60)
        i = 0
        while not self.stop.is_set():
            size = SIZES[(i + t) % len(SIZES)]
            if size >= 70 * MiB:
                with self.lock:
                    if self.big >= BIG:
                        size = 2 * MiB
                    self.big += size >= 70 * MiB
            key = f"t{t}/o{i:04d}-{size}"
            data = ch.body(f"{t}/{i}", size)
            sha = ch.digest(data)
            errors = []
            t0 = time.time()
            while True:
                try:
                    if size >= 16 * MiB:
                        import io
                        s3.upload_fileobj(io.BytesIO(data), BUCKET, key, Config=MPU)
                    else:
                        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
                    with self.lock:
                        self.acked[key] = (size, sha)
                    break
                except Exception as e:  # botocore's many error classes: all count
                    errors.append((round(time.time() - t0, 1), *ch.error_code(e), str(e)[:160]))
                    if time.time() - t0 > RETRY_FOR:
                        with self.lock:
                            self.failed[key] = (size, sha, errors)
                        break
                    time.sleep(1)
            with self.lock:
                self.first_try.append((t0, key, not errors, errors))
            del data
            i += 1


def verify(c, load, what):
    """Every acknowledged object byte-identical; an unacknowledged one whole or absent."""
    s3 = c.s3(retries=0, read_timeout=120)
    bad = []
    t0 = time.time()
    for key, (size, sha) in sorted(load.acked.items()):
        try:
            got = ch.get_digest(s3, BUCKET, key)
        except Exception as e:
            bad.append((key, ch.error_code(e), str(e)[:200]))
            continue
        if got != (size, sha):
            bad.append((key, "differs", got[0], size))
    for key, (size, sha, _) in sorted(load.failed.items()):
        try:
            got = ch.get_digest(s3, BUCKET, key)
        except Exception as e:
            if ch.error_code(e)[0] != 404:
                bad.append((key, "unacknowledged", ch.error_code(e)))
            continue
        if got != (size, sha):
            bad.append((key, "unacknowledged and partial", got[0], size))
    print(f"     {what}: {len(load.acked)} objects read in {time.time() - t0:.1f} s, "
          f"{len(bad)} bad", flush=True)
    assert not bad, f"{what}: {len(bad)} objects wrong: {bad[:10]}"


def heal_state(c):
    out = {}
    for n in c.running_nodes():
        m = n.metrics()
        if "zest_heal_pending_cells" not in m:
            raise AssertionError(f"{n.node} exports no zest_heal_pending_cells (the healer "
                                 "is not in this build)")
        out[n.node] = (m["zest_heal_pending_cells"], ch.metric_sum(m, "zest_heal_cells_total"))
    return out


def scans(nodes):
    """{node: zest_heal_scans_total}: its healer's passes over every record (after the
    start-up check of its store, one per set of nodes absent past --heal-after)."""
    return {n.node: ch.metric_sum(n.metrics(), "zest_heal_scans_total") for n in nodes}


def wait_healed(c, what, timeout=300, quiet=5.0, healed_min=0):
    """zest_heal_pending_cells 0 on every running node for `quiet` seconds, once the nodes
    healed at least healed_min cells in all (zest_heal_cells_total)."""
    deadline = time.time() + timeout
    since = None
    while True:
        st = heal_state(c)
        if all(p == 0 for p, _ in st.values()) and sum(h for _, h in st.values()) >= healed_min:
            since = since or time.time()
            if time.time() - since >= quiet:
                return st
        else:
            since = None
        assert time.time() < deadline, f"{what}: still pending after {timeout} s: {st}"
        time.sleep(0.5)


def test_kill_two_heal_kill_two():
    with ch.cluster(nodes=8, ec="4+2", cell_size=65536, stripes_per_group=2, drives=2,
                    heal_after=f"{HEAL_AFTER}s", gc_grace="30s") as c:
        if not ch.has_flag(ch.zh.DATANODE, "--heal-after"):
            print("     note: this zest-datanode has no --heal-after (the healer is not in "
                  "this build); the heal phase will fail", flush=True)
        s3 = c.s3()
        s3.create_bucket(Bucket=BUCKET)
        # every healer past its start-up check: from here on a scan is a heal of absence
        ch.wait_for("every healer's start-up check",
                    lambda: all(v >= 1 for v in scans(c.running_nodes()).values()), 120)
        load = Load(c)
        load.start()
        wait_for_acks(load, 12, 180)

        # two datanodes die under the load
        a, b = 3, 6
        c.kill(a)
        c.kill(b)
        t_kill = time.time()
        print(f"     {time.strftime('%T')} killed dn-{a}, dn-{b} after {len(load.acked)} PUTs",
              flush=True)
        live = [f"dn-{i}" for i in c.nodes if i not in (a, b)]
        c.wait_registered(live, timeout=ch.LEASE_TTL + 60)
        c.wait_live(6, timeout=60)
        ch.wait_for("the gateway's view to hold 6 nodes",
                    lambda: c.gw.metrics().get("zest_cluster_live_nodes") == 6, 60)
        t_gone = time.time()
        survivors = [n for i, n in c.nodes.items() if i not in (a, b)]
        scans_gone = scans(survivors)
        print(f"     both out of every view {t_gone - t_kill:.1f} s after the kill", flush=True)
        time.sleep(6)  # PUTs against the six
        load.join()
        late = [(k, e) for t0, k, ok, e in load.first_try if t0 > t_gone + 2 and not ok]
        before = [k for t0, k, ok, _ in load.first_try if t0 <= t_gone + 2 and not ok]
        print(f"     {len(load.acked)} PUTs acknowledged, {len(load.failed)} never; "
              f"{len(before)} needed a retry while the two were in the views, "
              f"{len(late)} after", flush=True)
        assert not load.failed, f"PUTs never acknowledged: {list(load.failed.items())[:5]}"
        assert not late, f"PUTs failed with the two out of the views: {late[:5]}"
        assert any(s >= 70 * MiB for s, _ in load.acked.values()), "no 70 MiB upload went in"

        # read back with both down, before their absence is healed: the objects written
        # before the kill are read around the two (cells marked missing are healed at once)
        verify(c, load, f"dn-{a} and dn-{b} down")
        degraded = ch.metric_sum(c.gw.metrics(), "zest_degraded_reads_total")
        print(f"     gateway degraded reads: {degraded:.0f} "
              f"({time.time() - t_gone:.1f} s after the two left the views)", flush=True)
        assert degraded > 0, "no read was degraded with two nodes down"
        assert scans(survivors) == scans_gone, \
            ("a heal of the two's absence began before the read-back ended (raise HEAL_AFTER)",
             scans_gone, scans(survivors))

        # dn-a back with empty drives before --heal-after: its cells are missing where the
        # records name it (the healers find them by checking their records)
        c.restart(a, wipe=True)
        c.wait_live(7)
        verify(c, load, f"dn-{b} down, dn-{a} back wiped")

        # dn-b absent past --heal-after: its cells rebuilt elsewhere; then back intact
        ch.wait_for(f"every survivor's healer to scan for dn-{b}'s absence",
                    lambda: all(v > scans_gone[k] for k, v in scans(survivors).items()),
                    HEAL_AFTER + 300, step=1)
        st = wait_healed(c, f"dn-{b} away, dn-{a} wiped", healed_min=1)
        print(f"     healed with dn-{b} away: {st}", flush=True)
        c.restart(b)
        c.wait_live(8)
        st = wait_healed(c, f"dn-{b} back intact")
        print(f"     healed with all 8: {st}", flush=True)
        verify(c, load, "all 8 back")

        # two others die: every group must have k cells on the remaining six
        c.kill(1)
        c.kill(8)
        verify(c, load, "dn-1 and dn-8 killed after the heal")


def wait_for_acks(load, n, timeout):
    ch.wait_for(f"{n} acknowledged PUTs", lambda: len(load.acked) >= n or load.failed, timeout,
                step=0.2)
    assert not load.failed, f"PUTs failed before any kill: {list(load.failed.items())[:3]}"


if __name__ == "__main__":
    ch.run([test_kill_two_heal_kill_two])
