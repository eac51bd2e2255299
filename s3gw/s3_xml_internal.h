/*
 * s3_xml_internal: response XML writers and request body parsers (s3_xml.c, libxml2).
 * Private to s3gw/; tests and fuzzers reach it through s3_internal_dep. Pure: any thread.
 */
#ifndef ZEST_S3_XML_INTERNAL_H
#define ZEST_S3_XML_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3_util_internal.h"

#define S3_XML_BODY_MAX (2u << 20) /* request bodies we parse */
#define S3_DELETE_MAX   1000
#define S3_PARTS_MAX    10000

/* DeleteObjects request: keys owned by the struct. */
struct s3_delete_req {
	char **keys;
	size_t n;
	bool quiet;
};

struct s3_complete_part {
	unsigned number;
	char etag[S3_ETAG_MAX]; /* quotes stripped */
	char checksum[64];      /* ChecksumCRC32 etc. when given */
	unsigned ck;            /* which one */
};

struct s3_complete_req {
	struct s3_complete_part *parts;
	size_t n;
};

/* Parse a DeleteObjects body (1..1000 Object/Key, optional Quiet). 0, -EINVAL (MalformedXML),
 * -EMSGSIZE (too many keys or a key over S3_MAX_KEY), -ENOMEM. */
int s3_xml_parse_delete(const char *body, size_t len, struct s3_delete_req *out);
void s3_delete_req_fini(struct s3_delete_req *r);
/* Parse a CompleteMultipartUpload body (1..10000 Part with PartNumber and ETag). */
int s3_xml_parse_complete(const char *body, size_t len, struct s3_complete_req *out);
void s3_complete_req_fini(struct s3_complete_req *r);
/* Parse a CreateBucketConfiguration; LocationConstraint copied to loc ("" if absent).
 * An empty body is fine. */
int s3_xml_parse_create_bucket(const char *body, size_t len, char *loc, size_t cap);

/* Writers append a whole document (with the XML declaration) to b. */
void s3_xml_error(struct s3_buf *b, const char *code, const char *message, const char *resource,
                  const char *request_id);
/* ISO 8601 with milliseconds, as S3 lists it: 2006-02-03T16:45:09.000Z (out >= 32). */
void s3_xml_time(uint64_t ns, char *out);
/* Key or prefix, percent-encoded when url (encoding-type=url), then XML-escaped. */
void s3_xml_key(struct s3_buf *b, const char *tag, const char *key, bool url);

#endif
