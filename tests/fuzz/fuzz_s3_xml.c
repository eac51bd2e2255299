/* Fuzz target: the XML request bodies (DeleteObjects, CompleteMultipartUpload,
 * CreateBucketConfiguration); the first byte picks the parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3_xml_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char loc[64];

	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0: {
		struct s3_delete_req d;

		if (s3_xml_parse_delete((const char *)data + 1, size - 1, &d) == 0) {
			if (d.n == 0 || d.n > S3_DELETE_MAX)
				abort();
			s3_delete_req_fini(&d);
		}
		break;
	}
	case 1: {
		struct s3_complete_req c;

		if (s3_xml_parse_complete((const char *)data + 1, size - 1, &c) == 0) {
			for (size_t i = 0; i < c.n; i++)
				if (c.parts[i].number < 1 || c.parts[i].number > 10000)
					abort();
			s3_complete_req_fini(&c);
		}
		break;
	}
	default:
		s3_xml_parse_create_bucket((const char *)data + 1, size - 1, loc, sizeof(loc));
	}
	return 0;
}
