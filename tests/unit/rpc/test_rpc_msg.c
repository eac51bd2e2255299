/*
 * rpc_msg: rpc.h's structs through the wire and back (pack, unpack), for every unary
 * request and response and the stream messages; the NULL-as-"" rule; malformed input.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rpc_internal.h" /* rpc_msg.h and the packers: rpc-internal */

static const struct rpc_attr attrs[] = { { "content-type", "text/plain" },
	                                 { "x-amz-meta-color", "blue" } };

/* Pack a protobuf-c message and unpack it again into an arena. */
static ProtobufCMessage *
round_trip(const ProtobufCMessage *msg, struct rpc_arena *a)
{
	grpc_byte_buffer *bb = rpc_pack_message(msg);
	ProtobufCMessage *back;

	assert_non_null(bb);
	back = rpc_arena_unpack(a, msg->descriptor, bb, NULL, 0);
	grpc_byte_buffer_destroy(bb);
	assert_non_null(back);
	return back;
}

static void
test_unary_requests(void **state)
{
	struct rpc_write_cond cond = { .if_none_match = true, .if_match = "e1" };
	struct rpc_object_req parts[] = { { "b", "p1", "" }, { "", "p2", "tag2" } };
	union rpc_unary_req in, out;
	struct rpc_arena a = { 0 };
	grpc_byte_buffer *bb;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.compose = (struct rpc_compose_req){ .bucket = "b",
		                               .key = "k",
		                               .parts = parts,
		                               .n_parts = 2,
		                               .delete_parts = true,
		                               .etag = "etag-3",
		                               .attrs = attrs,
		                               .n_attrs = 2,
		                               .cond = &cond };
	bb = rpc_msg_pack_req(RPC_COMPOSE, &in);
	assert_non_null(bb);
	assert_int_equal(rpc_msg_unpack_req(RPC_COMPOSE, bb, &out, &a, NULL, 0), 0);
	grpc_byte_buffer_destroy(bb);
	assert_string_equal(out.compose.bucket, "b");
	assert_string_equal(out.compose.key, "k");
	assert_int_equal(out.compose.n_parts, 2);
	assert_string_equal(out.compose.parts[1].bucket, "");
	assert_string_equal(out.compose.parts[1].key, "p2");
	assert_string_equal(out.compose.parts[1].etag, "tag2");
	assert_true(out.compose.delete_parts);
	assert_string_equal(out.compose.etag, "etag-3");
	assert_int_equal(out.compose.n_attrs, 2);
	assert_string_equal(out.compose.attrs[1].name, "x-amz-meta-color");
	assert_string_equal(out.compose.attrs[1].value, "blue");
	assert_non_null(out.compose.cond);
	assert_true(out.compose.cond->if_none_match);
	assert_string_equal(out.compose.cond->if_match, "e1");
	rpc_arena_free(&a);

	/* NULL strings go out as "", and a compose without a condition has none */
	memset(&in, 0, sizeof(in));
	in.compose.key = "k";
	bb = rpc_msg_pack_req(RPC_COMPOSE, &in);
	assert_int_equal(rpc_msg_unpack_req(RPC_COMPOSE, bb, &out, &a, NULL, 0), 0);
	grpc_byte_buffer_destroy(bb);
	assert_string_equal(out.compose.bucket, "");
	assert_null(out.compose.cond);
	assert_int_equal(out.compose.n_parts, 0);
	rpc_arena_free(&a);

	memset(&in, 0, sizeof(in));
	in.list = (struct rpc_list_req){ "b", "pre/", "pre/a", 7, "/" };
	bb = rpc_msg_pack_req(RPC_LIST, &in);
	assert_int_equal(rpc_msg_unpack_req(RPC_LIST, bb, &out, &a, NULL, 0), 0);
	grpc_byte_buffer_destroy(bb);
	assert_string_equal(out.list.prefix, "pre/");
	assert_string_equal(out.list.start_after, "pre/a");
	assert_int_equal(out.list.limit, 7);
	assert_string_equal(out.list.delimiter, "/");
	rpc_arena_free(&a);

	bb = rpc_msg_pack_req(RPC_LIST_BUCKETS, NULL);
	assert_int_equal(rpc_msg_unpack_req(RPC_LIST_BUCKETS, bb, &out, &a, NULL, 0), 0);
	grpc_byte_buffer_destroy(bb);
	rpc_arena_free(&a);

	/* no payload, or bytes that are not the message: refused */
	assert_int_equal(rpc_msg_unpack_req(RPC_STAT, NULL, &out, &a, NULL, 0), -EINVAL);
	{
		grpc_slice s = grpc_slice_from_static_string("\x0a\x7f");
		grpc_byte_buffer *bad = grpc_raw_byte_buffer_create(&s, 1);

		assert_int_equal(rpc_msg_unpack_req(RPC_STAT, bad, &out, &a, NULL, 0), -EINVAL);
		grpc_byte_buffer_destroy(bad);
	}
	rpc_arena_free(&a);
}

