/*
 * rpc marshallers: a chunk message parsed in place from gRPC's receive slices
 * (zero-copy), the classic gather + protobuf-c unpack + aligned copy (copy), and the
 * send side that puts caller memory on the wire without a copy.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>

#include "rpc_internal.h"

#define ALIGN 4096

/* A read position in a list of spans; pos counts bytes from the message start. */
struct cur {
	const struct zc_seg *in;
	size_t n, i, off;
	size_t pos, total;
};

static void
cur_skip_empty(struct cur *c)
{
	while (c->i < c->n && c->off == c->in[c->i].len) {
		c->i++;
		c->off = 0;
	}
}

static int
cur_byte(struct cur *c, uint8_t *b)
{
	cur_skip_empty(c);
	if (c->i == c->n)
		return -1;
	*b = c->in[c->i].ptr[c->off++];
	c->pos++;
	return 0;
}

static void
cur_advance(struct cur *c, size_t len)
{
	while (len) {
		size_t take;

		cur_skip_empty(c);
		take = c->in[c->i].len - c->off;
		if (take > len)
			take = len;
		c->off += take;
		c->pos += take;
		len -= take;
	}
}

static int __attribute__((format(printf, 2, 3))) fail(struct rpc_chunk *chunk, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(chunk->err, sizeof(chunk->err), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int
read_varint(struct cur *c, uint64_t *v, struct rpc_chunk *chunk, const char *what)
{
	size_t start = c->pos;
	uint64_t x = 0;

	for (unsigned shift = 0; shift < 70; shift += 7) {
		uint8_t b;

		if (cur_byte(c, &b))
			return fail(chunk, "truncated varint (%s) at byte %zu", what, start);
		if (shift == 63 && (b & 0x80))
			break;
		if (shift == 63 && b > 1)
			return fail(chunk, "varint (%s) overflows 64 bits at byte %zu", what,
			            start);
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return fail(chunk, "varint (%s) longer than 10 bytes at byte %zu", what, start);
}

/* The wire type a field of this type uses (packed repeated fields also use 2). */
static unsigned
wire_type_of(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
		return 5;
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 1;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
	case PROTOBUF_C_TYPE_MESSAGE:
		return 2;
	default:
		return 0;
	}
}

static int
grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* Copy len bytes at c (advancing it) to dst: only ever metadata fields. */
static void
cur_copy(struct cur *c, uint8_t *dst, size_t len)
{
	while (len) {
		size_t take;

		cur_skip_empty(c);
		take = c->in[c->i].len - c->off;
		if (take > len)
			take = len;
		memcpy(dst, c->in[c->i].ptr + c->off, take);
		dst += take;
		c->off += take;
		c->pos += take;
		len -= take;
	}
}

int
rpc_chunk_parse(const ProtobufCMessageDescriptor *desc, unsigned data_field,
                const struct zc_seg *in, size_t n_in, struct rpc_chunk *chunk)
{
	struct cur c = { .in = in, .n = n_in };
	size_t meta_len = 0;
	int rc;

	rpc_chunk_clear(chunk);
	chunk->n_segs = 0;
	chunk->data_len = 0;
	chunk->err[0] = 0;
	for (size_t i = 0; i < n_in; i++)
		c.total += in[i].len;

	while (c.pos < c.total) {
		struct cur field_start = c;
		const ProtobufCFieldDescriptor *f;
		uint64_t tag, len = 0, v;
		unsigned wt, want;
		uint32_t num;

		rc = read_varint(&c, &tag, chunk, "tag");
		if (rc)
			return rc;
		if (c.pos - field_start.pos > 5) /* a tag is a uint32: protobuf-c refuses more */
			return fail(chunk, "tag longer than 5 bytes at byte %zu", field_start.pos);
		wt = tag & 7;
		if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
			return fail(chunk, "bad field number %llu at byte %zu",
			            (unsigned long long)(tag >> 3), field_start.pos);
		num = (uint32_t)(tag >> 3);
		switch (wt) {
		case 0:
			rc = read_varint(&c, &v, chunk, "value");
			if (rc)
				return rc;
			break;
		case 1:
		case 5:
			len = wt == 1 ? 8 : 4;
			if (c.total - c.pos < len)
				return fail(chunk, "field %u: truncated fixed%u at byte %zu", num,
				            wt == 1 ? 64 : 32, c.pos);
			cur_advance(&c, len);
			break;
		case 2: {
			size_t len_start = c.pos;

			rc = read_varint(&c, &len, chunk, "length");
			if (rc)
				return rc;
			/* a length is a uint32 too: protobuf-c refuses a longer prefix, even one
			 * that pads a small value (80 80 80 80 80 00) */
			if (c.pos - len_start > 5 || len > UINT32_MAX)
				return fail(chunk,
				            "field %u: length prefix longer than 5 bytes or "
				            "over 4 GiB at byte %zu",
				            num, len_start);
			if (len > c.total - c.pos)
				return fail(chunk,
				            "field %u: length %llu past the end (%zu bytes left)",
				            num, (unsigned long long)len, c.total - c.pos);
			break;
		}
		default:
			return fail(chunk, "field %u: unsupported wire type %u at byte %zu", num,
			            wt, field_start.pos);
		}

		f = protobuf_c_message_descriptor_get_field(desc, num);
		if (!f)
			goto skip; /* unknown field: skipped, as protobuf requires */
		want = wire_type_of(f);
		if (wt != want && !(wt == 2 && f->label == PROTOBUF_C_LABEL_REPEATED && want != 2))
			return fail(chunk, "field %u (%s): wire type %u, want %u", num, f->name, wt,
			            want);

		if (num == data_field) {
			/* The payload: segments into the input, last occurrence wins. */
			struct cur d = c;
			size_t left = len;

			chunk->n_segs = 0;
			chunk->data_len = len;
			while (left) {
				size_t take;

				cur_skip_empty(&d);
				take = d.in[d.i].len - d.off;
				if (take > left)
					take = left;
				if (grow((void **)&chunk->segs, &chunk->cap_segs, chunk->n_segs + 1,
				         sizeof(*chunk->segs)))
					return fail(chunk, "out of memory");
				chunk->segs[chunk->n_segs++] =
				        (struct zc_seg){ .ptr = d.in[d.i].ptr + d.off,
					                 .len = take,
					                 .ref = d.in[d.i].ref };
				d.off += take;
				d.pos += take;
				left -= take;
			}
			c = d;
			continue;
		}

		/* A known metadata field: gather tag and value for protobuf-c. */
		if (wt == 2)
			cur_advance(&c, len);
		{
			size_t flen = c.pos - field_start.pos;

			if (meta_len + flen > RPC_MAX_META)
				return fail(chunk, "non-data fields exceed %u bytes", RPC_MAX_META);
			if (grow((void **)&chunk->meta, &chunk->meta_cap, meta_len + flen, 1))
				return fail(chunk, "out of memory");
			cur_copy(&field_start, chunk->meta + meta_len, flen);
			meta_len += flen;
		}
		continue;
skip:
		if (wt == 2)
			cur_advance(&c, len);
	}

	chunk->msg = protobuf_c_message_unpack(desc, NULL, meta_len, chunk->meta);
	if (!chunk->msg)
		return fail(chunk, "malformed nested field or string in %s", desc->short_name);
	rc = rpc_wire_strings_check(desc, chunk->meta, meta_len, chunk->err, sizeof(chunk->err));
	if (rc)
		rpc_chunk_clear(chunk);
	return rc;
}

void
rpc_chunk_clear(struct rpc_chunk *chunk)
{
	if (chunk->msg)
		protobuf_c_message_free_unpacked(chunk->msg, NULL);
	chunk->msg = NULL;
}

void
rpc_chunk_fini(struct rpc_chunk *chunk)
{
	rpc_chunk_clear(chunk);
	free(chunk->segs);
	free(chunk->meta);
	free(chunk->in);
	memset(chunk, 0, sizeof(*chunk));
}

/* ------------------------------------------------------------------ receive */

struct bb_hold {
	struct zc_ref ref;
	grpc_byte_buffer *bb;
};

static void
bb_hold_release(struct zc_ref *ref)
{
	struct bb_hold *h = (struct bb_hold *)ref;

	grpc_byte_buffer_destroy(h->bb);
	free(h);
	atomic_fetch_sub(&rpc_stat_live_buffers, 1);
}

struct copy_hold {
	struct zc_ref ref;
	void *buf;
};

static void
copy_hold_release(struct zc_ref *ref)
{
	struct copy_hold *h = (struct copy_hold *)ref;

	free(h->buf);
	free(h);
	atomic_fetch_sub(&rpc_stat_live_buffers, 1);
}

static int
recv_zerocopy(const ProtobufCMessageDescriptor *desc, unsigned data_field, grpc_byte_buffer *bb,
              struct rpc_chunk *chunk, struct zc_ref **hold)
{
	grpc_byte_buffer_reader reader;
	struct bb_hold *h;
	grpc_slice *s;
	size_t n = 0;
	int rc;

	h = malloc(sizeof(*h));
	if (!h) {
		grpc_byte_buffer_destroy(bb);
		return fail(chunk, "out of memory");
	}
	h->bb = bb;
	zc_ref_init(&h->ref, bb_hold_release);
	atomic_fetch_add(&rpc_stat_live_buffers, 1);
	if (!grpc_byte_buffer_reader_init(&reader, bb)) {
		rc = fail(chunk, "cannot read the message (bad compression)");
		goto put_hold;
	}
	/* peek borrows each slice: the byte buffer (held by h) keeps them alive. */
	while (grpc_byte_buffer_reader_peek(&reader, &s)) {
		if (grow((void **)&chunk->in, &chunk->in_cap, n + 1, sizeof(*chunk->in))) {
			grpc_byte_buffer_reader_destroy(&reader);
			rc = fail(chunk, "out of memory");
			goto put_hold;
		}
		chunk->in[n++] = (struct zc_seg){ .ptr = GRPC_SLICE_START_PTR(*s),
			                          .len = GRPC_SLICE_LENGTH(*s),
			                          .ref = &h->ref };
	}
	grpc_byte_buffer_reader_destroy(&reader);
	rc = rpc_chunk_parse(desc, data_field, chunk->in, n, chunk);
	if (rc)
		goto put_hold;
	*hold = &h->ref;
	return 0;

put_hold:
	zc_ref_put(&h->ref);
	return rc;
}

static int
recv_copy(const ProtobufCMessageDescriptor *desc, unsigned data_field, grpc_byte_buffer *bb,
          struct rpc_chunk *chunk, struct zc_ref **hold)
{
	const ProtobufCFieldDescriptor *f =
	        protobuf_c_message_descriptor_get_field(desc, data_field);
	grpc_byte_buffer_reader reader;
	ProtobufCBinaryData *data;
	struct copy_hold *h;
	grpc_slice all;
	int rc = 0;

	if (!grpc_byte_buffer_reader_init(&reader, bb)) {
		grpc_byte_buffer_destroy(bb);
		return fail(chunk, "cannot read the message (bad compression)");
	}
	all = grpc_byte_buffer_reader_readall(&reader); /* copy 1: gather */
	grpc_byte_buffer_reader_destroy(&reader);
	grpc_byte_buffer_destroy(bb);

	rpc_chunk_clear(chunk);
	chunk->n_segs = 0;
	chunk->data_len = 0;
	chunk->msg = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(all),
	                                       GRPC_SLICE_START_PTR(all)); /* copy 2 */
	if (!chunk->msg) {
		/* Same precise message as the zero-copy parser gives. */
		struct zc_seg one = { GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all), NULL };

		rc = rpc_chunk_parse(desc, data_field, &one, 1, chunk);
		rpc_chunk_clear(chunk);
		grpc_slice_unref(all);
		return rc ? rc : fail(chunk, "malformed %s", desc->short_name);
	}
	rc = rpc_wire_strings_check(desc, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all),
	                            chunk->err, sizeof(chunk->err));
	grpc_slice_unref(all);
	if (rc) {
		rpc_chunk_clear(chunk);
		return rc;
	}
	data = (ProtobufCBinaryData *)((char *)chunk->msg + f->offset);
	rpc_count_copy(RPC_STAGE_GATHER, data->len);
	rpc_count_copy(RPC_STAGE_UNPACK, data->len);

	h = malloc(sizeof(*h));
	if (!h)
		goto nomem;
	h->buf = NULL;
	if (data->len) {
		size_t cap = (data->len + ALIGN - 1) / ALIGN * ALIGN;

		if (posix_memalign(&h->buf, ALIGN, cap)) {
			free(h);
			goto nomem;
		}
		memcpy(h->buf, data->data, data->len); /* copy 3: into write buffers */
		rpc_count_copy(RPC_STAGE_ALIGN, data->len);
		if (grow((void **)&chunk->segs, &chunk->cap_segs, 1, sizeof(*chunk->segs))) {
			free(h->buf);
			free(h);
			goto nomem;
		}
		chunk->n_segs = 1;
	}
	zc_ref_init(&h->ref, copy_hold_release);
	atomic_fetch_add(&rpc_stat_live_buffers, 1);
	if (chunk->n_segs)
		chunk->segs[0] = (struct zc_seg){ h->buf, data->len, &h->ref };
	chunk->data_len = data->len;
	free(data->data);
	data->data = NULL;
	data->len = 0;
	*hold = &h->ref;
	return 0;

