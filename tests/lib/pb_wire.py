"""A reader of the protobuf wire format, for the tests' Python: enough to walk a message
field by field without generated code (etcd's embedded descriptors in
tests/unit/cluster/etcd_proto_check.py, the cluster's object records in
tests/integration/cluster_harness.py)."""


def varint(b, i):
    """The varint at b[i:]: (value, index after it)."""
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """A message as [(field number, value)], in wire order: ints for varint and fixed
    (little-endian) fields, bytes for length-delimited ones."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0:
            v, i = varint(b, i)
        elif t == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif t == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        elif t == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError(f"wire type {t}")
        out.append((f, v))
    return out


def packed(b):
    """A packed repeated varint field's bytes as a list of ints."""
    out, i = [], 0
    while i < len(b):
        v, i = varint(b, i)
        out.append(v)
    return out


def get(m, f):
    """Every value of field f in m (a fields() list)."""
    return [v for k, v in m if k == f]


def one(m, f, default=b""):
    """The first value of field f in m, or default."""
    v = get(m, f)
    return v[0] if v else default
