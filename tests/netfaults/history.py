"""Client operations against the cluster, each logged with its invoke and complete times and
its outcome, for checker.py.

An operation is a dict:
    {"id", "client", "gw", "op": put|mpu|delete|get|head|list, "key", "invoke", "complete",
     "status": ok|failed|unknown, ...}
  put/mpu: "wid" (the payload's writer/op id), "size";  get/head: "value" (the wid read, None
  for NoSuchKey) or "corrupt" (why the bytes are no PUT's);  list: "keys" (the listing).
Times are time.monotonic() of this process. A write is "unknown" when its answer was lost
(a timeout, a closed connection, a 5xx): it may or may not have taken effect. A definite
4xx is "failed". A read that got no answer is "failed" (it says nothing).

A payload names its writer: a 64-byte header "ZFNF" + wid (client.op) + length + the sha256
of the bytes after the header, then bytes drawn from the wid. A read identifies the PUT that
wrote it by the header, and a torn mix or foreign bytes by the hash. Objects shorter than the
header are empty (size 0: any empty PUT of that key explains an empty read).
"""
import hashlib
import json
import random
import struct
import threading
import time

MAGIC = b"ZFNF"
HDR = 64
BUCKET = "nfbucket"
MIB = 1 << 20


def payload(wid, size):
    if size == 0:
        return b""
    assert size >= HDR
    rest = random.Random(wid).randbytes(size - HDR)
    h = hashlib.sha256(rest).digest()
    w = wid.encode()[:20].ljust(20, b"\0")
    hdr = MAGIC + w + struct.pack(">Q", size) + h[:32]
    assert len(hdr) == HDR
    return hdr + rest


def identify(data):
    """(wid, None) of a payload, ("", None) for an empty one, (None, why) otherwise."""
    if len(data) == 0:
        return "", None
    if len(data) < HDR or data[:4] != MAGIC:
        return None, f"no header ({len(data)} bytes)"
    wid = data[4:24].rstrip(b"\0").decode(errors="replace")
    (size,) = struct.unpack(">Q", data[24:32])
    if size != len(data):
        return None, f"{wid}: header says {size} bytes, read {len(data)}"
    if hashlib.sha256(data[HDR:]).digest() != data[32:64]:
        return None, f"{wid}: body does not hash to its header (torn or foreign bytes)"
    return wid, None


def classify(e):
    """An exception's outcome: failed (a definite 4xx) or unknown."""
    r = getattr(e, "response", None)
    if r:
        code = r.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        if 400 <= code < 500 and code not in (408, 429):
            return "failed", r.get("Error", {}).get("Code")
        return "unknown", r.get("Error", {}).get("Code") or str(code)
    return "unknown", type(e).__name__


def error_code(e):
    r = getattr(e, "response", None)
    return r.get("Error", {}).get("Code") if r else None


class History:
    def __init__(self):
        self.ops = []
        self.lock = threading.Lock()
        self.events = []  # (time, text) of the faults, for the report

    def begin(self, **kw):
        op = dict(kw, invoke=time.monotonic(), complete=None, status=None)
        with self.lock:
            op["id"] = len(self.ops)
            self.ops.append(op)
        return op

    def end(self, op, status, **kw):
        op.update(kw, status=status, complete=time.monotonic())

    def note(self, text):
        with self.lock:
            self.events.append((time.monotonic(), text))

    def dump(self, path):
        with open(path, "w") as f:
            json.dump({"ops": self.ops, "events": self.events}, f)

    def counts(self):
        out = {}
        for o in self.ops:
            k = f"{o['op']}:{o['status']}"
            if o["status"] != "ok" and o.get("why"):
                k += f":{o['why']}"
            out[k] = out.get(k, 0) + 1
        return out


