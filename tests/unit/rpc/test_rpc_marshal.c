/*
 * rpc_marshal: the zero-copy parser against protobuf-c's own unpack (random splits,
 * every split of small messages, fields in any order, unknown fields), the bad-input
 * table, the copy marshaller's accounting and alignment, and the zero-copy send side.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <grpc/grpc.h>
#include <grpc/byte_buffer_reader.h>

#include "rpc.h"
#include "rpc_stats.h"
#include "zc_crc.h"
#include "rpc_internal.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void
fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* A random WriteChunk; data points into buf (len bytes). */
static void
make_chunk(Zest__WriteChunk *wc, Zest__WriteOpen *open, Zest__Attr *attrs, Zest__Attr **pattrs,
           uint8_t *buf, size_t len, char *etag)
{
	zest__write_chunk__init(wc);
	zest__write_open__init(open);
	if (rnd() & 1) {
		open->bucket = "bucket-one";
		open->key = "some/key (1).bin";
		open->size = rnd() >> 20;
		open->size_known = rnd() & 1;
		open->ec_k = 4;
		open->ec_m = 2;
		wc->open = open;
	}
	wc->offset = rnd() % 3 ? rnd() >> (rnd() % 64) : 0;
	fill(buf, len);
	wc->data.data = buf;
	wc->data.len = len;
	wc->crc32c = zc_crc32c(0, buf, len);
	wc->commit = rnd() & 1;
	if (rnd() & 1) {
		snprintf(etag, 40, "\"%016llx\"", (unsigned long long)rnd());
		wc->etag = etag;
		for (int i = 0; i < 3; i++) {
			zest__attr__init(&attrs[i]);
			attrs[i].name = i ? "x-amz-meta-color" : "content-type";
			attrs[i].value = i == 2 ? "" : "blue/green";
			pattrs[i] = &attrs[i];
		}
		wc->attrs = pattrs;
		wc->n_attrs = 3;
	}
}

/* Compare every field but data; data compared as bytes from the segments. */
static void
assert_same(const Zest__WriteChunk *ref, const struct rpc_chunk *ch)
{
	const Zest__WriteChunk *got = (const Zest__WriteChunk *)ch->msg;
	size_t off = 0;

	assert_non_null(got);
	assert_int_equal(got->offset, ref->offset);
	assert_int_equal(got->crc32c, ref->crc32c);
	assert_int_equal(got->commit, ref->commit);
	assert_string_equal(got->etag, ref->etag);
	assert_int_equal(got->n_attrs, ref->n_attrs);
	for (size_t i = 0; i < ref->n_attrs; i++) {
		assert_string_equal(got->attrs[i]->name, ref->attrs[i]->name);
		assert_string_equal(got->attrs[i]->value, ref->attrs[i]->value);
	}
	assert_int_equal(!!got->open, !!ref->open);
	if (ref->open) {
		assert_string_equal(got->open->bucket, ref->open->bucket);
		assert_string_equal(got->open->key, ref->open->key);
		assert_int_equal(got->open->size, ref->open->size);
		assert_int_equal(got->open->size_known, ref->open->size_known);
		assert_int_equal(got->open->ec_k, ref->open->ec_k);
		assert_int_equal(got->open->ec_m, ref->open->ec_m);
	}
	assert_int_equal(got->data.len, 0);
	assert_int_equal(ch->data_len, ref->data.len);
	for (size_t i = 0; i < ch->n_segs; i++) {
		assert_true(ch->segs[i].len > 0);
		assert_memory_equal(ch->segs[i].ptr, ref->data.data + off, ch->segs[i].len);
		off += ch->segs[i].len;
	}
	assert_int_equal(off, ref->data.len);
}

/* Parse wire bytes split at cuts[0..n_cuts) (sorted); checks segments point into wire. */
static int
parse_split(const uint8_t *wire, size_t len, const size_t *cuts, size_t n_cuts,
            struct rpc_chunk *ch)
{
	struct zc_seg in[64];
	size_t prev = 0, n = 0;
	int rc;

