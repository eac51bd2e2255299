/* Fuzz target: the HTTP request-head parser; every header it reports must lie inside
 * the input, and the header lookup must not read outside it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3_http_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct s3_http_req req;
	char *buf = malloc(size ? size : 1); /* exact-size copy so ASan sees overreads */

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (s3_http_parse(&req, buf, size, 8192) == 0) {
		if (req.head_len > size)
			abort();
		for (unsigned i = 0; i < req.nhdr; i++)
			if (req.hdr[i].val + req.hdr[i].val_len > buf + size)
				abort();
		s3_http_header(&req, "content-length");
		s3_http_header(&req, "x-amz-content-sha256");
	}
	free(buf);
	return 0;
}
