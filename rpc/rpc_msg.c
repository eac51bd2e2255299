/*
 * rpc_msg: rpc.h's message structs to and from the protobuf-c types of zest.proto.
 * Metadata only: strings are pointed to (in either direction), arrays are built in an
 * arena; payload bytes never pass through here.
 */
#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>

#include "rpc_internal.h"

/* ------------------------------------------------------------------ arena */

struct rpc_arena_blk {
	struct rpc_arena_blk *next;
	alignas(max_align_t) unsigned char data[];
};

void *
rpc_arena_alloc(struct rpc_arena *a, size_t n)
{
	struct rpc_arena_blk *b = calloc(1, sizeof(*b) + n);

	if (!b)
		return NULL;
	b->next = a->head;
	a->head = b;
	return b->data;
}

void
rpc_arena_free(struct rpc_arena *a)
{
	while (a->head) {
		struct rpc_arena_blk *b = a->head;

		a->head = b->next;
		free(b);
	}
}

static void *
arena_pb_alloc(void *data, size_t size)
{
	return rpc_arena_alloc(data, size);
}

static void
arena_pb_free(void *data, void *ptr)
{
	(void)data; /* freed with the arena */
	(void)ptr;
}

ProtobufCMessage *
rpc_arena_unpack(struct rpc_arena *a, const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb,
                 char *err, size_t cap)
{
	ProtobufCAllocator al = { arena_pb_alloc, arena_pb_free, a };
	grpc_byte_buffer_reader reader;
	ProtobufCMessage *msg;
	grpc_slice all;

	if (!bb || !grpc_byte_buffer_reader_init(&reader, bb))
		return NULL;
	all = grpc_byte_buffer_reader_readall(&reader);
	grpc_byte_buffer_reader_destroy(&reader);
	msg = protobuf_c_message_unpack(desc, &al, GRPC_SLICE_LENGTH(all),
	                                GRPC_SLICE_START_PTR(all));
	/* protobuf-c cuts a string at a NUL: refuse such a message (its memory stays in a) */
	if (msg && rpc_wire_strings_check(desc, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all),
	                                  err, cap))
		msg = NULL;
	grpc_slice_unref(all);
	return msg;
}

/* Sent strings: NULL goes out as "". protobuf-c's fields are char * but only read. */
static char *
str_out(const char *s)
{
	return (char *)(s ? s : "");
}

/* ------------------------------------------------------------------ pieces */

int
rpc_msg_attrs_to_pb(const struct rpc_attr *in, size_t n, Zest__Attr ***out, size_t *n_out,
                    struct rpc_arena *a)
{
	Zest__Attr *v;
	Zest__Attr **pv;

	*out = NULL;
	*n_out = 0;
	if (!n)
		return 0;
	v = rpc_arena_alloc(a, n * sizeof(*v));
	pv = rpc_arena_alloc(a, n * sizeof(*pv));
	if (!v || !pv)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		zest__attr__init(&v[i]);
		v[i].name = str_out(in[i].name);
		v[i].value = str_out(in[i].value);
		pv[i] = &v[i];
	}
	*out = pv;
	*n_out = n;
	return 0;
}

int
rpc_msg_attrs_from_pb(Zest__Attr *const *in, size_t n, const struct rpc_attr **out, size_t *n_out,
                      struct rpc_arena *a)
{
	struct rpc_attr *v;

	*out = NULL;
	*n_out = 0;
	if (!n)
		return 0;
	v = rpc_arena_alloc(a, n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		v[i].name = in[i]->name;
		v[i].value = in[i]->value;
	}
	*out = v;
	*n_out = n;
	return 0;
}

static void
cond_to_pb(const struct rpc_write_cond *in, Zest__WriteCondition *out)
{
	zest__write_condition__init(out);
	out->if_none_match = in->if_none_match;
	out->if_match = str_out(in->if_match);
}

static void
cond_from_pb(const Zest__WriteCondition *in, struct rpc_write_cond *out)
{
	out->if_none_match = in->if_none_match;
	out->if_match = in->if_match;
}

