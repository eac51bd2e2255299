#!/usr/bin/env python3
"""zest-datanode --data-io direct behind the gateway: PUT/GET of 0 B .. 5 MiB + 3 through
curl, the datanode's align copy counter equal to the data bytes it stored, and the same
objects read back after a restart in --data-io buffered (and a buffered write read by a
direct datanode). Exits 77 (skip) when the datanode binary is not built or curl is missing.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402

ALIGN = 'zest_payload_copied_bytes_total{stage="align"}'


def curl(c, *args):
    p = subprocess.run(["curl", "-s", "--aws-sigv4", "aws:amz:us-east-1:s3",
                        "--user", f"{zh.ACCESS_KEY}:{zh.SECRET_KEY}",
                        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                        "-o", os.path.join(c.root, "body"), "-w", "%{http_code}", *args],
                       capture_output=True, timeout=120)
    with open(os.path.join(c.root, "body"), "rb") as f:
        return int(p.stdout.decode() or 0), f.read()


def put(c, key, blob):
    path = os.path.join(c.root, "blob")
    with open(path, "wb") as f:
        f.write(blob)
    st, body = curl(c, "-T", path, f"{c.endpoint}/dio/{key}")
    assert st == 200, (st, body[:300])


def get_all(c, blobs):
    for key, blob in blobs.items():
        st, body = curl(c, f"{c.endpoint}/dio/{key}")
        assert st == 200 and body == blob, f"GET {key}: {st}, {len(body)} of {len(blob)} bytes"
        if len(blob) > 10:
            st, body = curl(c, "-r", f"3-{len(blob) // 2}", f"{c.endpoint}/dio/{key}")
            assert st == 206 and body == blob[3:len(blob) // 2 + 1], f"range {key}: {st}"


def restart_dn(c, mode):
    c.dn.stop()
    c.extra_dn = ["--data-io", mode]
    zh.start_retrying(c.start_datanode)
    # the gateway dials the new datanode at the same port
    c.gw.stop()
    zh.start_retrying(c.start_gateway)


def test_direct_put_get():
    cell = 256 << 10
    sizes = {"empty": 0, "one": 1, "page": 4096, "cellm1": cell - 1, "cellp1": cell + 1,
             "big": 5 * (1 << 20) + 3}
    blobs = {k: os.urandom(n) for k, n in sizes.items()}
    with zh.cluster(extra_dn=["--data-io", "direct"], cell_size=cell) as c:
        assert curl(c, "-X", "PUT", f"{c.endpoint}/dio")[0] == 200
        for k, b in blobs.items():
            put(c, k, b)
        get_all(c, blobs)
        copied = zh.metrics(c.dn_metrics).get(ALIGN)
        assert copied == sum(sizes.values()), (copied, sum(sizes.values()))
        with open(os.path.join(c.root, "datanode.log"), "rb") as f:
            assert b"data_io=direct" in f.read()
        # written direct, read by a buffered datanode; then written buffered, read direct
        restart_dn(c, "buffered")
        get_all(c, blobs)
        more = {"b-" + k: os.urandom(n) for k, n in sizes.items()}
        for k, b in more.items():
            put(c, k, b)
        assert zh.metrics(c.dn_metrics).get(ALIGN) == 0
        restart_dn(c, "direct")
        get_all(c, {**blobs, **more})


if __name__ == "__main__":
    if not os.path.exists(zh.DATANODE) or not shutil.which("curl"):
        print("datanode not built or curl missing: skipping")
        sys.exit(77)
    zh.run_tests([test_direct_put_get])
