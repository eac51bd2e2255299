"""The checker of a history (history.py): every anomaly, by kind.

Per key, a read (GET, HEAD, a LIST's view of the key, the final reads) must be explained by
a write x of that key, or by the key's initial absence:
- x was invoked before the read completed, and did not definitely fail (a failed write's
  bytes are "failed-visible");
- no acknowledged write y of the key began after x was acknowledged and was acknowledged
  before the read began (x superseded: the read is "stale", or "lost" when it found nothing).
  A write whose answer was lost (unknown) may take effect at any time after its invoke
  (even after the client gave up: a commit held in a partitioned connection), so it
  supersedes nothing and is never superseded itself.
A GET value names its PUT by the payload header; bytes that are no PUT's are "corrupt"
(torn or foreign), a value of another key is "foreign", a value nobody wrote "phantom".
An empty object is explained by any empty PUT of the key. A LIST may hold only keys of the
key space ("unknown-key": a multipart part or any other internal object shown); for each
key, presence must be explained by a PUT, absence by a DELETE or the initial state. Each key
needs one answered final read ("unreadable" otherwise).

check(ops, keys) -> [anomaly dicts {"kind", "op", "key", "why"}]; main(): a history file.
"""
import json
import sys

INF = float("inf")
WRITES = ("put", "mpu", "delete")


def _start(x):
    return x.get("completing", x["invoke"]) if x["op"] == "mpu" else x["invoke"]


def _end(x):
    """When x is known to have taken effect (unknown: never known)."""
    return x["complete"] if x["status"] == "ok" else INF


class _Key:
    def __init__(self, key, writes):
        self.key = key
        self.writes = writes  # ok, unknown and failed writes of the key
        self.acked = [w for w in writes if w["status"] == "ok"]

    def superseded(self, x_end, r):
        """Is a write that took effect by x_end overwritten before read r began?"""
        return any(y["invoke"] > x_end and y["complete"] < r["invoke"] for y in self.acked)

    def possible(self, cands, r, initial=False):
        """Does one of cands (or the initial absence) explain read r?"""
        if initial and not any(y["complete"] < r["invoke"] for y in self.acked):
            return True
        for x in cands:
            if x["status"] == "failed" or _start(x) >= r["complete"]:
                continue
            if not self.superseded(_end(x), r):
                return True
        return False


def check(ops, keys):
    out = []

    def bad(kind, r, why):
        out.append({"kind": kind, "op": r["id"], "key": r.get("key"), "why": why})

    keyset = set(keys)
    by_key = {k: _Key(k, [o for o in ops if o["op"] in WRITES and o["key"] == k])
              for k in keys}
    by_wid = {o["wid"]: o for o in ops if o["op"] in ("put", "mpu")}
    for r in ops:
        if r["status"] != "ok" or r["op"] not in ("get", "head", "list"):
            continue
        if r["op"] == "list":
            listed = set(r.get("keys", []))
            for k in sorted(listed - keyset):
                bad("unknown-key", r, f"LIST shows {k!r}, not a key any client wrote")
            for k in keys:
                kk = by_key[k]
                puts = [w for w in kk.writes if w["op"] != "delete"]
                dels = [w for w in kk.writes if w["op"] == "delete"]
                if k in listed and not kk.possible(puts, r):
                    bad("list-stale", r, f"LIST shows {k!r}, deleted before it began")
                if k not in listed and not kk.possible(dels, r, initial=True):
                    bad("list-lost", r, f"LIST lacks {k!r}, written before it began")
            continue
        kk = by_key.get(r["key"])
        if kk is None:
            continue
        if r.get("corrupt"):
            bad("corrupt", r, r["corrupt"])
            continue
        v = r.get("value")
        if v is None:
            dels = [w for w in kk.writes if w["op"] == "delete"]
            if not kk.possible(dels, r, initial=True):
                bad("lost", r, f"{r['op']} found no {r['key']!r}: an acknowledged write "
                               "before it is gone")
            continue
        if v == "":
            cands = [w for w in kk.writes if w["op"] != "delete" and w.get("size") == 0]
            if not cands:
                bad("phantom", r, "an empty object no PUT of this key wrote")
            elif not kk.possible(cands, r):
                bad("stale", r, "an empty version overwritten before the read began")
            continue
        x = by_wid.get(v)
        if x is None:
            bad("phantom", r, f"read {v}, which no PUT wrote")
        elif x["key"] != r["key"]:
            bad("foreign", r, f"read {v}, written to {x['key']!r}")
        elif x["status"] == "failed":
            bad("failed-visible", r, f"read {v}, whose PUT failed definitely ({x.get('why')})")
        elif _start(x) >= r["complete"]:
            bad("future", r, f"read {v} before its PUT began")
        elif r["op"] == "head" and r.get("size") is not None and r["size"] != x["size"]:
            bad("corrupt", r, f"HEAD of {v}: {r['size']} bytes, PUT {x['size']}")
        elif not kk.possible([x], r):
            bad("stale", r, f"read {v}, overwritten before the read began")
    for k in keys:
        finals = [o for o in ops if o["op"] == "get" and o.get("final") and o["key"] == k]
        if finals and not any(o["status"] == "ok" for o in finals):
            bad("unreadable", finals[-1], f"the final GET of {k!r} never answered: "
                                          f"{finals[-1].get('why')}")
    return out


def summary(anoms):
    kinds = {}
    for a in anoms:
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
    return kinds


def main(argv):
    with open(argv[1]) as f:
        h = json.load(f)
    keys = sorted({o["key"] for o in h["ops"] if o.get("key")})
    anoms = check(h["ops"], keys)
    for a in anoms:
        print(f"{a['kind']:14} op={a['op']} key={a['key']}: {a['why']}")
    print(f"{len(h['ops'])} ops, {len(anoms)} anomalies {summary(anoms)}")
    return 1 if anoms else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
