#!/usr/bin/env python3
"""Regression: boto3 PUTs of sizes big, empty, big on one keep-alive connection.

botocore sends `Expect: 100-continue` with every PutObject. When the gateway answered an
empty PUT with its final status and no 100, botocore mis-framed the next request on that
connection and sat out its read timeout (30 s) before retrying. With a 10 s read timeout
and no retries, such a stall fails this test instead of slowing everything down.
"""
import os
import sys

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(__file__))
import zest_harness as zh  # noqa: E402


def test_empty_put_between_large_ones():
    with zh.cluster() as c:
        cfg = Config(retries={"total_max_attempts": 1}, read_timeout=10,
                     s3={"addressing_style": "path"})
        s3 = boto3.client("s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
                          aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                          config=cfg)
        s3.create_bucket(Bucket="expect")
        big = os.urandom(2 << 20)
        for i in range(3):
            s3.put_object(Bucket="expect", Key=f"big-{i}", Body=big)
            s3.put_object(Bucket="expect", Key=f"empty-{i}", Body=b"")
        for i in range(3):
            assert s3.get_object(Bucket="expect", Key=f"big-{i}")["Body"].read() == big
            assert s3.head_object(Bucket="expect", Key=f"empty-{i}")["ContentLength"] == 0


if __name__ == "__main__":
    zh.run_tests([test_empty_put_between_large_ones])
