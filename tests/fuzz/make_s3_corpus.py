#!/usr/bin/env python3
"""Write the seed corpora of the s3gw fuzz targets into tests/fuzz/corpus/<target without fuzz_>/."""
import os

here = os.path.dirname(os.path.abspath(__file__))


def w(t, name, data):
    d = os.path.join(here, 'corpus', t.replace('fuzz_', '', 1))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


EMPTY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
CRED = 'AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request'
heads = {
    'get': "GET /test.txt HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\nRange: bytes=0-9\r\n"
           "x-amz-content-sha256: " + EMPTY + "\r\nx-amz-date: 20130524T000000Z\r\n"
           "Authorization: AWS4-HMAC-SHA256 Credential=" + CRED + ",SignedHeaders=host;range;"
           "x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41\r\n\r\n",
    'put': "PUT /test%24file.text HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\n"
           "Date: Fri, 24 May 2013 00:00:00 GMT\r\nx-amz-date: 20130524T000000Z\r\n"
           "x-amz-storage-class: REDUCED_REDUNDANCY\r\n"
           "x-amz-content-sha256: 44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\r\n"
           "Authorization: AWS4-HMAC-SHA256 Credential=" + CRED + ", SignedHeaders=date;host;"
           "x-amz-content-sha256;x-amz-date;x-amz-storage-class, "
           "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd\r\nContent-Length: 21\r\n\r\n",
    'list': "GET /?max-keys=2&prefix=J HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\n"
            "x-amz-date: 20130524T000000Z\r\nx-amz-content-sha256: " + EMPTY + "\r\n"
            "Authorization: AWS4-HMAC-SHA256 Credential=" + CRED + ",SignedHeaders=host;"
            "x-amz-content-sha256;x-amz-date,Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7\r\n\r\n",
    'presigned': "GET /test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
                 "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
                 "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature="
                 "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404 HTTP/1.1\r\n"
                 "Host: examplebucket.s3.amazonaws.com\r\n\r\n",
    'chunked': "PUT /b/k HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n"
               "Connection: keep-alive\r\n\r\n",
    'http10': "\r\nGET /a%20b?x=1&y HTTP/1.0\r\nHost: h\r\n\r\n",
    'bad-te': "PUT / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    'fold': "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
}
for n, h in heads.items():
    w('fuzz_s3_http', n, h)
    w('fuzz_s3_sigv4', n, h)
bodies = {
    'unsigned-trailer': "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n",
    'signed': "5;chunk-signature=" + '0' * 64 + "\r\nhello\r\n0;chunk-signature=" + '1' * 64 +
              "\r\nx-amz-checksum-crc32c:AAAAAA==\r\nx-amz-trailer-signature:" + '2' * 64 + "\r\n\r\n",
    'http': "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
    'overflow': "fffffffffffffffffff\r\n",
}
for n, b in bodies.items():
    for cut in (0, 7, 200):
        w('fuzz_s3_chunked', '%s-%d' % (n, cut), bytes([cut]) + b.encode())
xmls = [
    (0, '<?xml version="1.0"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>'
        '<Object><Key>a&amp;b</Key></Object><Object><Key>c</Key></Object></Delete>'),
    (0, '<Delete><Object><Key>k</Key></Object>'),
    (1, '<CompleteMultipartUpload><Part><ETag>"0123456789abcdef0123456789abcdef"</ETag><PartNumber>1'
        '</PartNumber><ChecksumCRC32C>AAAAAA==</ChecksumCRC32C></Part><Part><PartNumber>2</PartNumber>'
        '<ETag>x</ETag></Part></CompleteMultipartUpload>'),
    (2, '<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>'
        'eu-west-1</LocationConstraint></CreateBucketConfiguration>'),
    (0, '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
        '<Delete><Object><Key>&b;</Key></Object></Delete>'),
]
for i, (sel, x) in enumerate(xmls):
    w('fuzz_s3_xml', 'seed-%d' % i, bytes([sel]) + x.encode())
