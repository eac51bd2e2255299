/* rpc_status: errors <-> gRPC status, messages, marshaller names, the method table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rpc.h"
#include "rpc_stats.h"
#include "rpc_status_internal.h" /* what the wire carries */
#include "rpc_internal.h"        /* rpc_marshaller_parse */
#include "rpc_msg.h"             /* the descriptors: rpc-internal */

static void
test_status_mapping(void **state)
{
	struct rpc_status st;
	enum rpc_marshaller m;

	(void)state;
	assert_int_equal(rpc_status_from_err(-EINVAL), GRPC_STATUS_INVALID_ARGUMENT);
	assert_int_equal(rpc_status_from_err(-EBADMSG), GRPC_STATUS_DATA_LOSS);
	assert_int_equal(rpc_status_from_err(-ENOENT), GRPC_STATUS_NOT_FOUND);
	assert_int_equal(rpc_status_from_err(-EAGAIN), GRPC_STATUS_RESOURCE_EXHAUSTED);
	assert_int_equal(rpc_status_from_err(-ECANCELED), GRPC_STATUS_CANCELLED);
	assert_int_equal(rpc_status_from_err(-EIO), GRPC_STATUS_INTERNAL);
	assert_int_equal(rpc_status_from_err(0), GRPC_STATUS_OK);
	for (int e = 1; e < 140; e++) {
		grpc_status_code c = rpc_status_from_err(-e);

		if (c != GRPC_STATUS_INTERNAL)
			assert_int_equal(rpc_status_from_err(rpc_err_from_status(c)), c);
	}
	/* every zest code has its gRPC status, and a status alone gives back its kind */
	for (int c = 1; c < ZC_CODE_COUNT; c++) {
		grpc_status_code g = rpc_status_from_err(ZC_E(c));

		assert_int_not_equal(g, GRPC_STATUS_OK);
		if (g != GRPC_STATUS_INTERNAL)
			assert_int_equal(rpc_status_from_err(rpc_err_from_status(g)), g);
	}
	assert_int_equal(rpc_status_from_err(ZC_E(ZC_NO_BUCKET)), GRPC_STATUS_NOT_FOUND);
	assert_int_equal(rpc_status_from_err(ZC_E(ZC_NO_QUORUM)), GRPC_STATUS_UNAVAILABLE);
	assert_int_equal(rpc_status_from_err(ZC_E(ZC_PRECONDITION)),
	                 GRPC_STATUS_FAILED_PRECONDITION);
	/* the message is the code's word and the text; the error is kept as given */
	rpc_status_set(&st, -EBADMSG, "crc %d", 5);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_DATA_LOSS);
	assert_int_equal(st.err, -EBADMSG);
	assert_string_equal(st.msg, "BadDigest: crc 5");
	rpc_status_set(&st, ZC_E(ZC_NO_BUCKET), "%s", "b1");
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_NOT_FOUND);
	assert_int_equal(zc_err_code(st.err), ZC_NO_BUCKET);
	assert_string_equal(st.msg, "NoSuchBucket: b1");
	rpc_status_set(&st, -ENOENT, "no such thing: %s", "b1");
	assert_string_equal(st.msg, "NoSuchKey: no such thing: b1");
	rpc_status_set(&st, 0, "ignored");
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_OK);
	assert_string_equal(st.msg, "");
	rpc_status_set(&st, ZC_E(ZC_PRECONDITION), NULL);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_FAILED_PRECONDITION);
	assert_string_equal(st.msg, "PreconditionFailed: ");
	rpc_status_set(&st, -ENOENT, NULL);
	assert_string_equal(st.msg, "NoSuchKey: No such file or directory");
	/* codes and errno values meet in zc_err_code */
	assert_int_equal(zc_err_code(-ENOENT), ZC_NO_KEY);
	assert_int_equal(zc_err_code(-EAGAIN), ZC_SLOW_DOWN);
	assert_int_equal(zc_err_code(ZC_E(ZC_NO_QUORUM)), ZC_NO_QUORUM);
	assert_int_equal(zc_err_code(0), ZC_OK);
	assert_string_equal(zc_code_word(ZC_BUCKET_NOT_EMPTY), "BucketNotEmpty");
	assert_int_equal(rpc_marshaller_parse("copy", &m), 0);
	assert_int_equal(m, RPC_MARSHAL_COPY);
	assert_int_equal(rpc_marshaller_parse("zerocopy", &m), 0);
	assert_int_equal(m, RPC_MARSHAL_ZEROCOPY);
	assert_int_equal(rpc_marshaller_parse("zero", &m), -EINVAL);
	assert_string_equal(rpc_stage_name(RPC_STAGE_ALIGN), "align");
	assert_string_equal(rpc_method_path(RPC_LIST_BUCKETS), "/zest.Datanode/ListBuckets");
}

static void
test_method_table(void **state)
{
	(void)state;
	for (int m = 0; m < RPC_METHOD_COUNT; m++) {
		assert_non_null(rpc_method_path(m));
		assert_non_null(rpc_method_request(m));
		assert_non_null(rpc_method_response(m));
	}
	assert_ptr_equal(rpc_method_request(RPC_WRITE), &zest__write_chunk__descriptor);
	assert_ptr_equal(rpc_method_response(RPC_READ), &zest__read_chunk__descriptor);
	assert_null(rpc_method_path(RPC_METHOD_COUNT));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_mapping),
		cmocka_unit_test(test_method_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
