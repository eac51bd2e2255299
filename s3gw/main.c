/* zest-s3gw: the S3 gateway program, over the datanodes named by --datanode (the rpc
 * backend, s3_backend_rpc.c) or, with --cluster, over etcd and the live datanodes (the
 * cluster backend, s3_bcl.c). */
#include <stdlib.h>

#include "s3.h"
#include "zc.h"
#include "zc_fault.h"

int
main(int argc, char **argv)
{
	zc_log_init();
#ifdef ZC_FAULTS
	if (zc_fault_env() < 0) /* a test build's fault points (zc_fault.h): mpu.* */
		return 2;
#else
	if (getenv("ZEST_FAULTS"))
		ZC_WARN("s3gw", "ZEST_FAULTS ignored: built without -Dtest_faults");
#endif
	return s3_main(argc, argv, NULL);
}
