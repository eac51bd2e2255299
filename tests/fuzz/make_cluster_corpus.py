#!/usr/bin/env python3
"""Write the seed corpus of fuzz_cl_rec into tests/fuzz/corpus/cl_rec/: byte 0 is
the record type (0 NodeInfo, 1 MemberInfo, 2 BucketRecord, 3 ObjectRecord),
the rest a value in cluster/cluster.proto's wire format, valid ones and a few refused ones."""
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, 'corpus', 'cl_rec')


def varint(v):
    b = b''
    while True:
        c = v & 0x7f
        v >>= 7
        if v:
            b += bytes([c | 0x80])
        else:
            return b + bytes([c])


def vf(n, v):  # varint field
    return varint(n << 3) + varint(v)


def f64(n, v):
    return varint(n << 3 | 1) + struct.pack('<Q', v)


def f32(n, v):
    return varint(n << 3 | 5) + struct.pack('<I', v)


def ld(n, b):  # length-delimited field
    b = b if isinstance(b, bytes) else b.encode()
    return varint(n << 3 | 2) + varint(len(b)) + b


def drive(i):
    return vf(1, i) + ld(2, 's1/%d' % i) + vf(3, 1 << 40) + vf(4, 1 << 39)


def node(name='dn-1', state=1):
    return (ld(1, name) + ld(2, '127.0.0.2:7000') + f64(3, 0x1234567890abcdef) + vf(4, state) +
            ld(5, drive(0)) + ld(5, drive(1)) + vf(6, 2 << 40) + vf(7, 1 << 40) +
            vf(8, 1700000000000000000) + ld(9, '0.1.0'))


def member():
    return (ld(1, 'dn-1') + ld(2, '127.0.0.2:7000') + vf(3, 1) + vf(4, 2) + f64(5, 3) +
            ld(6, 's1/0') + ld(6, 's1/1'))


def group(cells, missing=0):
    return ld(1, b''.join(varint(c) for c in cells)) + (vf(2, missing) if missing else b'')


def extent(eid, size, k=4, m=2, cell=1 << 20, spg=16, nodes=6, groups=None):
    per = k * cell * spg
    ng = (size + per - 1) // per
    if groups is None:
        groups = [group([(c + g) % nodes for c in range(k + m)], 1 << 5 if g == 1 else 0)
                  for g in range(ng)]
    return (f64(1, eid) + vf(2, size) + vf(3, k) + vf(4, m) + vf(5, cell) + vf(6, spg) +
            b''.join(ld(7, 'dn-%c' % (97 + i)) for i in range(nodes)) +
            b''.join(ld(8, g) for g in groups))


def attr(n, v):
    return ld(1, n) + ld(2, v)


def obj(exts, size):
    return (vf(1, size) + ld(2, '9b2cf535f27731c974343645a3985328') + f32(3, 0xdeadbeef) +
            vf(4, 1700000000000000000) + ld(5, attr('content-type', 'text/plain')) +
            b''.join(ld(6, e) for e in exts))


seeds = {
    'node': b'\0' + node(),
    'node_draining': b'\0' + node(state=2),
    'node_bad_state': b'\0' + node(state=7),
    'node_bad_name': b'\0' + node(name='a/b'),
    'member': b'\1' + member(),
    'bucket': b'\2' + vf(1, 1700000000000000000),
    'object_1gib': b'\3' + obj([extent(0x1111, 1 << 30)], 1 << 30),
    'object_two_extents': b'\3' + obj([extent(1, 100), extent(2, (64 << 20) + 1)],
                                      100 + (64 << 20) + 1),
    'object_empty': b'\3' + ld(2, 'd41d8cd98f00b204e9800998ecf8427e'),
    'object_one_node': b'\3' + obj([extent(5, 4096, k=2, m=1, cell=4096, spg=1, nodes=1,
                                           groups=[group([0, 0, 0])])], 4096),
    'object_bad_cells': b'\3' + obj([extent(5, 4096, groups=[group([0, 1, 2])])], 4096),
    'object_bad_size': b'\3' + obj([extent(5, 4096)], 4097),
    'truncated': b'\3' + obj([extent(0x1111, 1 << 30)], 1 << 30)[:57],
}
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), 'wb') as f:
        f.write(data)
