/* Fuzz target: the aws-chunked decoder (unsigned-trailer and signed modes) and the HTTP
 * chunked decoder, with the input split at a point chosen by its first byte. Spans must
 * point into the input: payload is never copied. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3_chunked_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct bounds {
	const uint8_t *lo, *hi;
};

static int
span(void *arg, const uint8_t *p, size_t n)
{
	struct bounds *b = arg;

	if (n && (p < b->lo || p + n > b->hi))
		abort();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct s3_auth auth;
	uint8_t *buf;
	size_t cut;

	if (size < 2)
		return 0;
	cut = data[0] % size;
	buf = malloc(size - 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	size--;
	if (cut > size)
		cut = size;
	memset(&auth, 0, sizeof(auth));
	memcpy(auth.amz_date, "20130524T000000Z", 17);
	strcpy(auth.scope, "20130524/us-east-1/s3/aws4_request");
	memset(auth.seed_sig, 'a', 64);
	for (int mode = 0; mode < 3; mode++) {
		struct bounds b = { buf, buf + size };
		long r;

		if (mode < 2) {
			struct s3_chunked d;

			if (s3_chunked_init(&d,
			                    mode ? S3_PAYLOAD_STREAMING_TRAILER
			                         : S3_PAYLOAD_UNSIGNED_TRAILER,
			                    &auth) < 0)
				continue;
			r = s3_chunked_feed(&d, buf, cut, span, &b);
			if (r >= 0 && (size_t)r == cut)
				s3_chunked_feed(&d, buf + cut, size - cut, span, &b);
			s3_chunked_fini(&d);
		} else {
			struct s3_http_chunked d;

			s3_http_chunked_init(&d);
			r = s3_http_chunked_feed(&d, buf, cut, span, &b);
			if (r >= 0 && (size_t)r == cut)
				s3_http_chunked_feed(&d, buf + cut, size - cut, span, &b);
		}
	}
	free(buf);
	return 0;
}
