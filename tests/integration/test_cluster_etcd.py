#!/usr/bin/env python3
"""etcd faults under a zest cluster (docs/cluster.md): six datanodes, RS(4,2), the gateway
--cluster, a three-member etcd.

- One member (the leader) SIGKILLed: service goes on. After the election (~1 s here) every
  PUT and GET succeeds, the six stay registered.
- Every member down: a PUT is answered 503 (SlowDown or ServiceUnavailable) within the
  commit's deadline; a GET of a known object either returns its exact bytes or fails
  cleanly (a 5xx, no hang); a PUT streaming when etcd goes away reads back whole or not at
  all once etcd is back; nothing partial is ever visible.
- etcd back: PUTs succeed again, every acknowledged object reads back, and the object whose
  PUT was cut reads back whole or not at all.

Exits 77 without etcd or without the gateway's --cluster.
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

MiB = 1 << 20
BUCKET = "etcdf"


def leader(etcd):
    """Index of the member that leads now."""
    out = json.loads(etcd.ctl("endpoint", "status", "-w", "json").stdout)
    for st in out:
        if st["Status"]["leader"] == st["Status"]["header"]["member_id"]:
            ep = st["Endpoint"].replace("http://", "")
            return [etcd.member_endpoint(i) for i in range(len(etcd.procs))].index(ep)
    raise AssertionError(f"no leader in {out}")


def put_retrying(s3, key, data, tries=10):
    """Attempts it took (an AssertionError when none worked)."""
    errors = []
    for attempt in range(tries):
        try:
            s3.put_object(Bucket=BUCKET, Key=key, Body=data)
            return attempt + 1, errors
        except Exception as e:
            errors.append(ch.error_code(e))
            time.sleep(1)
    raise AssertionError(f"PUT {key} failed {tries} times: {errors}")


def test_etcd_member_loss_and_outage():
    with ch.cluster(nodes=6, ec="4+2", cell_size=65536, stripes_per_group=2,
                    etcd_members=3) as c:
        s3 = c.s3()
        s3.create_bucket(Bucket=BUCKET)
        acked = {}
        for i in range(6):
            data = ch.body(f"a{i}", (i * 777_777) % (3 * MiB))
            s3.put_object(Bucket=BUCKET, Key=f"a{i}", Body=data)
            acked[f"a{i}"] = (len(data), ch.digest(data))

        # the leader dies: one election, then everything as before
        lead = leader(c.etcd)
        c.etcd.stop_member(lead)
        t0 = time.time()
        retried = []
        for i in range(12):
            data = ch.body(f"b{i}", (i * 333_333) % (2 * MiB) + 1)
            n, errs = put_retrying(s3, f"b{i}", data)
            if n > 1:
                retried.append((f"b{i}", round(time.time() - t0, 1), errs))
            acked[f"b{i}"] = (len(data), ch.digest(data))
        print(f"     leader e{lead} killed: 12 PUTs, retried {retried}", flush=True)
        # a hang check, not a speed check: each client fails over once, promptly
        late = [r for r in retried if r[1] > 30]
        assert not late, f"PUTs still failing 30 s after the leader died: {late}"
        for key, want in acked.items():
            assert ch.get_digest(s3, BUCKET, key) == want, key
        assert len(c.registered()) == 6, c.registered()

        # a PUT in flight when the whole of etcd goes away
        cut = {}

        def cut_put():
            s3c = c.s3(retries=0, read_timeout=60)
            data = ch.body("cut", 48 * MiB)
            cut["sha"] = ch.digest(data)
            try:
                s3c.put_object(Bucket=BUCKET, Key="cut", Body=data)
                cut["status"] = 200
                cut["t"] = time.time()
            except Exception as e:
                cut["status"] = ch.error_code(e)

        th = threading.Thread(target=cut_put)
        th.start()
        time.sleep(0.5)  # it is streaming (48 MiB through RS(4,2) takes seconds here)
        c.etcd.stop_all()
        t_down = time.time()

        # answered, not hung: a hang is a client-side read timeout, not a 503 (the
        # gateway's etcd deadlines are a few seconds; 120 s is generous)
        s3d = c.s3(retries=0, read_timeout=120)
        t0 = time.time()
        try:
            s3d.put_object(Bucket=BUCKET, Key="down", Body=b"x" * 1000)
            raise AssertionError("a PUT succeeded with etcd down")
        except s3d.exceptions.ClientError as e:
            code = ch.error_code(e)
        took = time.time() - t0
        print(f"     etcd down: PUT answered {code} in {took:.1f} s", flush=True)
        # 503 either way: SlowDown (ZC_UNAVAILABLE, the deadline passed) or ServiceUnavailable
        # (ZC_NO_QUORUM, no member answered: s3_util.c's mapping); SDKs retry both
        assert code in ((503, "SlowDown"), (503, "ServiceUnavailable")), code
        gets = {}
        for key, want in list(acked.items())[:6]:
            try:
                got = ch.get_digest(s3d, BUCKET, key)
                assert got == want, f"GET {key} with etcd down returned other bytes"
                gets[key] = "ok"
            except AssertionError:
                raise
            except Exception as e:
                gets[key] = ch.error_code(e)  # a read timeout (a hang): no status
        print(f"     etcd down: GETs {gets}", flush=True)
        bad = [v for v in gets.values() if v != "ok" and (v[0] is None or v[0] < 500)]
        assert not bad, f"GETs failed with etcd down, but not as a server error: {bad}"
        th.join(120)
        assert not th.is_alive(), "the PUT cut by the etcd outage hung"
        if cut["status"] == 200:  # committed before the outage: must read back whole
            print(f"     the PUT meant to be cut finished {cut['t'] - t_down:+.1f} s from the "
                  "outage", flush=True)
        else:
            print(f"     the PUT cut by the outage: {cut['status']}", flush=True)
        time.sleep(max(0, ch.LEASE_TTL + 1 - (time.time() - t_down)))  # leases lost too

        # etcd back: service resumes
        c.etcd.start_all()
        t0 = time.time()
        n, errs = put_retrying(s3, "after", b"back", tries=30)
        print(f"     etcd back: first PUT after {time.time() - t0:.1f} s ({n} attempts)",
              flush=True)
        acked["after"] = (4, ch.digest(b"back"))
        c.wait_registered([f"dn-{i}" for i in c.nodes], timeout=90)
        for i in range(6):
            data = ch.body(f"c{i}", i * 100_000)
            s3.put_object(Bucket=BUCKET, Key=f"c{i}", Body=data)
            acked[f"c{i}"] = (len(data), ch.digest(data))
        for key, want in acked.items():
            assert ch.get_digest(s3, BUCKET, key) == want, key
        try:
            got = ch.get_digest(s3, BUCKET, "cut")
            assert got == (48 * MiB, cut["sha"]), f"the cut PUT is visible partial: {got}"
            print("     the cut PUT is there whole (its commit reached etcd)", flush=True)
        except s3.exceptions.ClientError as e:
            assert ch.error_code(e)[0] == 404, ch.error_code(e)
            assert cut["status"] != 200, "an acknowledged PUT is gone after the outage"
        listed = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
        assert set(acked) <= listed, set(acked) - listed
        assert listed <= set(acked) | {"cut"}, listed - set(acked)


if __name__ == "__main__":
    ch.run([test_etcd_member_loss_and_outage])
