/* zest-s3gw: the S3 gateway program, over the datanodes named by --datanode (the rpc
 * backend, s3_backend_rpc.c) or, with --cluster, over etcd and the live datanodes (the
 * cluster backend, s3_bcl.c). */
#include "s3.h"

int
main(int argc, char **argv)
{
	return s3_main(argc, argv, NULL);
}
