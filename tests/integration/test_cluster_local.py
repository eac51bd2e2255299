#!/usr/bin/env python3
"""A cluster gateway on a datanode's host (--local-node): etcd, six datanodes over mTLS,
RS(4,2), boto3 through the gateway.

- Every PUT is coordinated by the local node dn-1: only it forwards cells, and the gateway
  reaches it over its Unix socket (the gateway's only client of dn-1 is unix:...), the others
  over TCP with mTLS. Every object reads back byte-identical, dn-1's cells included.
- dn-1 killed: PUTs go to the other nodes in zc_place_rank's order at once, and every object
  (the new ones and those with cells on dn-1) still reads back.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

SIZES = [0, 1000, 3 << 20, 9 << 20]


def forwarded(node):
    return ch.metric_sum(node.metrics(), "zest_cluster_forwarded_bytes_total")


def test_local_coordinator():
    with ch.cluster(nodes=6, ec="4+2", local=1) as c:
        s3 = c.s3()
        s3.create_bucket(Bucket="loc")
        bodies = {f"k{i}": os.urandom(n) for i, n in enumerate(SIZES * 3)}
        for k, b in bodies.items():
            s3.put_object(Bucket="loc", Key=k, Body=b)
        for k, b in bodies.items():
            assert s3.get_object(Bucket="loc", Key=k)["Body"].read() == b, k
        local = c.nodes[1]
        forwarded_before = forwarded(local)
        assert forwarded_before > 0
        for i, n in c.nodes.items():
            if i != 1:
                assert forwarded(n) == 0, (n.node, "coordinated a PUT")
        with open(c.gw.log_path, errors="replace") as f:
            log = f.read()
        assert f"addr=unix:{c.local_sock}" in log, log[-3000:]
        assert f"addr={local.address}" not in log, "dn-1 reached over TCP too"
        assert f"local_node=dn-1=unix:{c.local_sock}" in log

        # the local node dies: the next PUTs are coordinated elsewhere, nothing is lost
        local.kill9()
        more = {f"after{i}": os.urandom(n) for i, n in enumerate(SIZES)}
        for k, b in more.items():
            s3.put_object(Bucket="loc", Key=k, Body=b)
        bodies.update(more)
        for k, b in bodies.items():
            assert s3.get_object(Bucket="loc", Key=k)["Body"].read() == b, k
        assert sum(forwarded(n) for i, n in c.nodes.items() if i != 1) > 0
        print(f"dn-1 forwarded {forwarded_before} bytes; after its death the others took over")


if __name__ == "__main__":
    ch.run([test_local_coordinator])
