"""A rolling restart under load: etcd, 8 datanodes RS 4+2, the gateway --cluster.

Writers PUT new objects and readers GET acknowledged ones the whole time, through boto3
with no retries of its own: a 503 (SlowDown, the gateway's "try again") is retried by the
client loop and counted, anything else is a failure. Each node in turn is stopped (SIGTERM,
exit 0) only once `zest-admin ok-to-stop dn-i` exits 0, started again on its address with
its drives, and the cluster must be HEALTH_OK again before the next node. At the end: no
client error other than retried 503s, every acknowledged object reads back byte for byte,
health OK (redundancy full: no object degraded, nothing to heal).
"""
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402
from test_cluster_health import admin, status  # noqa: E402

ADMIN = os.environ.get("ZEST_ADMIN") or os.path.join(ch.zh.BUILD, "tools", "zest-admin")
NODES = 8
BUCKET = "rolling"
SIZES = [1, 4096, 65536 + 7, 200_000, 300_000]


class Load:
    """Writer and reader threads; acked: key -> digest of every PUT answered 200."""

    def __init__(self, c, writers=2, readers=2):
        self.c = c
        self.acked = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors = []
        self.retried_503 = 0
        self.puts = self.gets = 0
        self.threads = [threading.Thread(target=self.writer, args=(w,), daemon=True)
                        for w in range(writers)]
        self.threads += [threading.Thread(target=self.reader, args=(r,), daemon=True)
                         for r in range(readers)]

    def call(self, fn):
        """fn() until it does not answer 503; a 503 is counted, anything else recorded."""
        from botocore.exceptions import ClientError
        for attempt in range(200):
            try:
                return fn()
            except ClientError as e:
                status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status != 503:
                    raise
                with self.lock:
                    self.retried_503 += 1
                time.sleep(0.1 + 0.05 * min(attempt, 20))
        raise AssertionError("503 for 200 tries")

    def writer(self, w):
        s3 = self.c.s3(retries=0, read_timeout=60)
        rng = random.Random(w)
        n = 0
        while not self.stop.is_set():
            key = f"w{w}/o{n:05d}"
            data = ch.body(key, rng.choice(SIZES))
            try:
                self.call(lambda: s3.put_object(Bucket=BUCKET, Key=key, Body=data))
            except Exception as e:  # noqa: BLE001 - every error is the test's finding
                self.errors.append(f"PUT {key}: {e!r}")
                continue
            with self.lock:
                self.acked[key] = (len(data), ch.digest(data))
                self.puts += 1
            n += 1

    def reader(self, r):
        s3 = self.c.s3(retries=0, read_timeout=60)
        rng = random.Random(100 + r)
        while not self.stop.is_set():
            with self.lock:
                keys = list(self.acked)
            if not keys:
                time.sleep(0.05)
                continue
            key = rng.choice(keys)
            try:
                got = self.call(lambda: ch.get_digest(s3, BUCKET, key))
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"GET {key}: {e!r}")
                continue
            if got != self.acked[key]:
                self.errors.append(f"GET {key}: other bytes")
            with self.lock:
                self.gets += 1

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(120)
            assert not t.is_alive(), "a client thread hung"


def wait_ok_to_stop(c, node, timeout=120):
    deadline = time.time() + timeout
    while True:
        rc, out = admin(c, "ok-to-stop", node)
        if rc == 0:
            return
        assert time.time() < deadline, f"ok-to-stop {node} never 0: {out}"
        time.sleep(0.5)


def test_rolling_restart():
    if not os.path.exists(ADMIN):
        raise ch.Skip(f"no {ADMIN}")
    with ch.cluster(nodes=NODES, ec="4+2", cell_size=65536, stripes_per_group=2, drives=2,
                    heal_after="20s", gc_grace="60s", dn_base=150) as c:
        ch.wait_for("every store checked: HEALTH_OK",
                    lambda: status(c)["state"] == "HEALTH_OK", 120, step=0.5)
        c.s3().create_bucket(Bucket=BUCKET)
        load = Load(c)
        load.start()
        try:
            ch.wait_for("some objects acknowledged", lambda: len(load.acked) >= 10, 60)
            for i in range(1, NODES + 1):
                node = f"dn-{i}"
                t0 = time.time()
                wait_ok_to_stop(c, node)
                assert c.stop_node(i) == 0, f"{node} exited non-zero at SIGTERM"
                c.restart(i)
                ch.wait_for(f"HEALTH_OK after restarting {node}",
                            lambda: status(c)["state"] == "HEALTH_OK", 120, step=0.5)
                print(f"     {node} restarted, OK again in {time.time() - t0:.1f} s; "
                      f"{len(load.acked)} acked, {load.retried_503} 503s retried", flush=True)
                assert not load.errors, load.errors[:5]
        finally:
            load.finish()
        assert not load.errors, load.errors[:5]
        assert load.puts >= 20 and load.gets >= 20, (load.puts, load.gets)
        # every acknowledged object, byte for byte
        s3 = c.s3(retries=0)
        for key, want in sorted(load.acked.items()):
            assert ch.get_digest(s3, BUCKET, key) == want, key
        st = status(c)
        assert st["state"] == "HEALTH_OK", st
        assert st["objects"]["ok"] == st["objects"]["total"] >= len(load.acked), st
        assert st["objects"]["degraded"] == 0 and st["cells"]["missing"] == 0, st
        assert st["heal"]["todo_keys"] == 0, st
        assert st["nodes"]["live"] == NODES and st["nodes"]["absent"] == 0, st
        print(f"     {len(load.acked)} objects acked and read back ({load.gets} GETs under "
              f"load), {load.retried_503} 503s retried, no other error", flush=True)


if __name__ == "__main__":
    ch.run([test_rolling_restart])
