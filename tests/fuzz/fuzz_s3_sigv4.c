/* Fuzz target: SigV4 verification and canonicalisation of arbitrary request heads
 * (Authorization header and presigned query forms). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3_sig_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct s3_creds creds = { "AKIAIOSFODNN7EXAMPLE",
		                               "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		                               "us-east-1", "s3.example.com" };
	struct s3_http_req req;
	struct s3_auth auth;
	char *buf = malloc(size ? size : 1);

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (s3_http_parse(&req, buf, size, 16384) == 0) {
		struct s3_buf b;

		s3_sigv4_verify(&req, &creds, 1369353600, &auth);
		s3_buf_init(&b, 1 << 20);
		s3_sigv4_canonical(&req, "host;x-amz-date", 15, "UNSIGNED-PAYLOAD", false, &b);
		s3_buf_fini(&b);
		s3_buf_init(&b, 1 << 20);
		s3_sigv2_string(&req, "", creds.domain, &b); /* what SigV2 signs */
		s3_buf_fini(&b);
	}
	free(buf);
	return 0;
}
