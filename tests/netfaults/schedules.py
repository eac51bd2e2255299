"""Named fault schedules, and the run that drives them: a cluster in namespaces (nf_cluster),
clients writing a history (history.py) the whole time, after the last schedule a heal,
final reads, the collector's grace, and the checks: checker.py over the history, no orphan
or lost cell on the drives, zest-admin status HEALTH_OK.

    schedules.py --group a                    # the short forms of meson test netfaults_a
    schedules.py --only etcd_minority,flap    # some schedules by name
    schedules.py --random --seed 7 --duration 1800 --max-size 40MiB   # make partitions

A schedule is f(run, s) where s scales its waits (1 in the short form, more in the long
one); it applies faults, waits, and ends with everything healed. Exit 0: no anomaly; 1:
anomalies (listed); 77: namespaces or the daemons are not available here.
"""
import argparse
import itertools
import os
import random
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checker  # noqa: E402
import history  # noqa: E402
import nf_cluster  # noqa: E402
from nf_cluster import ETCD_ROLES, LEASE_TTL  # noqa: E402

WRITER_IDS = itertools.count(100)  # the schedules' own writers, after the clients' ids

KEYS = [f"k{i}" for i in range(6)]
SCHEDULES = {}


def schedule(group):
    def reg(f):
        SCHEDULES[f.__name__] = (group, f)
        return f
    return reg


class Run:
    def __init__(self, c, hist, rng, max_size):
        self.c, self.hist, self.rng, self.max_size = c, hist, rng, max_size

    def note(self, text):
        self.hist.note(text)
        print(f"  {time.strftime('%H:%M:%S')} {text}", flush=True)

    def wait(self, s):
        time.sleep(s)

    def node(self):
        return self.rng.choice(self.c.dn_roles)

    def coordinator(self, key, among=None):
        """The node the gateways try first as coordinator of key."""
        import cluster_harness as ch
        return ch.place_rank(history.BUCKET, key, among or self.c.dn_roles)[0]

    def heal(self):
        self.note("heal_all")
        self.c.heal_all()
        self.c.wait_settled()

    def writer(self, key, sizes, gw="gw1"):
        """A thread PUTting key with each size in turn (logged in the history)."""
        stop = threading.Event()
        # a cid of its own: two writers made one after the other must never share one (the
        # checker tells PUTs apart by the writer id in their bytes)
        cl = history.Client(next(WRITER_IDS), self.c.s3(gw, read_timeout=60), gw,
                            self.hist, [key], stop, random.Random(0), 0)
        def go():
            for size in sizes:
                cl.size = lambda size=size: size
                cl.put(key)
        t = threading.Thread(target=go, daemon=True)
        t.start()
        return t


# ---- the schedules
@schedule("a")
def etcd_cut_node(r, s):
    """A datanode that reaches its peers but not etcd, past its lease."""
    n = r.node()
    r.note(f"isolate_from_etcd({n})")
    r.c.isolate_from_etcd(n)
    r.wait((LEASE_TTL + 2) * s)
    r.heal()


@schedule("a")
def coord_cut_mid_commit(r, s):
    """NF-1's schedule: the coordinator of a key cut from etcd while its PUTs commit, for
    longer than the collectors' grace, then healed: a commit Txn held in the cut
    connection reaches etcd after the collectors deleted its pending cells."""
    key = r.rng.choice(KEYS)
    n = r.coordinator(key)
    ts = [r.writer(key, [3 << 20, 2 << 20, 1 << 20], gw) for gw in r.c.gw_roles]
    r.wait(0.3)
    r.note(f"isolate_from_etcd({n}) mid-commit of {key}")
    r.c.isolate_from_etcd(n)
    r.wait((3 * r.c.gc_grace + 2) * s)
    r.heal()
    for t in ts:
        t.join(120)
    r.wait(r.c.gc_grace)


@schedule("a")
def etcd_minority(r, s):
    """One etcd member cut from the others and from every daemon."""
    e = r.rng.choice(ETCD_ROLES)
    r.note(f"partition({e} | rest)")
    r.c.isolate(e)
    r.wait(6 * s)
    r.heal()


# Long form only until NF-6 is fixed (docs/reliability.md, "Network faults"): after its
# heal a LIST showed a key deleted before the LIST began, once in three short runs.
@schedule("long")
def etcd_majority(r, s):
    """Two etcd members (the majority) cut from every datanode and gateway, which reach
    only the third: no quorum for them, then the heal."""
    lone = r.rng.choice(ETCD_ROLES)
    maj = [e for e in ETCD_ROLES if e != lone]
    r.note(f"partition({','.join(maj)} | datanodes, gateways)")
    r.c.partition(maj, r.c.dn_roles + r.c.gw_roles)
    r.wait(6 * s)
    r.heal()


@schedule("a")
def gateway_sees_half(r, s):
    gw = r.rng.choice(r.c.gw_roles)
    r.note(f"gateway_sees_half({gw})")
    r.c.gateway_sees_half(gw)
    r.wait(8 * s)
    r.heal()


