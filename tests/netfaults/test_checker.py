"""checker.py on hand-made histories: a clean one passes, each anomaly kind is found, and
the cases that look like anomalies but are not (an unknown write landing late, a read
concurrent with an overwrite) pass. meson test netfault_checker."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402
import history  # noqa: E402


class H:
    def __init__(self):
        self.ops = []

    def op(self, kind, key, t0, t1, status="ok", **kw):
        o = dict(kw, id=len(self.ops), op=kind, key=key, invoke=t0, complete=t1,
                 status=status, client=0, gw="gw1")
        self.ops.append(o)
        return o

    def put(self, key, wid, t0, t1, status="ok", size=100):
        return self.op("put", key, t0, t1, status, wid=wid, size=size)

    def get(self, key, value, t0, t1, **kw):
        return self.op("get", key, t0, t1, value=value, **kw)

    def kinds(self, keys=("a", "b")):
        return sorted(a["kind"] for a in checker.check(self.ops, list(keys)))


def clean():
    h = H()
    h.get("a", None, 0, 1)
    h.put("a", "w1", 1, 2)
    h.get("a", "w1", 3, 4)
    h.op("head", "a", 3, 4, value="w1", size=100)
    h.put("a", "w2", 5, 8)
    h.get("a", "w1", 6, 7)  # concurrent with w2: either
    h.get("a", "w2", 6, 7)
    h.op("list", None, 9, 10, keys=["a"])
    h.op("delete", "a", 11, 12)
    h.get("a", None, 13, 14)
    h.op("list", None, 13, 14, keys=[])
    h.put("b", "w3", 15, 16, status="unknown")  # may land any time later
    h.get("b", None, 17, 18)
    h.get("b", "w3", 19, 20)
    h.get("b", None, 21, 22)  # (a linearizability checker would say more; we say what
    h.op("mpu", "a", 23, 26, wid="m1", size=6 << 20, completing=25)  # S3 guarantees)
    h.get("a", "m1", 27, 28, final=True)
    h.get("b", "w3", 27, 28, final=True)
    return h


def test_clean():
    assert clean().kinds() == [], clean().kinds()


def test_each_kind():
    cases = {
        "stale": lambda h: (h.put("a", "w1", 0, 1), h.put("a", "w2", 2, 3),
                            h.get("a", "w1", 4, 5)),
        "lost": lambda h: (h.put("a", "w1", 0, 1), h.get("a", None, 2, 3)),
        "corrupt": lambda h: (h.put("a", "w1", 0, 1),
                              h.get("a", None, 2, 3, corrupt="torn")),
        "phantom": lambda h: h.get("a", "w9", 0, 1),
        "foreign": lambda h: (h.put("b", "w1", 0, 1), h.get("a", "w1", 2, 3)),
        "failed-visible": lambda h: (h.put("a", "w1", 0, 1, status="failed"),
                                     h.get("a", "w1", 2, 3)),
        "future": lambda h: (h.get("a", "w1", 0, 1), h.put("a", "w1", 2, 3)),
        "list-lost": lambda h: (h.put("a", "w1", 0, 1),
                                h.op("list", None, 2, 3, keys=[])),
        "list-stale": lambda h: (h.put("a", "w1", 0, 1), h.op("delete", "a", 2, 3),
                                 h.op("list", None, 4, 5, keys=["a"])),
        "unknown-key": lambda h: h.op("list", None, 0, 1, keys=["a/.part1"]),
        "unreadable": lambda h: (h.put("a", "w1", 0, 1),
                                 h.get("a", None, 2, 3, final=True)
                                 .update(status="failed")),
    }
    for kind, make in cases.items():
        h = H()
        make(h)
        got = h.kinds()
        assert kind in got, f"{kind}: found {got}"
        assert set(got) <= {kind, "lost"}, f"{kind}: also {got}"


def test_mpu_before_complete_invisible():
    h = H()
    h.op("mpu", "a", 0, 10, wid="m1", size=6 << 20, completing=8)
    h.get("a", "m1", 2, 3)  # read before Complete went out: the upload cannot show
    assert h.kinds() == ["future"], h.kinds()


def test_payload_roundtrip():
    for size in (0, 64, 1000, 70000):
        data = history.payload("c1.7", size)
        assert history.identify(data) == ("c1.7" if size else "", None)
    a, b = history.payload("c1.1", 5000), history.payload("c2.1", 5000)
    wid, why = history.identify(a[:2500] + b[2500:])
    assert wid is None and "hash" in why, why
    wid, why = history.identify(a[:4000])
    assert wid is None and "header says" in why, why


if __name__ == "__main__":
    for name, f in list(globals().items()):
        if name.startswith("test_"):
            f()
            print("ok  ", name)
