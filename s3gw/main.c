/* zest-s3gw: the S3 gateway program, over the datanodes named by --datanode (the rpc
 * backend, s3_backend_rpc.c). */
#include "s3.h"

int
main(int argc, char **argv)
{
	return s3_main(argc, argv, NULL);
}
