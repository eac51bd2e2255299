/* zest-s3gw-mem: the gateway program over the in-memory TEST DOUBLE backend, so real S3
 * clients can drive the protocol core before the datanode exists. Test use only. */
#include "mem_backend.h"

int
main(int argc, char **argv)
{
	struct s3_backend *be = mem_backend_create();
	int rc;

	if (!be)
		return 1;
	rc = s3_main(argc, argv, be);
	mem_backend_destroy(be);
	return rc;
}