static void
test_unary_responses(void **state)
{
	struct rpc_object_info ents[] = { { .key = "a", .size = 1, .etag = "ea" },
		                          { .key = "b", .size = 2, .etag = NULL } };
	const char *prefixes[] = { "d1/", "d2/" };
	struct rpc_list_result lr = { ents, 2, prefixes, 2, true, "b" };
	struct rpc_bucket_info bis[] = { { "x", 5 }, { "y", 6 } };
	struct rpc_bucket_list bl = { bis, 2 };
	struct rpc_object_info info = { .key = "k",
		                        .size = 10,
		                        .etag = "e",
		                        .mtime_ns = 99,
		                        .crc32c = 0xdeadbeef,
		                        .attrs = attrs,
		                        .n_attrs = 2,
		                        .ec_k = 4,
		                        .ec_m = 2 };
	struct rpc_unary_resp r;
	grpc_byte_buffer *bb;

	(void)state;
	bb = rpc_msg_pack_resp(RPC_STAT, &info);
	assert_int_equal(rpc_msg_unpack_resp(RPC_STAT, bb, &r), 0);
	grpc_byte_buffer_destroy(bb);
	assert_int_equal(r.method, RPC_STAT);
	assert_string_equal(r.info.key, "k");
	assert_int_equal(r.info.mtime_ns, 99);
	assert_int_equal(r.info.crc32c, 0xdeadbeef);
	assert_int_equal(r.info.ec_k, 4);
	assert_int_equal(r.info.ec_m, 2);
	assert_int_equal(r.info.n_attrs, 2);
	assert_string_equal(r.info.attrs[0].value, "text/plain");
	rpc_unary_resp_fini(&r);
	assert_null(r.mem);
	rpc_unary_resp_fini(&r); /* twice, and NULL: no-ops */
	rpc_unary_resp_fini(NULL);

	bb = rpc_msg_pack_resp(RPC_LIST, &lr);
	assert_int_equal(rpc_msg_unpack_resp(RPC_LIST, bb, &r), 0);
	grpc_byte_buffer_destroy(bb);
	assert_int_equal(r.list.n_entries, 2);
	assert_string_equal(r.list.entries[1].key, "b");
	assert_string_equal(r.list.entries[1].etag, "");
	assert_int_equal(r.list.entries[1].size, 2);
	assert_int_equal(r.list.n_common_prefixes, 2);
	assert_string_equal(r.list.common_prefixes[1], "d2/");
	assert_true(r.list.truncated);
	assert_string_equal(r.list.next_start_after, "b");
	rpc_unary_resp_fini(&r);

	bb = rpc_msg_pack_resp(RPC_LIST_BUCKETS, &bl);
	assert_int_equal(rpc_msg_unpack_resp(RPC_LIST_BUCKETS, bb, &r), 0);
	grpc_byte_buffer_destroy(bb);
	assert_int_equal(r.buckets.n_buckets, 2);
	assert_string_equal(r.buckets.buckets[1].name, "y");
	assert_int_equal(r.buckets.buckets[1].ctime_ns, 6);
	rpc_unary_resp_fini(&r);

	bb = rpc_msg_pack_resp(RPC_COMPOSE, &(struct rpc_write_result){ 5, 7, "ce", 8 });
	assert_int_equal(rpc_msg_unpack_resp(RPC_COMPOSE, bb, &r), 0);
	grpc_byte_buffer_destroy(bb);
	assert_int_equal(r.write.size, 5);
	assert_int_equal(r.write.crc32c, 7);
	assert_string_equal(r.write.etag, "ce");
	rpc_unary_resp_fini(&r);

	bb = rpc_msg_pack_resp(RPC_DELETE, &(struct rpc_delete_result){ true });
	assert_int_equal(rpc_msg_unpack_resp(RPC_DELETE, bb, &r), 0);
	grpc_byte_buffer_destroy(bb);
	assert_true(r.del.existed);
	rpc_unary_resp_fini(&r);

	bb = rpc_msg_pack_resp(RPC_DELETE_BUCKET, NULL);
	assert_int_equal(rpc_msg_unpack_resp(RPC_DELETE_BUCKET, bb, &r), 0);
	grpc_byte_buffer_destroy(bb);
	rpc_unary_resp_fini(&r);

	/* a missing response, and the stream methods, are refused with nothing held */
	assert_int_equal(rpc_msg_unpack_resp(RPC_STAT, NULL, &r), -EINVAL);
	assert_null(r.mem);
	assert_int_equal(rpc_msg_unpack_resp(RPC_WRITE, NULL, &r), -EINVAL);
	assert_null(rpc_msg_pack_resp(RPC_READ, &info));
}

