/*
 * libFuzzer target for the cluster record decoders (rpc/rpc_cluster.h), what every etcd
 * value goes through: byte 0 picks the record type (NodeInfo, MemberInfo, BucketRecord,
 * ObjectRecord, UploadRecord), the rest is the value. A value that decodes must encode
 * (the rules are the same on both sides), and its encoding must decode to the same
 * encoding again; a refused one must say why and leave nothing allocated (ASan).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ROUND(type, T)                                                       \
	static void round_##type(const uint8_t *v, size_t n)                 \
	{                                                                    \
		struct T a, b;                                               \
		char why[RPC_CL_WHY_MAX] = "";                               \
		uint8_t *e1, *e2;                                            \
		size_t l1, l2;                                               \
		int rc = rpc_cl_##type##_decode(v, n, &a, why, sizeof(why)); \
                                                                             \
		if (rc) {                                                    \
			if (rc == -EBADMSG && !why[0])                       \
				abort();                                     \
			return;                                              \
		}                                                            \
		if (rpc_cl_##type##_encode(&a, &e1, &l1, why, sizeof(why)))  \
			abort();                                             \
		if (rpc_cl_##type##_decode(e1, l1, &b, why, sizeof(why)))    \
			abort();                                             \
		if (rpc_cl_##type##_encode(&b, &e2, &l2, why, sizeof(why)))  \
			abort();                                             \
		if (l1 != l2 || memcmp(e1, e2, l1))                          \
			abort();                                             \
		FINI_##type(&a);                                             \
		FINI_##type(&b);                                             \
		free(e1);                                                    \
		free(e2);                                                    \
	}

#define FINI_node   rpc_cl_node_fini
#define FINI_member rpc_cl_member_fini
#define FINI_bucket (void)
#define FINI_object rpc_cl_object_fini
#define FINI_upload rpc_cl_upload_fini

ROUND(node, rpc_cl_node)
ROUND(member, rpc_cl_member)
ROUND(bucket, rpc_cl_bucket)
ROUND(object, rpc_cl_object)
ROUND(upload, rpc_cl_upload)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static void (*const fn[])(const uint8_t *, size_t) = { round_node, round_member,
		                                               round_bucket, round_object,
		                                               round_upload };

	if (size < 1)
		return 0;
	fn[data[0] % 5](data + 1, size - 1);
	return 0;
}