	for (size_t i = 0; i <= n_cuts; i++) {
		size_t end = i < n_cuts ? cuts[i] : len;

		in[n++] = (struct zc_seg){ wire + prev, end - prev, NULL };
		prev = end;
	}
	rc = rpc_chunk_parse(&zest__write_chunk__descriptor, 3, in, n, ch);
	if (!rc)
		for (size_t i = 0; i < ch->n_segs; i++)
			assert_true(ch->segs[i].ptr >= wire &&
			            ch->segs[i].ptr + ch->segs[i].len <= wire + len);
	return rc;
}

static int
cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

static void
test_random_splits(void **state)
{
	static uint8_t data[300000], wire[310000];
	struct rpc_chunk ch = { 0 };

	(void)state;
	for (int iter = 0; iter < 300; iter++) {
		Zest__WriteChunk wc;
		Zest__WriteOpen open;
		Zest__Attr attrs[3], *pattrs[3];
		char etag[40];
		size_t len = iter % 10 == 0 ? 0 : rnd() % sizeof(data);
		size_t wlen, cuts[63], n_cuts = rnd() % 64;

		make_chunk(&wc, &open, attrs, pattrs, data, len, etag);
		wlen = zest__write_chunk__pack(&wc, wire);
		for (size_t i = 0; i < n_cuts; i++)
			cuts[i] = wlen ? rnd() % (wlen + 1) : 0;
		qsort(cuts, n_cuts, sizeof(cuts[0]), cmp_size);
		assert_int_equal(parse_split(wire, wlen, cuts, n_cuts, &ch), 0);
		assert_same(&wc, &ch);
	}
	rpc_chunk_fini(&ch);
}

/* Every one- and two-cut split of small messages: each boundary pattern once. */
static void
test_every_boundary(void **state)
{
	uint8_t data[40], wire[400];
	struct rpc_chunk ch = { 0 };

	(void)state;
	for (int iter = 0; iter < 6; iter++) {
		Zest__WriteChunk wc;
		Zest__WriteOpen open;
		Zest__Attr attrs[3], *pattrs[3];
		char etag[40];
		size_t wlen;

		make_chunk(&wc, &open, attrs, pattrs, data, iter * 7 % sizeof(data), etag);
		wc.offset = iter & 1 ? 0x7fffffffffffffffull : 300; /* long and short varints */
		wlen = zest__write_chunk__pack(&wc, wire);
		for (size_t a = 0; a <= wlen; a++)
			for (size_t b = a; b <= wlen; b++) {
				size_t cuts[2] = { a, b };

				assert_int_equal(parse_split(wire, wlen, cuts, 2, &ch), 0);
				assert_same(&wc, &ch);
			}
		/* one byte per span */
		{
			size_t cuts[63];
			size_t n = wlen - 1 < 63 ? wlen - 1 : 63;

			for (size_t i = 0; i < n; i++)
				cuts[i] = i + 1;
			assert_int_equal(parse_split(wire, wlen, cuts, n, &ch), 0);
			assert_same(&wc, &ch);
		}
	}
	rpc_chunk_fini(&ch);
}

/* Serialize each field separately, shuffle, add unknown fields; protobuf-c's unpack of
 * the same bytes is the reference. */
