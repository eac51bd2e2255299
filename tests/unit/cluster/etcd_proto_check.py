#!/usr/bin/env python3
"""Check cluster/etcd.proto + cluster/etcd_kv.proto against the etcd binary itself.

etcd (Go, gogoproto) embeds its own gzipped FileDescriptorProtos for rpc.proto and
kv.proto. Every message, field (number, label, type, type name, oneof), enum value and
method we declare must be there, identical: a wrong field number would fail silently on
the wire. Usage: etcd_proto_check.py OURS.desc [ETCD_BINARY]. Exit 77 without etcd.
"""
import os
import re
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from pb_wire import fields, get, one  # noqa: E402


def messages(blobs, prefix, res):
    # DescriptorProto: name 1, field 2, nested_type 3, enum_type 4
    for blob in blobs:
        m = fields(blob)
        name = prefix + one(m, 1).decode()
        res[name] = {}
        for fb in get(m, 2):
            # FieldDescriptorProto: name 1, number 3, label 4, type 5, type_name 6, oneof 9
            f = fields(fb)
            res[name][one(f, 1).decode()] = (one(f, 3, 0), one(f, 4, 0), one(f, 5, 0),
                                             one(f, 6).decode(), one(f, 9, None))
        for eb in get(m, 4):
            e = fields(eb)
            res[name + "." + one(e, 1).decode() + " (enum)"] = {
                one(fields(v), 1).decode(): one(fields(v), 2, 0) for v in get(e, 2)}
        messages(get(m, 3), name + ".", res)


def load(fdp):
    # FileDescriptorProto: package 2, message_type 4, service 6
    m = fields(fdp)
    pkg = one(m, 2).decode()
    res = {}
    messages(get(m, 4), pkg + ".", res)
    for sb in get(m, 6):
        s = fields(sb)
        res[pkg + "." + one(s, 1).decode() + " (service)"] = {
            one(fields(x), 1).decode(): (one(fields(x), 2), one(fields(x), 3),
                                         one(fields(x), 5, 0), one(fields(x), 6, 0))
            for x in get(s, 2)}
    return res


def main():
    ours_path = sys.argv[1]
    etcd = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("ZEST_ETCD", "/usr/bin/etcd")
    if not os.access(etcd, os.X_OK):
        print("SKIP: %s not found (Debian package etcd-server)" % etcd)
        return 77
    data = open(etcd, "rb").read()
    theirs = {}
    for m in re.finditer(b"\x1f\x8b\x08\x00\x00\x00\x00\x00", data):
        try:
            d = zlib.decompressobj(31).decompress(data[m.start():m.start() + (1 << 20)])
        except zlib.error:
            continue
        if d.startswith(b"\n\trpc.proto\x12\x0cetcdserverpb") or \
                d.startswith(b"\n\x08kv.proto\x12\x06mvccpb"):
            theirs.update(load(d))
    if not theirs:
        print("FAIL: no rpc.proto/kv.proto descriptors found in %s" % etcd)
        return 1
    ours = {}
    for fb in get(fields(open(ours_path, "rb").read()), 1):  # FileDescriptorSet.file
        ours.update(load(fb))
    bad = 0
    for name, items in sorted(ours.items()):
        t = theirs.get(name)
        if t is None:
            print("FAIL: %s is not in etcd's protos" % name)
            bad += 1
            continue
        for k, v in items.items():
            if t.get(k) != v:
                print("FAIL: %s.%s: ours %r, etcd %r" % (name, k, v, t.get(k)))
                bad += 1
    print("%d types, %d fields/values/methods checked against %s: %d differ" %
          (len(ours), sum(len(v) for v in ours.values()), etcd, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