class Client(threading.Thread):
    """One boto3 client on one gateway doing random operations on keys until stop is set."""

    def __init__(self, cid, s3, gw, hist, keys, stop, rng, max_size, mpu_every=12,
                 pause=0.0):
        super().__init__(name=f"client-{cid}", daemon=True)
        self.cid, self.s3, self.gw, self.hist = cid, s3, gw, hist
        self.keys, self.stop, self.rng = keys, stop, rng
        self.max_size, self.mpu_every, self.pause = max_size, mpu_every, pause
        self.n = 0
        self.error = None

    def wid(self):
        self.n += 1
        return f"c{self.cid}.{self.n}"

    def size(self):
        r = self.rng.random()
        if r < 0.1:
            return 0
        if r < 0.6:
            return self.rng.randint(HDR, 64 * 1024)
        if r < 0.9:
            return self.rng.randint(64 * 1024, min(self.max_size, 1 * MIB))
        return self.rng.randint(1 * MIB, self.max_size)

    def run(self):
        try:
            while not self.stop.is_set():
                self.one()
                if self.pause:
                    time.sleep(self.pause)
        except BaseException as e:  # a bug in the client itself: the test fails on it
            self.error = e

    def one(self):
        r = self.rng.random()
        key = self.rng.choice(self.keys)
        if r < 0.30:
            self.put(key)
        elif r < 0.30 + 1 / self.mpu_every:
            self.mpu(key)
        elif r < 0.50:
            self.delete(key)
        elif r < 0.78:
            self.get(key)
        elif r < 0.90:
            self.head(key)
        else:
            self.list()

    def _op(self, kind, key, **kw):
        return self.hist.begin(client=self.cid, gw=self.gw, op=kind, key=key, **kw)

    def put(self, key):
        wid, size = self.wid(), self.size()
        data = payload(wid, size)
        op = self._op("put", key, wid=wid, size=size)
        try:
            self.s3.put_object(Bucket=BUCKET, Key=key, Body=data, Metadata={"nfid": wid})
            self.hist.end(op, "ok")
        except Exception as e:
            st, why = classify(e)
            self.hist.end(op, st, why=why)

    def mpu(self, key):
        """Parts of 5 MiB and a last one of the rest (S3's minimum part size)."""
        wid = self.wid()
        size = self.rng.randint(5 * MIB + HDR, max(5 * MIB + HDR, self.max_size))
        data = payload(wid, size)
        op = self._op("mpu", key, wid=wid, size=size)
        uid = None
        try:
            uid = self.s3.create_multipart_upload(Bucket=BUCKET, Key=key,
                                                  Metadata={"nfid": wid})["UploadId"]
            parts = []
            for i, off in enumerate(range(0, size, 5 * MIB)):
                r = self.s3.upload_part(Bucket=BUCKET, Key=key, UploadId=uid, PartNumber=i + 1,
                                        Body=data[off:off + 5 * MIB])
                parts.append({"PartNumber": i + 1, "ETag": r["ETag"]})
            op["completing"] = time.monotonic()  # before this, nothing can be visible
            self.s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=uid,
                                              MultipartUpload={"Parts": parts})
            self.hist.end(op, "ok")
        except Exception as e:
            st, why = classify(e)
            if "completing" not in op:
                st = "failed"  # Complete never went out: the object cannot change
            self.hist.end(op, st, why=why)
            if uid:
                try:
                    self.s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=uid)
                except Exception:
                    pass

    def delete(self, key):
        op = self._op("delete", key)
        try:
            self.s3.delete_object(Bucket=BUCKET, Key=key)
            self.hist.end(op, "ok")
        except Exception as e:
            st, why = classify(e)
            self.hist.end(op, st, why=why)

    def get(self, key, final=False):
        op = self._op("get", key, final=final)
        try:
            body = self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            wid, why = identify(body)
            if wid is None:
                self.hist.end(op, "ok", value=None, corrupt=why)
            else:
                self.hist.end(op, "ok", value=wid)
        except Exception as e:
            if error_code(e) == "NoSuchKey":
                self.hist.end(op, "ok", value=None)
            else:
                self.hist.end(op, "failed", why=classify(e)[1])
        return op

    def head(self, key):
        op = self._op("head", key)
        try:
            h = self.s3.head_object(Bucket=BUCKET, Key=key)
            wid = h.get("Metadata", {}).get("nfid")
            if wid is None:
                self.hist.end(op, "ok", value=None, corrupt="no nfid metadata")
            else:
                self.hist.end(op, "ok", value=wid, size=h.get("ContentLength"))
        except Exception as e:
            code = error_code(e)
            if code in ("NoSuchKey", "404", "Not Found"):
                self.hist.end(op, "ok", value=None)
            else:
                self.hist.end(op, "failed", why=classify(e)[1])

    def list(self, final=False):
        op = self._op("list", None, final=final)
        try:
            keys, token = [], None
            while True:
                kw = {"Bucket": BUCKET}
                if token:
                    kw["ContinuationToken"] = token
                r = self.s3.list_objects_v2(**kw)
                keys += [o["Key"] for o in r.get("Contents", [])]
                if not r.get("IsTruncated"):
                    break
                token = r["NextContinuationToken"]
            self.hist.end(op, "ok", keys=keys)
        except Exception as e:
            self.hist.end(op, "failed", why=classify(e)[1])
        return op


def final_reads(c, hist, keys, tries=30):
    """After the heal: every key read (GET, until one answers) and one LIST, logged as ops."""
    s3 = {gw: c.s3(gw) for gw in c.gw_roles}
    stop = threading.Event()
    for i, key in enumerate(keys):
        gw = c.gw_roles[i % len(c.gw_roles)]
        cl = Client(-1, s3[gw], gw, hist, keys, stop, random.Random(0), 0)
        for _ in range(tries):
            if cl.get(key, final=True)["status"] == "ok":
                break
            time.sleep(1)
    cl = Client(-1, s3[c.gw_roles[0]], c.gw_roles[0], hist, keys, stop, random.Random(0), 0)
    for _ in range(tries):
        if cl.list(final=True)["status"] == "ok":
            break
        time.sleep(1)
