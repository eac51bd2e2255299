#!/usr/bin/env python3
"""What the gateway --cluster answers for what it cannot read (docs/cluster.md, "GET").

- An undecodable record (garbage bytes put at /zest/objects/<bucket>/<key> with etcdctl)
  among good ones: ListObjects v1 and v2, whole and page by page, list every good key and
  not the bad ones (one of them at the end of the bucket, one inside the first etcd page,
  past it more good keys than one etcd page holds); GET and HEAD of a bad key are 500
  InternalError; zest_s3_bad_records_total counts them (the gateway's /metrics pass
  promtool).
- An object with fewer than k cells on live nodes (m + 1 of its nodes SIGKILLed and gone
  from the gateway's membership view): GET answers 503 SlowDown with an S3 XML error before
  any header, never a 200 cut short, and so does a range inside a lost cell;
  zest_s3_unreadable_gets_total counts them. A range inside the live node's cell is served
  (it needs no rebuild). The nodes back, the GET returns the exact bytes.

Exits 77 without etcd or without the gateway's --cluster.
"""
import http.client
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

BUCKET = "unread"
GARBAGE = "garbage-not-a-record"  # 'g' = field 12 with wire type 7: not protobuf


def client(c):
    """No retry at all: each request's own answer shows."""
    import boto3
    from botocore.config import Config
    import zest_harness as zh
    return boto3.client(
        "s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, read_timeout=60, connect_timeout=5,
                      retries={"total_max_attempts": 1}))


def listed(s3, v2, page):
    """Every key of BUCKET through ListObjects (v2 or v1), page keys a call."""
    keys, token, marker = [], None, None
    for _ in range(1000):
        if v2:
            kw = {"ContinuationToken": token} if token else {}
            r = s3.list_objects_v2(Bucket=BUCKET, MaxKeys=page, **kw)
        else:
            kw = {"Marker": marker} if marker else {}
            r = s3.list_objects(Bucket=BUCKET, MaxKeys=page, **kw)
        got = [o["Key"] for o in r.get("Contents", [])]
        keys += got
        if not r["IsTruncated"]:
            return keys
        token = r.get("NextContinuationToken")
        marker = r.get("NextMarker") or (got[-1] if got else None)
        assert (token if v2 else marker), f"truncated listing without a way on: {r}"
    raise AssertionError("listing does not end")


def test_bad_record():
    with ch.cluster(nodes=3, ec="2+1", cell_size=65536, stripes_per_group=2) as c:
        s3 = client(c)
        s3.create_bucket(Bucket=BUCKET)
        good = [f"k{i:03d}" for i in range(80)]  # more than an etcd page (64) of records
        for k in good:
            s3.put_object(Bucket=BUCKET, Key=k, Body=k.encode())
        bad = ["k010x", "k070x", "zzz"]  # in the first page, in the second, the last key
        for k in bad:
            c.etcd.ctl("put", f"/zest/objects/{BUCKET}/{k}", GARBAGE)
        before = c.gw_metrics_now().get("zest_s3_bad_records_total", 0)
        for v2 in (False, True):
            for page in (1000, 7, 1):
                keys = listed(s3, v2, page)
                assert keys == good, (v2, page, set(keys) ^ set(good))
        after_list = c.gw_metrics_now().get("zest_s3_bad_records_total", 0)
        assert after_list - before >= len(bad), (before, after_list)
        for k in bad:
            try:
                s3.get_object(Bucket=BUCKET, Key=k)["Body"].read()
                raise AssertionError(f"GET of the bad record {k} succeeded")
            except s3.exceptions.ClientError as e:
                assert ch.error_code(e) == (500, "InternalError"), (k, ch.error_code(e))
            try:
                s3.head_object(Bucket=BUCKET, Key=k)
                raise AssertionError(f"HEAD of the bad record {k} succeeded")
            except s3.exceptions.ClientError as e:
                assert ch.error_code(e)[0] == 500, (k, ch.error_code(e))
        after = c.gw_metrics_now().get("zest_s3_bad_records_total", 0)
        assert after - after_list == 2 * len(bad), (after_list, after)
        c.gw.promtool()  # the gateway's cluster-mode series pass Prometheus' own check
        # the good ones read as ever
        assert s3.get_object(Bucket=BUCKET, Key="k011")["Body"].read() == b"k011"