static void
test_stream_messages(void **state)
{
	struct rpc_write_cond cond = { .if_none_match = false, .if_match = "*" };
	struct rpc_commit cm = { "etag", attrs, 2, &cond }, cm_back;
	struct rpc_write_open op = { "b", "k", 100, true, 6, 3 }, op_back;
	struct rpc_read_req rq = { "b", "k", 10, 20, true }, rq_back;
	Zest__WriteChunk wc = ZEST__WRITE_CHUNK__INIT, *wc_back;
	Zest__WriteCondition pbc;
	Zest__WriteOpen pbo;
	Zest__ReadRequest pbr;
	struct rpc_write_cond cond_back;
	struct rpc_arena a = { 0 }, b = { 0 };

	(void)state;
	rpc_msg_open_to_pb(&op, &pbo);
	wc.open = &pbo;
	wc.commit = true;
	assert_int_equal(rpc_msg_commit_to_pb(&cm, &wc, &pbc, &a), 0);
	wc_back = (Zest__WriteChunk *)round_trip(&wc.base, &b);
	rpc_arena_free(&a);
	rpc_msg_open_from_pb(wc_back->open, &op_back);
	assert_string_equal(op_back.key, "k");
	assert_int_equal(op_back.size, 100);
	assert_true(op_back.size_known);
	assert_int_equal(op_back.ec_k, 6);
	assert_int_equal(op_back.ec_m, 3);
	assert_int_equal(rpc_msg_commit_from_pb(wc_back, &cm_back, &cond_back, &b), 0);
	assert_string_equal(cm_back.etag, "etag");
	assert_int_equal(cm_back.n_attrs, 2);
	assert_string_equal(cm_back.attrs[1].value, "blue");
	assert_ptr_equal(cm_back.cond, &cond_back);
	assert_false(cond_back.if_none_match);
	assert_string_equal(cond_back.if_match, "*");
	rpc_arena_free(&b);

	/* a commit without a condition (or no commit struct at all) carries none */
	zest__write_chunk__init(&wc);
	assert_int_equal(rpc_msg_commit_to_pb(NULL, &wc, &pbc, &a), 0);
	assert_null(wc.cond);
	assert_int_equal(rpc_msg_commit_from_pb(&wc, &cm_back, &cond_back, &a), 0);
	assert_null(cm_back.cond);
	assert_string_equal(cm_back.etag, "");
	rpc_arena_free(&a);

	rpc_msg_read_req_to_pb(&rq, &pbr);
	rpc_msg_read_req_from_pb((Zest__ReadRequest *)round_trip(&pbr.base, &b), &rq_back);
	assert_string_equal(rq_back.bucket, "b");
	assert_int_equal(rq_back.offset, 10);
	assert_int_equal(rq_back.length, 20);
	assert_true(rq_back.has_length);
	rpc_arena_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unary_requests),
		cmocka_unit_test(test_unary_responses),
		cmocka_unit_test(test_stream_messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