static void
test_any_order_unknown_fields(void **state)
{
	static uint8_t data[70000], wire[80000], piece[8][75000];
	struct rpc_chunk ch = { 0 };

	(void)state;
	for (int iter = 0; iter < 200; iter++) {
		Zest__WriteChunk wc, one;
		Zest__WriteOpen open;
		Zest__Attr attrs[3], *pattrs[3];
		size_t plen[8], order[8], n = 0, wlen = 0;
		Zest__WriteChunk *ref;
		char etag[40];

		make_chunk(&wc, &open, attrs, pattrs, data, rnd() % sizeof(data), etag);
		wc.commit = true;
		wc.offset = 1 + (rnd() >> 40);
		/* one piece per field */
		for (int f = 0; f < 6; f++) {
			zest__write_chunk__init(&one);
			switch (f) {
			case 0:
				one.open = wc.open;
				break;
			case 1:
				one.offset = wc.offset;
				break;
			case 2:
				one.data = wc.data;
				break;
			case 3:
				one.crc32c = wc.crc32c;
				break;
			case 4:
				one.commit = wc.commit;
				one.etag = wc.etag;
				break;
			case 5:
				one.attrs = wc.attrs;
				one.n_attrs = wc.n_attrs;
				break;
			}
			plen[n] = zest__write_chunk__pack(&one, piece[n]);
			n++;
		}
		/* unknown fields (WriteChunk uses 1..8): varint, fixed64, length-delimited,
		 * fixed32 */
		{
			uint8_t *p = piece[n];
			size_t k = 0, ul = rnd() % 300;

			p[k++] = (13 << 3) | 0;
			p[k++] = 0xff;
			p[k++] = 0x01;
			p[k++] = (14 << 3) | 1;
			for (int i = 0; i < 8; i++)
				p[k++] = (uint8_t)rnd();
			p[k++] = 0x82; /* field 1000, wire type 2: tag 8002 */
			p[k++] = 0x3e;
			p[k++] = (uint8_t)(ul | 0x80);
			p[k++] = (uint8_t)(ul >> 7);
			for (size_t i = 0; i < ul; i++)
				p[k++] = (uint8_t)rnd();
			p[k++] = (15 << 3) | 5;
			for (int i = 0; i < 4; i++)
				p[k++] = (uint8_t)rnd();
			plen[n++] = k;
		}
		for (size_t i = 0; i < n; i++)
			order[i] = i;
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = rnd() % (i + 1), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
		for (size_t i = 0; i < n; i++) {
			memcpy(wire + wlen, piece[order[i]], plen[order[i]]);
			wlen += plen[order[i]];
		}
		ref = zest__write_chunk__unpack(NULL, wlen, wire);
		assert_non_null(ref);
		{
			size_t cuts[16], n_cuts = rnd() % 17;

			for (size_t i = 0; i < n_cuts; i++)
				cuts[i] = rnd() % (wlen + 1);
			qsort(cuts, n_cuts, sizeof(cuts[0]), cmp_size);
			assert_int_equal(parse_split(wire, wlen, cuts, n_cuts, &ch), 0);
		}
		assert_same(ref, &ch);
		zest__write_chunk__free_unpacked(ref, NULL);
	}
	rpc_chunk_fini(&ch);
}

/* A repeated data field: the last occurrence wins, as protobuf-c does. */
static void
test_duplicate_data_last_wins(void **state)
{
	uint8_t wire[64];
	size_t k = 0;
	Zest__WriteChunk *ref;
	struct rpc_chunk ch = { 0 };

	(void)state;
	wire[k++] = 0x1a;
	wire[k++] = 3;
	memcpy(wire + k, "abc", 3);
	k += 3;
	wire[k++] = 0x10;
	wire[k++] = 7;
	wire[k++] = 0x1a;
	wire[k++] = 2;
	memcpy(wire + k, "xy", 2);
	k += 2;
	ref = zest__write_chunk__unpack(NULL, k, wire);
	assert_non_null(ref);
	assert_int_equal(parse_split(wire, k, NULL, 0, &ch), 0);
	assert_same(ref, &ch);
	zest__write_chunk__free_unpacked(ref, NULL);
	rpc_chunk_fini(&ch);
}

struct bad_case {
	const char *name;
	uint8_t bytes[16];
	size_t len;
	const char *want;
};