@schedule("b")
def oneway_peers(r, s):
    """Two pairs of datanodes, each cut one way."""
    a, b, x, y = r.rng.sample(r.c.dn_roles, 4)
    r.note(f"partition({a} -> {b}, one way), partition({x} -> {y}, one way)")
    r.c.partition([a], [b], oneway=True)
    r.c.partition([x], [y], oneway=True)
    r.wait(8 * s)
    r.heal()


@schedule("b")
def partition_during_heal(r, s):
    """A node back with wiped drives (healers rebuild its cells), then the datanodes cut
    in halves while they heal."""
    n = r.node()
    r.note(f"restart_wiped({n})")
    r.c.restart_wiped(n)
    r.wait((r.c.heal_after + 1) * s)
    half = r.rng.sample(r.c.dn_roles, len(r.c.dn_roles) // 2)
    rest = [d for d in r.c.dn_roles if d not in half]
    r.note(f"partition({','.join(half)} | {','.join(rest)})")
    r.c.partition(half, rest)
    r.wait(6 * s)
    r.heal()


@schedule("b")
def flap(r, s):
    """A node isolated and healed four times, two seconds each."""
    n = r.node()
    for i in range(4 * s):
        r.note(f"isolate({n}) #{i + 1}")
        r.c.isolate(n)
        r.wait(2)
        r.c.net.heal()
        r.wait(2)
    r.heal()


@schedule("b")
def pause_past_lease(r, s):
    """A datanode SIGSTOPped longer than its lease (it comes back to a lost lease)."""
    n = r.node()
    r.note(f"pause({n})")
    r.c.pause(n)
    r.wait((LEASE_TTL + 3) * s)
    r.note(f"resume({n})")
    r.heal()


@schedule("long")
def coord_isolated(r, s):
    """A key's coordinator cut from everything mid-PUT."""
    key = r.rng.choice(KEYS)
    n = r.coordinator(key)
    t = r.writer(key, [4 << 20, 1 << 20])
    r.wait(0.3)
    r.note(f"isolate({n}) mid-PUT of {key}")
    r.c.isolate(n)
    r.wait(6 * s)
    r.heal()
    t.join(120)


@schedule("long")
def kill_restart(r, s):
    n = r.node()
    r.note(f"kill({n})")
    r.c.kill(n)
    r.wait(5 * s)
    r.note(f"restart_wiped({n})")
    r.c.restart_wiped(n)
    r.heal()


@schedule("long")
def pause_gateway(r, s):
    gw = r.rng.choice(r.c.gw_roles)
    r.note(f"pause({gw})")
    r.c.pause(gw)
    r.wait(5 * s)
    r.heal()


# ---- the end-of-run checks
def named_cells(c):
    """{node: {(extent hex, group, cell)}} of every cell a record names, not missing."""
    out = {r: set() for r in c.dn_roles}
    for rec in c.records().values():
        for e in rec["extents"]:
            for g, grp in enumerate(e["groups"]):
                for ci, ni in enumerate(grp["cells"]):
                    if grp["missing"] & (1 << ci) or ni >= len(e["nodes"]):
                        continue
                    node = e["nodes"][ni]
                    if node in out:
                        out[node].add((f"{e['id']:016x}", g, ci))
    return out


def cell_diff(c):
    """(orphans, lost): cells on drives no record names, named cells no drive holds."""
    named = named_cells(c)
    orphans, lost = [], []
    for r in c.dn_roles:
        have = c.cells(r)
        orphans += [(r, *x) for x in sorted(have - named[r])]
        lost += [(r, *x) for x in sorted(named[r] - have)]
    return orphans, lost


def wait_clean(c, timeout):
    """Until no orphan or lost cell and HEALTH_OK (or the deadline): the anomalies left."""
    deadline = time.time() + timeout
    while True:
        orphans, lost = cell_diff(c)
        rc, out = c.admin_status()
        ok = rc == 0 and "HEALTH_OK" in out
        if (not orphans and not lost and ok) or time.time() > deadline:
            break
        time.sleep(1)
    anoms = []
    if orphans:
        anoms.append({"kind": "orphan-cells", "op": None, "key": None,
                      "why": f"{len(orphans)} cells on drives no record names, e.g. "
                             f"{orphans[:3]}"})
    if lost:
        anoms.append({"kind": "lost-cells", "op": None, "key": None,
                      "why": f"{len(lost)} named cells on no drive, e.g. {lost[:3]}"})
    if not ok:
        anoms.append({"kind": "health", "op": None, "key": None,
                      "why": f"zest-admin status exit {rc}: {out.strip()[:600]}"})
    return anoms


def run(names, seed, max_size, clients, scale, duration=None, out_dir=None):
    rng = random.Random(seed)
    print(f"netfaults: seed={seed} schedules={','.join(names) if names else 'random'} "
          f"duration={duration}", flush=True)
    hist = history.History()
    c = nf_cluster.NFCluster()
    with c:
        boot = c.s3(c.gw_roles[0])
        boot.create_bucket(Bucket=history.BUCKET)
        r = Run(c, hist, rng, max_size)
        stop = threading.Event()
        cls = [history.Client(i, c.s3(c.gw_roles[i % len(c.gw_roles)]),
                              c.gw_roles[i % len(c.gw_roles)], hist, KEYS, stop,
                              random.Random(f"{seed}.{i}"), max_size,
                              mpu_every=12 if max_size > 8 << 20 else 30, pause=0.02)
               for i in range(clients)]
        for t in cls:
            t.start()
        t0 = time.time()
        try:
            time.sleep(2)
            pool = sorted(SCHEDULES)
            i = 0
            while True:
                if names:
                    if i >= len(names):
                        break
                    name = names[i]
                elif time.time() - t0 >= duration:
                    break
                else:
                    name = rng.choice(pool)
                i += 1
                print(f"schedule {name}", flush=True)
                r.note(f"schedule {name}")
                SCHEDULES[name][1](r, scale)
                time.sleep(1)
        finally:
            stop.set()
            for t in cls:
                t.join(180)
            c.heal_all()
        for t in cls:
            if t.error:
                raise t.error
        c.wait_settled()
        # the collectors' grace and read grace, then every key read and listed
        time.sleep(c.gc_grace + c.read_grace + 1)
        history.final_reads(c, hist, KEYS)
        anoms = checker.check(hist.ops, KEYS)
        # cells whose DeleteCells was lost wait for the committed scan (8 x the grace here)
        anoms += wait_clean(c, 16 * max(c.gc_grace, c.read_grace) + 60)
        if out_dir or anoms:
            path = os.path.join(out_dir or c.root, "history.json")
            hist.dump(path)
            print(f"history in {path}")
            os.environ["ZEST_KEEP"] = "1" if anoms else os.environ.get("ZEST_KEEP", "")
    left = nf_cluster.netns.leftovers(c.net.prefix)
    if left:
        anoms.append({"kind": "leftovers", "op": None, "key": None,
                      "why": f"namespaces or links left after the run: {left}"})
    print(f"ops {hist.counts()}")
    for name, (n, k) in per_schedule(hist, anoms).items():
        print(f"  {name:24} {n:5} ops, anomalies {k or 0}")
    for a in anoms:
        print(f"ANOMALY {a['kind']:14} op={a['op']} key={a['key']}: {a['why']}")
    print(f"{len(hist.ops)} ops, {len(anoms)} anomalies {checker.summary(anoms)} (seed {seed})")
    return anoms


def per_schedule(hist, anoms):
    """{schedule: (ops invoked during it, {anomaly kind: n})} in the order they first ran
    (a schedule run again adds to its line)."""
    marks = [(t, text.split()[1]) for t, text in hist.events if text.startswith("schedule ")]
    out = {}

    def which(t):
        name = "start"
        for mt, mn in marks:
            if mt <= t:
                name = mn
        return name
    for o in hist.ops:
        name = "final reads" if o.get("final") else which(o["invoke"])
        out.setdefault(name, [0, {}])[0] += 1
    for a in anoms:
        name = which(hist.ops[a["op"]]["invoke"]) if a["op"] is not None else "end checks"
        ent = out.setdefault(name, [0, {}])
        ent[1][a["kind"]] = ent[1].get(a["kind"], 0) + 1
    return {k: tuple(v) for k, v in out.items()}


def size_arg(v):
    units = {"kib": 1 << 10, "mib": 1 << 20, "k": 1 << 10, "m": 1 << 20}
    for u, f in units.items():
        if v.lower().endswith(u):
            return int(float(v[:-len(u)]) * f)
    return int(v)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--group", help="the short schedules of a group (a, b)")
    ap.add_argument("--only", help="comma-separated schedule names")
    ap.add_argument("--random", action="store_true", help="random schedules for --duration")
    ap.add_argument("--seed", type=int, default=None, help="replays a random run")
    ap.add_argument("--duration", type=float, default=1800)
    ap.add_argument("--max-size", type=size_arg, default=3 << 20)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--scale", type=int, default=1, help="waits x this (long form: 2)")
    ap.add_argument("--out", help="keep the history here")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv[1:])
    if a.list:
        for n, (g, f) in sorted(SCHEDULES.items()):
            print(f"{n:24} {g:5} {f.__doc__.split(chr(10))[0] if f.__doc__ else ''}")
        return 0
    why = nf_cluster.skip_reason()
    if why:
        print(f"SKIP: {why}")
        return 77
    seed = a.seed if a.seed is not None else (random.SystemRandom().randrange(1 << 31)
                                              if a.random else 1)
    names = None
    if a.only:
        names = a.only.split(",")
    elif a.group:
        names = [n for n, (g, _) in SCHEDULES.items() if g == a.group]
    elif not a.random:
        ap.error("--group, --only or --random")
    for n in names or []:
        if n not in SCHEDULES:
            ap.error(f"no schedule {n} (--list)")
    anoms = run(names, seed, a.max_size, a.clients, a.scale, a.duration, a.out)
    return 1 if anoms else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
