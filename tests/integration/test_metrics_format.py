#!/usr/bin/env python3
"""Both daemons' /metrics pass `promtool check metrics` (Prometheus' own linter: names,
units, HELP and TYPE lines, histogram buckets), after traffic has filled every series
(PUT, GET, a miss, a multipart upload). Exits 77 (skip) when promtool is not installed.
"""
import os
import shutil
import subprocess
import sys
import urllib.request

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402


def lint(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read()
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       timeout=60)
    assert p.returncode == 0, (f"promtool on :{port}: {p.stdout.decode()}"
                               f"{p.stderr.decode()}")
    assert b"# HELP " in text and b"_bucket{" in text


def test_promtool():
    with zh.cluster() as c:
        s3 = boto3.client("s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
                          aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket="metrics")
        s3.put_object(Bucket="metrics", Key="k", Body=os.urandom(300 << 10))
        assert len(s3.get_object(Bucket="metrics", Key="k")["Body"].read()) == 300 << 10
        try:
            s3.head_object(Bucket="metrics", Key="missing")
        except s3.exceptions.ClientError:
            pass
        up = s3.create_multipart_upload(Bucket="metrics", Key="mp")["UploadId"]
        s3.abort_multipart_upload(Bucket="metrics", Key="mp", UploadId=up)
        lint(c.gw_metrics)
        lint(c.dn_metrics)


if __name__ == "__main__":
    if not shutil.which("promtool"):
        print("skip: promtool (Debian's prometheus package) is not installed")
        sys.exit(77)
    zh.run_tests([test_promtool])