static const struct bad_case bad_cases[] = {
	{ "truncated tag varint", { 0x80 }, 1, "truncated varint (tag)" },
	{ "truncated value varint", { 0x10, 0x80, 0x80 }, 3, "truncated varint (value)" },
	{ "truncated length", { 0x1a, 0xff }, 2, "truncated varint (length)" },
	{ "length past end", { 0x1a, 0x05, 'a', 'b' }, 4, "length 5 past the end (2 bytes left)" },
	{ "huge length", { 0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a' }, 7, "past the end" },
	{ "data as varint", { 0x18, 0x01 }, 2, "field 3 (data): wire type 0, want 2" },
	{ "offset as fixed32", { 0x15, 1, 2, 3, 4 }, 5, "field 2 (offset): wire type 5, want 0" },
	{ "crc as varint", { 0x20, 0x01 }, 2, "field 4 (crc32c): wire type 0, want 5" },
	{ "field zero", { 0x00, 0x01 }, 2, "bad field number 0" },
	{ "overlong tag",
	  { 0x80, 0x80, 0x80, 0x84, 0x80, 0x00, 0x01 },
	  7,
	  "tag longer than 5 bytes at byte 0" },
	{ "overlong length",
	  { 0x92, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 },
	  8,
	  "field 258: length prefix longer than 5 bytes" }, /* found by fuzz_rpc_recv */
	{ "length over 4 GiB",
	  { 0x1a, 0x80, 0x80, 0x80, 0x80, 0x10 },
	  6,
	  "field 3: length prefix longer than 5 bytes or over 4 GiB" },
	{ "group start", { 0x0b }, 1, "unsupported wire type 3" },
	{ "wire type 7", { 0x0f }, 1, "unsupported wire type 7" },
	{ "truncated fixed32", { 0x25, 0x01, 0x02 }, 3, "field 4: truncated fixed32" },
	{ "truncated fixed64", { 0x49, 1, 2, 3 }, 4, "field 9: truncated fixed64" },
	{ "varint too long",
	  { 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 },
	  12,
	  "longer than 10 bytes" },
	{ "varint overflow",
	  { 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f },
	  11,
	  "overflows 64 bits" },
	{ "malformed open", { 0x0a, 0x02, 0x08, 0x80 }, 4, "malformed nested field" },
	{ "open with bad length", { 0x0a, 0x03, 0x0a, 0x09, 'x' }, 5, "malformed nested field" },
};

static void
test_bad_input_table(void **state)
{
	struct rpc_chunk ch = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *b = &bad_cases[i];

		/* whole, and split after every byte */
		for (size_t cut = 0; cut <= b->len; cut++) {
			int rc = parse_split(b->bytes, b->len, &cut, 1, &ch);

			if (rc != -EINVAL || !strstr(ch.err, b->want))
				fail_msg("case '%s' cut %zu: rc %d err '%s', want '%s'", b->name,
				         cut, rc, ch.err, b->want);
		}
	}
	rpc_chunk_fini(&ch);
}

/* Build a gRPC byte buffer of wire split into ~chunk-byte slices. */
static grpc_byte_buffer *
make_bb(const uint8_t *wire, size_t len, size_t chunk, grpc_slice *first)
{
	grpc_slice s[256];
	size_t n = 0;
	grpc_byte_buffer *bb;

	for (size_t off = 0; off < len || n == 0; off += chunk) {
		size_t l = len - off < chunk ? len - off : chunk;

		s[n++] = grpc_slice_from_copied_buffer((const char *)wire + off, l);
	}
	bb = grpc_raw_byte_buffer_create(s, n);
	if (first)
		*first = s[0];
	for (size_t i = 0; i < n; i++)
		grpc_slice_unref(s[i]);
	return bb;
}

static void
test_marshal_recv_modes(void **state)
{
	static uint8_t data[1 << 20], wire[(1 << 20) + 100];
	struct rpc_chunk ch = { 0 };

	(void)state;
	grpc_init();
	for (int mode = 0; mode < 2; mode++) {
		struct rpc_stats before, after;
		Zest__WriteChunk wc;
		Zest__WriteOpen open;
		Zest__Attr attrs[3], *pattrs[3];
		struct zc_ref *hold;
		char etag[40];
		size_t wlen;
		grpc_byte_buffer *bb;

		make_chunk(&wc, &open, attrs, pattrs, data, sizeof(data) - 12345, etag);
		wlen = zest__write_chunk__pack(&wc, wire);
		bb = make_bb(wire, wlen, 65536, NULL);
		rpc_stats_get(&before);
		assert_int_equal(rpc_marshal_recv(mode ? RPC_MARSHAL_COPY : RPC_MARSHAL_ZEROCOPY,
		                                  &zest__write_chunk__descriptor, 3, bb, &ch,
		                                  &hold),
		                 0);
		rpc_stats_get(&after);
		assert_same(&wc, &ch);
		assert_non_null(hold);
		assert_int_equal(rpc_live_buffers(), 1);
		for (size_t i = 0; i < ch.n_segs; i++)
			assert_ptr_equal(ch.segs[i].ref, hold);
		if (mode) {
			assert_int_equal(ch.n_segs, 1);
			assert_int_equal((uintptr_t)ch.segs[0].ptr % 4096, 0);
			for (int s = 0; s < RPC_STAGE_COUNT; s++)
				assert_int_equal(after.copied_bytes[s] - before.copied_bytes[s],
				                 wc.data.len);
		} else {
			assert_true(ch.n_segs >= wc.data.len / 65536);
			for (int s = 0; s < RPC_STAGE_COUNT; s++)
				assert_int_equal(after.copied_bytes[s], before.copied_bytes[s]);
		}
		/* a handler keeps a ref past the marshaller's */
		zc_ref_get(hold);
		rpc_chunk_clear(&ch);
		zc_ref_put(hold);
		assert_int_equal(rpc_live_buffers(), 1);
		zc_ref_put(hold);
		assert_int_equal(rpc_live_buffers(), 0);
		assert_int_equal(zc_ref_live(), 0);
	}
	/* bad input in copy mode names the problem too */
	{
		static const uint8_t bad[] = { 0x1a, 0x05, 'a' };
		struct zc_ref *hold;
		grpc_byte_buffer *bb = make_bb(bad, sizeof(bad), 2, NULL);

		assert_int_equal(rpc_marshal_recv(RPC_MARSHAL_COPY, &zest__write_chunk__descriptor,
		                                  3, bb, &ch, &hold),
		                 -EINVAL);
		assert_null(hold);
		assert_non_null(strstr(ch.err, "past the end"));
		bb = make_bb(bad, sizeof(bad), 2, NULL);
		assert_int_equal(rpc_marshal_recv(RPC_MARSHAL_ZEROCOPY,
		                                  &zest__write_chunk__descriptor, 3, bb, &ch,
		                                  &hold),
		                 -EINVAL);
		assert_null(hold);
		assert_int_equal(rpc_live_buffers(), 0);
	}
	rpc_chunk_fini(&ch);
	grpc_shutdown();
}

/*
 * protobuf-c gives a string field as a C string: a NUL inside would cut it short without a
 * word ("a\0b" arrives as "a"). Both marshallers and the unary unpack refuse it, naming the
 * field; a NUL in the data (bytes) is payload like any other byte.
 */
static void
test_string_nul(void **state)
{
	/* WriteChunk{ open{ bucket "bkt", key "a\0b" }, data "x\0y" } */
	static const uint8_t nul_key[] = { 0x0a, 0x0a, 0x0a, 0x03, 'b',  'k', 't',  0x12, 0x03,
		                           'a',  0x00, 'b',  0x1a, 0x03, 'x', 0x00, 'y' };
	/* the same with key "ab": the NUL in data only */
	static const uint8_t nul_data[] = { 0x0a, 0x09, 0x0a, 0x03, 'b',  'k', 't',  0x12,
		                            0x02, 'a',  'b',  0x1a, 0x03, 'x', 0x00, 'y' };
	/* WriteChunk{ commit, attrs [{ name "n", value "v\0" }] } */
	static const uint8_t nul_attr[] = { 0x28, 0x01, 0x3a, 0x07, 0x0a, 0x01,
		                            'n',  0x12, 0x02, 'v',  0x00 };
	/* ComposeRequest{ bucket "bkt", key "k", parts [{ key "p\0" }] } */
	static const uint8_t nul_part[] = { 0x0a, 0x03, 'b',  'k',  't',  0x12, 0x01,
		                            'k',  0x1a, 0x04, 0x12, 0x02, 'p',  0x00 };
	static const uint8_t part_ok[] = { 0x0a, 0x03, 'b',  'k',  't',  0x12, 0x01,
		                           'k',  0x1a, 0x04, 0x12, 0x02, 'p',  'q' };
	struct rpc_chunk ch = { 0 };
	struct zc_seg one;
	char err[128];

	(void)state;
	grpc_init();
	one = (struct zc_seg){ nul_key, sizeof(nul_key), NULL };
	assert_int_equal(rpc_chunk_parse(&zest__write_chunk__descriptor, 3, &one, 1, &ch), -EINVAL);
	assert_string_equal(ch.err, "WriteOpen.key contains NUL");
	assert_null(ch.msg);
	one = (struct zc_seg){ nul_attr, sizeof(nul_attr), NULL };
	assert_int_equal(rpc_chunk_parse(&zest__write_chunk__descriptor, 3, &one, 1, &ch), -EINVAL);
	assert_string_equal(ch.err, "Attr.value contains NUL");
	one = (struct zc_seg){ nul_data, sizeof(nul_data), NULL };
	assert_int_equal(rpc_chunk_parse(&zest__write_chunk__descriptor, 3, &one, 1, &ch), 0);
	assert_string_equal(((Zest__WriteChunk *)ch.msg)->open->key, "ab");
	assert_int_equal(ch.data_len, 3);
	for (int mode = 0; mode < 2; mode++) {
		enum rpc_marshaller mm = mode ? RPC_MARSHAL_COPY : RPC_MARSHAL_ZEROCOPY;
		struct zc_ref *hold;

		assert_int_equal(rpc_marshal_recv(mm, &zest__write_chunk__descriptor, 3,
		                                  make_bb(nul_key, sizeof(nul_key), 5, NULL), &ch,
		                                  &hold),
		                 -EINVAL);
		assert_null(hold);
		assert_string_equal(ch.err, "WriteOpen.key contains NUL");
		assert_int_equal(rpc_marshal_recv(mm, &zest__write_chunk__descriptor, 3,
		                                  make_bb(nul_data, sizeof(nul_data), 5, NULL), &ch,
		                                  &hold),
		                 0);
		assert_int_equal(ch.data_len, 3);
		rpc_chunk_clear(&ch);
		zc_ref_put(hold);
		assert_int_equal(rpc_live_buffers(), 0);
	}
	/* nested twice, through the unary unpack */
	assert_int_equal(rpc_wire_strings_check(&zest__compose_request__descriptor, nul_part,
	                                        sizeof(nul_part), err, sizeof(err)),
	                 -EINVAL);
	assert_string_equal(err, "ObjectRequest.key contains NUL");
	{
		grpc_byte_buffer *bb = make_bb(nul_part, sizeof(nul_part), 4, NULL);

		err[0] = 0;
		assert_null(rpc_unpack_message_err(&zest__compose_request__descriptor, bb, err,
		                                   sizeof(err)));
		assert_string_equal(err, "ObjectRequest.key contains NUL");
		assert_null(rpc_unpack_message(&zest__compose_request__descriptor, bb));
		grpc_byte_buffer_destroy(bb);
	}
	assert_int_equal(rpc_wire_strings_check(&zest__compose_request__descriptor, part_ok,
	                                        sizeof(part_ok), err, sizeof(err)),
	                 0);
	assert_int_equal(rpc_wire_strings_check(&zest__compose_request__descriptor, part_ok,
	                                        sizeof(part_ok) - 1, err, sizeof(err)),
	                 -EINVAL);
	assert_string_equal(err, "malformed ComposeRequest");
	rpc_chunk_fini(&ch);
	grpc_shutdown();
}

struct test_owner {
	struct zc_ref ref;
	int released;
};

static void
owner_release(struct zc_ref *ref)
{
	((struct test_owner *)ref)->released++;
}

static void
test_marshal_send_zero_copy(void **state)
{
	static uint8_t a[100000], b[7];
	struct test_owner own;
	Zest__WriteChunk wc = ZEST__WRITE_CHUNK__INIT, *back;
	Zest__WriteOpen open = ZEST__WRITE_OPEN__INIT;
	struct zc_seg segs[3];
	grpc_byte_buffer_reader rd;
	grpc_byte_buffer *bb;
	grpc_slice *s, all;
	int n = 0, hits = 0;

	(void)state;
	grpc_init();
	fill(a, sizeof(a));
	fill(b, sizeof(b));
	zc_ref_init(&own.ref, owner_release);
	own.released = 0;
	segs[0] = (struct zc_seg){ a, sizeof(a), &own.ref };
	segs[1] = (struct zc_seg){ b, sizeof(b), NULL };
	segs[2] = (struct zc_seg){ a, 0, &own.ref };
	open.bucket = "b";
	open.key = "k";
	wc.open = &open;
	wc.offset = 1234567;
	wc.commit = true;
	wc.crc32c = zc_crc32c(zc_crc32c(0, a, sizeof(a)), b, sizeof(b));
	bb = rpc_marshal_send(&wc.base, 3, segs, 3, sizeof(a) + sizeof(b));
	assert_non_null(bb);
	assert_int_equal(zc_ref_live(), 2); /* ours + the wire's */
	/* the payload slices are the caller's memory itself */
	grpc_byte_buffer_reader_init(&rd, bb);
	while (grpc_byte_buffer_reader_peek(&rd, &s)) {
		hits += GRPC_SLICE_START_PTR(*s) == a || GRPC_SLICE_START_PTR(*s) == b;
		n++;
	}
	grpc_byte_buffer_reader_destroy(&rd);
	assert_int_equal(n, 3);
	assert_int_equal(hits, 2);
	grpc_byte_buffer_reader_init(&rd, bb);
	all = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	back = zest__write_chunk__unpack(NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
	assert_non_null(back);
	assert_int_equal(back->data.len, sizeof(a) + sizeof(b));
	assert_memory_equal(back->data.data, a, sizeof(a));
	assert_memory_equal(back->data.data + sizeof(a), b, sizeof(b));
	assert_int_equal(back->offset, 1234567);
	assert_string_equal(back->open->key, "k");
	assert_int_equal(back->crc32c, wc.crc32c);
	zest__write_chunk__free_unpacked(back, NULL);
	grpc_slice_unref(all);
	grpc_byte_buffer_destroy(bb);
	assert_int_equal(own.released, 0);
	zc_ref_put(&own.ref);
	assert_int_equal(own.released, 1);
	assert_int_equal(zc_ref_live(), 0);
	grpc_shutdown();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_splits),
		cmocka_unit_test(test_every_boundary),
		cmocka_unit_test(test_any_order_unknown_fields),
		cmocka_unit_test(test_duplicate_data_last_wins),
		cmocka_unit_test(test_bad_input_table),
		cmocka_unit_test(test_marshal_recv_modes),
		cmocka_unit_test(test_string_nul),
		cmocka_unit_test(test_marshal_send_zero_copy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