nomem:
	rpc_chunk_clear(chunk);
	return fail(chunk, "out of memory");
}

int
rpc_marshal_recv(enum rpc_marshaller mode, const ProtobufCMessageDescriptor *desc,
                 unsigned data_field, grpc_byte_buffer *bb, struct rpc_chunk *chunk,
                 struct zc_ref **hold)
{
	*hold = NULL;
	if (mode == RPC_MARSHAL_COPY)
		return recv_copy(desc, data_field, bb, chunk, hold);
	return recv_zerocopy(desc, data_field, bb, chunk, hold);
}

/* ------------------------------------------------------------------ send */

static void
seg_slice_done(void *arg)
{
	zc_ref_put(arg);
}

static size_t
put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

grpc_byte_buffer *
rpc_marshal_send(const ProtobufCMessage *msg, unsigned data_field, const struct zc_seg *segs,
                 size_t n_segs, size_t data_len)
{
	size_t packed = protobuf_c_message_get_packed_size(msg);
	grpc_slice stack[17], *slices = stack;
	grpc_byte_buffer *bb;
	size_t n = 0;
	uint8_t *p;

	if (n_segs + 1 > sizeof(stack) / sizeof(stack[0])) {
		slices = malloc((n_segs + 1) * sizeof(*slices));
		if (!slices)
			return NULL;
	}
	/* Header slice: the packed metadata fields, then the data field's tag and length. */
	{
		uint8_t tmp[20];
		size_t h = data_len ? put_varint(tmp, ((uint64_t)data_field << 3) | 2) : 0;

		if (data_len)
			h += put_varint(tmp + h, data_len);
		slices[n] = grpc_slice_malloc(packed + h);
		p = GRPC_SLICE_START_PTR(slices[n]);
		protobuf_c_message_pack(msg, p);
		memcpy(p + packed, tmp, h);
	}
	n++;
	for (size_t i = 0; i < n_segs; i++) {
		if (!segs[i].len)
			continue;
		if (!segs[i].ref) {
			slices[n++] = grpc_slice_from_static_buffer(segs[i].ptr, segs[i].len);
			continue;
		}
		zc_ref_get(segs[i].ref);
		slices[n++] = grpc_slice_new_with_user_data((void *)segs[i].ptr, segs[i].len,
		                                            seg_slice_done, segs[i].ref);
	}
	bb = grpc_raw_byte_buffer_create(slices, n); /* takes its own refs */
	for (size_t i = 0; i < n; i++)
		grpc_slice_unref(slices[i]);
	if (slices != stack)
		free(slices);
	return bb;
}

grpc_byte_buffer *
rpc_pack_message(const ProtobufCMessage *msg)
{
	grpc_slice s = grpc_slice_malloc(protobuf_c_message_get_packed_size(msg));
	grpc_byte_buffer *bb;

	protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
	bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return bb;
}

ProtobufCMessage *
rpc_unpack_message_err(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb, char *err,
                       size_t cap)
{
	grpc_byte_buffer_reader reader;
	ProtobufCMessage *msg;
	grpc_slice all;

	if (!bb || !grpc_byte_buffer_reader_init(&reader, bb))
		return NULL;
	all = grpc_byte_buffer_reader_readall(&reader);
	grpc_byte_buffer_reader_destroy(&reader);
	msg = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(all),
	                                GRPC_SLICE_START_PTR(all));
	if (msg && rpc_wire_strings_check(desc, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all),
	                                  err, cap)) {
		protobuf_c_message_free_unpacked(msg, NULL);
		msg = NULL;
	}
	grpc_slice_unref(all);
	return msg;
}

ProtobufCMessage *
rpc_unpack_message(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb)
{
	return rpc_unpack_message_err(desc, bb, NULL, 0);
}
