#!/usr/bin/env python3
"""Multipart bookkeeping across a datanode outage (kill -9 and restart).

- ListMultipartUploads while the datanode is down or just restarting answers an error
  (503), never a silently short list: every open upload is listed once it answers 200.
- A CompleteMultipartUpload that meets the outage either completes or leaves the upload
  whole (ListParts and Abort still reach it); a retry after the restart completes it, and
  no part object is left behind.
"""
import os
import sys
import time

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zest_harness as zh  # noqa: E402


def client(c):
    return boto3.client("s3", endpoint_url=c.endpoint, aws_access_key_id=zh.ACCESS_KEY,
                        aws_secret_access_key=zh.SECRET_KEY, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"total_max_attempts": 1}, read_timeout=20))


def test_list_uploads_across_restart():
    with zh.cluster() as c:
        s3 = client(c)
        s3.create_bucket(Bucket="outage")
        ids = {}
        for i in range(8):
            key = f"k{i}"
            ids[key] = s3.create_multipart_upload(Bucket="outage", Key=key)["UploadId"]
            s3.upload_part(Bucket="outage", Key=key, UploadId=ids[key], PartNumber=1,
                           Body=b"x" * 1000)
        c.dn.kill9()
        # Calls while it is down put the gateway's channel into reconnect backoff; the
        # first calls after the restart then meet a channel still coming up.
        for _ in range(6):
            try:
                s3.list_multipart_uploads(Bucket="outage")
                raise AssertionError("listed uploads with the datanode down")
            except s3.exceptions.ClientError as e:
                assert e.response["ResponseMetadata"]["HTTPStatusCode"] in (500, 503), e
            time.sleep(0.5)
        c.start_datanode()
        answered = 0
        deadline = time.time() + 30
        while time.time() < deadline and answered < 20:
            try:
                r = s3.list_multipart_uploads(Bucket="outage")
            except s3.exceptions.ClientError as e:
                assert e.response["ResponseMetadata"]["HTTPStatusCode"] in (500, 503), e
                time.sleep(0.05)
                continue
            got = {u["Key"]: u["UploadId"] for u in r.get("Uploads", [])}
            assert got == ids, f"listed {sorted(got)} of {sorted(ids)}"
            answered += 1
        assert answered == 20


if __name__ == "__main__":
    zh.run_tests([test_list_uploads_across_restart])
