/*
 * libFuzzer target for the cluster record decoders (cluster/cl_rec.h), what every etcd
 * value goes through: byte 0 picks the record type (NodeInfo, MemberInfo, BucketRecord,
 * ObjectRecord), the rest is the value. A value that decodes must encode
 * (the rules are the same on both sides), and its encoding must decode to the same
 * encoding again; a refused one must say why and leave nothing allocated (ASan).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cl_rec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ROUND(type, T)                                                       \
	static void round_##type(const uint8_t *v, size_t n)                 \
	{                                                                    \
		struct T a, b;                                               \
		char why[CL_REC_WHY_MAX] = "";                               \
		uint8_t *e1, *e2;                                            \
		size_t l1, l2;                                               \
		int rc = cl_rec_##type##_decode(v, n, &a, why, sizeof(why)); \
                                                                             \
		if (rc) {                                                    \
			if (rc == -EBADMSG && !why[0])                       \
				abort();                                     \
			return;                                              \
		}                                                            \
		if (cl_rec_##type##_encode(&a, &e1, &l1, why, sizeof(why)))  \
			abort();                                             \
		if (cl_rec_##type##_decode(e1, l1, &b, why, sizeof(why)))    \
			abort();                                             \
		if (cl_rec_##type##_encode(&b, &e2, &l2, why, sizeof(why)))  \
			abort();                                             \
		if (l1 != l2 || memcmp(e1, e2, l1))                          \
			abort();                                             \
		FINI_##type(&a);                                             \
		FINI_##type(&b);                                             \
		free(e1);                                                    \
		free(e2);                                                    \
	}

#define FINI_node   cl_rec_node_fini
#define FINI_member cl_rec_member_fini
#define FINI_bucket (void)
#define FINI_object cl_rec_object_fini

ROUND(node, cl_rec_node)
ROUND(member, cl_rec_member)
ROUND(bucket, cl_rec_bucket)
ROUND(object, cl_rec_object)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static void (*const fn[])(const uint8_t *, size_t) = { round_node, round_member,
		                                               round_bucket, round_object };

	if (size < 1)
		return 0;
	fn[data[0] % 4](data + 1, size - 1);
	return 0;
}