/* ------------------------------------------------------------------ streams */

void
rpc_msg_open_to_pb(const struct rpc_write_open *in, Zest__WriteOpen *out)
{
	zest__write_open__init(out);
	out->bucket = str_out(in->bucket);
	out->key = str_out(in->key);
	out->size = in->size;
	out->size_known = in->size_known;
	out->ec_k = in->ec_k;
	out->ec_m = in->ec_m;
}

void
rpc_msg_open_from_pb(const Zest__WriteOpen *in, struct rpc_write_open *out)
{
	out->bucket = in->bucket;
	out->key = in->key;
	out->size = in->size;
	out->size_known = in->size_known;
	out->ec_k = in->ec_k;
	out->ec_m = in->ec_m;
}

int
rpc_msg_commit_to_pb(const struct rpc_commit *in, Zest__WriteChunk *wc, Zest__WriteCondition *cond,
                     struct rpc_arena *a)
{
	if (!in)
		return 0;
	wc->etag = str_out(in->etag);
	if (in->cond) {
		cond_to_pb(in->cond, cond);
		wc->cond = cond;
	}
	return rpc_msg_attrs_to_pb(in->attrs, in->n_attrs, &wc->attrs, &wc->n_attrs, a);
}

int
rpc_msg_commit_from_pb(const Zest__WriteChunk *wc, struct rpc_commit *out,
                       struct rpc_write_cond *cond, struct rpc_arena *a)
{
	memset(out, 0, sizeof(*out));
	out->etag = wc->etag;
	if (wc->cond) {
		cond_from_pb(wc->cond, cond);
		out->cond = cond;
	}
	return rpc_msg_attrs_from_pb(wc->attrs, wc->n_attrs, &out->attrs, &out->n_attrs, a);
}

void
rpc_msg_result_to_pb(const struct rpc_write_result *in, Zest__WriteResult *out)
{
	zest__write_result__init(out);
	out->size = in->size;
	out->crc32c = in->crc32c;
	out->etag = str_out(in->etag);
	out->mtime_ns = in->mtime_ns;
}

void
rpc_msg_result_from_pb(const Zest__WriteResult *in, struct rpc_write_result *out)
{
	out->size = in->size;
	out->crc32c = in->crc32c;
	out->etag = in->etag;
	out->mtime_ns = in->mtime_ns;
}

void
rpc_msg_read_req_to_pb(const struct rpc_read_req *in, Zest__ReadRequest *out)
{
	zest__read_request__init(out);
	out->bucket = str_out(in->bucket);
	out->key = str_out(in->key);
	out->offset = in->offset;
	out->length = in->length;
	out->has_length = in->has_length;
}

void
rpc_msg_read_req_from_pb(const Zest__ReadRequest *in, struct rpc_read_req *out)
{
	out->bucket = in->bucket;
	out->key = in->key;
	out->offset = in->offset;
	out->length = in->length;
	out->has_length = in->has_length;
}

int
rpc_msg_info_to_pb(const struct rpc_object_info *in, Zest__ObjectInfo *out, struct rpc_arena *a)
{
	zest__object_info__init(out);
	out->key = str_out(in->key);
	out->size = in->size;
	out->etag = str_out(in->etag);
	out->mtime_ns = in->mtime_ns;
	out->crc32c = in->crc32c;
	out->ec_k = in->ec_k;
	out->ec_m = in->ec_m;
	return rpc_msg_attrs_to_pb(in->attrs, in->n_attrs, &out->attrs, &out->n_attrs, a);
}

int
rpc_msg_info_from_pb(const Zest__ObjectInfo *in, struct rpc_object_info *out, struct rpc_arena *a)
{
	memset(out, 0, sizeof(*out));
	out->key = in->key;
	out->size = in->size;
	out->etag = in->etag;
	out->mtime_ns = in->mtime_ns;
	out->crc32c = in->crc32c;
	out->ec_k = in->ec_k;
	out->ec_m = in->ec_m;
	return rpc_msg_attrs_from_pb(in->attrs, in->n_attrs, &out->attrs, &out->n_attrs, a);
}
