"""User metadata's size limit as AWS states it, for the single-node and the cluster tests:
the bytes of every x-amz-meta-* name (after the prefix) and value, summed, at most 2 KiB;
one byte more is 400 MetadataTooLarge and stores nothing, on PutObject, CopyObject with
the REPLACE directive and CreateMultipartUpload (boto3 sends each header as given)."""


def _code(fn, **kw):
    from botocore.exceptions import ClientError
    try:
        fn(**kw)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


def check(s3, bucket):
    at_limit = {"k": "v" * 2047}                     # 1 + 2047 = 2048 bytes
    over = {"k": "v" * 2048}                         # 2049
    spread = {f"key{i:02}": "x" * 200 for i in range(10)}  # 10 x (5 + 200) = 2050
    s3.put_object(Bucket=bucket, Key="meta-at-limit", Body=b"a", Metadata=at_limit)
    got = s3.head_object(Bucket=bucket, Key="meta-at-limit")["Metadata"]
    assert got == at_limit, got
    for i, meta in enumerate((over, spread)):
        key = f"meta-over-{i}"
        got = _code(s3.put_object, Bucket=bucket, Key=key, Body=b"b", Metadata=meta)
        assert got == ("MetadataTooLarge", 400), (key, got)
        got = _code(s3.head_object, Bucket=bucket, Key=key)
        assert got[1] == 404, (key, got)
    got = _code(s3.copy_object, Bucket=bucket, Key="meta-copy",
                CopySource={"Bucket": bucket, "Key": "meta-at-limit"},
                MetadataDirective="REPLACE", Metadata=over)
    assert got == ("MetadataTooLarge", 400), got
    assert _code(s3.head_object, Bucket=bucket, Key="meta-copy")[1] == 404
    got = _code(s3.create_multipart_upload, Bucket=bucket, Key="meta-mpu", Metadata=over)
    assert got == ("MetadataTooLarge", 400), got
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    s3.delete_object(Bucket=bucket, Key="meta-at-limit")
