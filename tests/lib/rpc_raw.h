/*
 * Hand-made Write calls for tests: pack a WriteChunk with any fields (a wrong CRC, a
 * gap, a missing open) and send it on a raw gRPC core call, past rpc_client's own
 * checks, to see how a server answers bad input. Shared by the rpc server's and the
 * datanode binding's tests. The server's bucket is "bkt"; the key "refused" names the
 * bucket "nosuchbucket" instead.
 */
#ifndef ZEST_TESTS_RPC_RAW_H
#define ZEST_TESTS_RPC_RAW_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "zc_crc.h"
#include "rpc_client.h"
#include "rpc_status_internal.h"
#include "t_check.h"

struct raw_msg {
	uint8_t *bytes;
	size_t len;
};

static grpc_event __attribute__((unused)) pluck(grpc_completion_queue *cq, void *tag)
{
	return grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
}

/*
 * Send msgs on one call of method ("/zest.Datanode/Stat", ...; any of them: unary and
 * streaming calls are the same ops in gRPC core), half-close when close, return the
 * status: code, the message, and err = ZC_E(code) of the "zest-err" trailer (0 if none).
 * The first response message, if any, is dropped.
 */
static void __attribute__((unused))
raw_call_creds(const char *target, grpc_channel_credentials *creds, const char *method_path,
               const struct raw_msg *msgs, size_t n, bool close, struct rpc_status *st)
{
	grpc_channel *ch = grpc_channel_create(target, creds, NULL);
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_slice method = grpc_slice_from_static_string(method_path);
	grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method,
	                                           NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	grpc_metadata_array md0, md1;
	grpc_status_code code;
	grpc_slice details;
	grpc_byte_buffer *resp = NULL;
	grpc_op ops[4];

	grpc_metadata_array_init(&md0);
	grpc_metadata_array_init(&md1);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	CHECK(grpc_call_start_batch(call, ops, 1, (void *)1, NULL) == GRPC_CALL_OK);
	pluck(cq, (void *)1);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[0].data.recv_initial_metadata.recv_initial_metadata = &md0;
	ops[1].op = GRPC_OP_RECV_MESSAGE;
	ops[1].data.recv_message.recv_message = &resp;
	ops[2].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[2].data.recv_status_on_client.trailing_metadata = &md1;
	ops[2].data.recv_status_on_client.status = &code;
	ops[2].data.recv_status_on_client.status_details = &details;
	CHECK(grpc_call_start_batch(call, ops, 3, (void *)2, NULL) == GRPC_CALL_OK);
	for (size_t i = 0; i < n; i++) {
		grpc_slice s =
		        grpc_slice_from_copied_buffer((const char *)msgs[i].bytes, msgs[i].len);
		grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
		grpc_event ev;

		grpc_slice_unref(s);
		memset(ops, 0, sizeof(ops));
		ops[0].op = GRPC_OP_SEND_MESSAGE;
		ops[0].data.send_message.send_message = bb;
		CHECK(grpc_call_start_batch(call, ops, 1, (void *)3, NULL) == GRPC_CALL_OK);
		ev = pluck(cq, (void *)3);
		grpc_byte_buffer_destroy(bb);
		if (!ev.success)
			break; /* the server already answered */
	}
	if (close) {
		memset(ops, 0, sizeof(ops));
		ops[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
		CHECK(grpc_call_start_batch(call, ops, 1, (void *)4, NULL) == GRPC_CALL_OK);
		pluck(cq, (void *)4);
	}
	pluck(cq, (void *)2);
	/* what the client library makes of it: the error from the trailer, else the code */
	rpc_status_from_wire(st, code, details, &md1);
	grpc_slice_unref(details);
	if (resp)
		grpc_byte_buffer_destroy(resp);
	grpc_metadata_array_destroy(&md0);
	grpc_metadata_array_destroy(&md1);
	grpc_call_unref(call);
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_past(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

/* raw_call_creds over plaintext (the caller's creds are borrowed there, never released). */
static void __attribute__((unused))
raw_call(const char *target, const char *method_path, const struct raw_msg *msgs, size_t n,
         bool close, struct rpc_status *st)
{
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();

	raw_call_creds(target, creds, method_path, msgs, n, close, st);
	grpc_channel_credentials_release(creds);
}

/* Send msgs on one Write call, half-close, return the status. */
static void __attribute__((unused)) raw_write(const char *target, const struct raw_msg *msgs,
                                              size_t n, bool close, struct rpc_status *st)
{
	raw_call(target, "/zest.Datanode/Write", msgs, n, close, st);
}

/* Protobuf wire pieces, written by hand so that the bytes do not depend on protobuf-c
 * (and no test outside rpc/ needs its generated header). */
static size_t __attribute__((unused)) raw_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	do {
		p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

static size_t __attribute__((unused))
raw_bytes(uint8_t *p, unsigned field, const void *b, size_t len)
{
	size_t n = raw_varint(p, (uint64_t)field << 3 | 2);

	n += raw_varint(p + n, len);
	memcpy(p + n, b, len);
	return n + len;
}

static size_t __attribute__((unused)) raw_uint(uint8_t *p, unsigned field, uint64_t v)
{
	size_t n;

	if (!v)
		return 0; /* proto3 leaves defaults out */
	n = raw_varint(p, (uint64_t)field << 3);
	return n + raw_varint(p + n, v);
}

/* Pack a WriteChunk (zest.proto): open (when key), offset, data of len pattern bytes,
 * crc (+bad), commit. */
static struct raw_msg __attribute__((unused))
chunk_msg(const char *key, uint64_t size, bool size_known, uint64_t offset, size_t len, bool commit,
          uint32_t crc_xor)
{
	struct raw_msg m;
	uint8_t *data = malloc(len + 1);
	size_t klen = key ? strlen(key) : 0, n_open = 0, n = 0;
	uint8_t *open = malloc(klen + 64);
	uint32_t crc;

	CHECK(data && open);
	memset(data, 'x', len);
	m.bytes = malloc(len + klen + 128);
	CHECK(m.bytes);
	if (key) {
		const char *bucket = strcmp(key, "refused") ? "bkt" : "nosuchbucket";

		n_open += raw_bytes(open + n_open, 1, bucket, strlen(bucket));
		n_open += raw_bytes(open + n_open, 2, key, klen);
		n_open += raw_uint(open + n_open, 3, size);
		n_open += raw_uint(open + n_open, 4, size_known);
		n += raw_bytes(m.bytes + n, 1, open, n_open);
	}
	n += raw_uint(m.bytes + n, 2, offset);
	if (len)
		n += raw_bytes(m.bytes + n, 3, data, len);
	crc = zc_crc32c(0, data, len) ^ crc_xor;
	if (crc) {
		m.bytes[n++] = 4 << 3 | 5; /* fixed32, little-endian */
		for (int i = 0; i < 4; i++)
			m.bytes[n++] = (uint8_t)(crc >> (8 * i));
	}
	n += raw_uint(m.bytes + n, 5, commit);
	m.len = n;
	free(open);
	free(data);
	return m;
}

#endif
