/* zest-s3gw: the S3 gateway program. Phase 1 has no datanode backend bound yet; the rpc
 * client plugs in here (s3_main's backend argument). */
#include "s3.h"

int
main(int argc, char **argv)
{
	return s3_main(argc, argv, NULL);
}