def raw_get(c, key):
    """(status, headers, body) of a signed GET, read straight off the socket."""
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
    import zest_harness as zh
    url = f"{c.endpoint}/{BUCKET}/{key}"
    req = botocore.awsrequest.AWSRequest(method="GET", url=url,
                                         headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    botocore.auth.SigV4Auth(botocore.credentials.Credentials(zh.ACCESS_KEY, zh.SECRET_KEY),
                            "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection("127.0.0.1", c.gw_port, timeout=60)
    conn.request("GET", f"/{BUCKET}/{key}", headers=dict(req.headers.items()))
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), body


def test_unreadable_object_503():
    with ch.cluster(nodes=3, ec="2+1", cell_size=65536, stripes_per_group=2) as c:
        s3 = client(c)
        s3.create_bucket(Bucket=BUCKET)
        data = ch.body("lost", 700_000)  # several groups of 2 x 64 KiB x 2
        s3.put_object(Bucket=BUCKET, Key="lost", Body=data)
        rec = c.record(BUCKET, "lost")
        assert rec is not None
        # every node holds a cell of every group (3 = k + m): any m + 1 = 2 leave < k
        c.kill(1)
        c.kill(2)
        ch.wait_for("the gateway's view to drop dn-1 and dn-2",
                    lambda: c.gw_metrics_now().get("zest_cluster_live_nodes") == 1,
                    ch.LEASE_TTL + 60)
        before = c.gw_metrics_now().get("zest_s3_unreadable_gets_total", 0)
        status, headers, body = raw_get(c, "lost")
        assert status == 503, (status, headers, body[:200])
        assert b"<Code>SlowDown</Code>" in body, body[:300]
        assert headers.get("Content-Type") == "application/xml", headers
        assert "ETag" not in headers and "Last-Modified" not in headers, headers
        # group 0, stripe 0: data cell c holds bytes [c * cell, (c + 1) * cell); a range in
        # a cell on a dead node is refused, one in the live node's cell is served
        ext = rec["extents"][0]
        cell = ext["cell_size"]
        where = [ext["nodes"][ext["groups"][0]["cells"][i]] for i in range(2)]
        lost = [i for i in range(2) if where[i] != "dn-3"]
        assert lost, where  # two of three nodes dead: a data cell of the group is lost
        print(f"     group 0's data cells on {where}, dn-3 live", flush=True)
        lo = lost[0] * cell + 1000
        try:
            s3.get_object(Bucket=BUCKET, Key="lost",
                          Range=f"bytes={lo}-{lo + 1000}")["Body"].read()
            raise AssertionError(f"a range of a lost cell was served ({where})")
        except s3.exceptions.ClientError as e:
            assert ch.error_code(e) == (503, "SlowDown"), ch.error_code(e)
        after = c.gw_metrics_now().get("zest_s3_unreadable_gets_total", 0)
        assert after - before == 2, (before, after)
        if len(lost) == 1:  # the other data cell is on dn-3: its bytes need no rebuild
            lo = (1 - lost[0]) * cell + 1000
            got = s3.get_object(Bucket=BUCKET, Key="lost",
                                Range=f"bytes={lo}-{lo + 1000}")["Body"].read()
            assert got == data[lo:lo + 1001], "the live cell's range read back other bytes"
            assert c.gw_metrics_now().get("zest_s3_unreadable_gets_total", 0) == after
        # HEAD needs no cell: still answered from the record
        assert s3.head_object(Bucket=BUCKET, Key="lost")["ContentLength"] == len(data)

        c.restart(1)
        c.restart(2)
        ch.wait_for("the gateway's view to hold three nodes again",
                    lambda: c.gw_metrics_now().get("zest_cluster_live_nodes") == 3,
                    ch.LEASE_TTL + 60)
        assert ch.get_digest(s3, BUCKET, "lost") == (len(data), ch.digest(data))


if __name__ == "__main__":
    ch.run([test_bad_record, test_unreadable_object_503])
