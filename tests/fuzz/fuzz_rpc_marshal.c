/*
 * libFuzzer target for the zero-copy chunk parser (rpc_chunk_parse).
 *
 * Input: byte 0 seeds how the rest is split into spans (like gRPC's receive slices),
 * byte 1 picks WriteChunk or ReadChunk; the rest is the message. Checks: the parser
 * never reads outside the spans (ASan), its segments lie inside the input and add up to
 * data_len, and when protobuf-c's own unpack of the same bytes succeeds too, the data
 * bytes and scalar fields agree.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_msg.h" /* the chunk parser: rpc-internal */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t
next(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rpc_chunk ch;
	const ProtobufCMessageDescriptor *desc;
	struct zc_seg in[32];
	ProtobufCMessage *ref;
	uint32_t seed;
	size_t n = 0, off = 0;
	const uint8_t *msg;
	int rc;

	if (size < 2)
		return 0;
	seed = data[0] * 2654435761u + 1;
	desc = data[1] & 1 ? &zest__read_chunk__descriptor : &zest__write_chunk__descriptor;
	msg = data + 2;
	size -= 2;
	/* Copy each span to its own heap block so ASan sees any read past a span. */
	while (off < size && n < 31) {
		size_t len = data[0] & 0x80 ? next(&seed) % 9 : next(&seed) % (size + 1);
		uint8_t *p;

		if (len > size - off)
			len = size - off;
		p = malloc(len ? len : 1);
		if (!p)
			abort();
		memcpy(p, msg + off, len);
		in[n++] = (struct zc_seg){ p, len, NULL };
		off += len;
	}
	if (off < size) {
		uint8_t *p = malloc(size - off);

		if (!p)
			abort();
		memcpy(p, msg + off, size - off);
		in[n++] = (struct zc_seg){ p, size - off, NULL };
	}
	rc = rpc_chunk_parse(desc, 3, in, n, &ch);
	ref = protobuf_c_message_unpack(desc, NULL, size, msg);
	if (!rc) {
		const ProtobufCBinaryData *want = NULL;
		size_t total = 0, pos = 0;

		for (size_t i = 0; i < ch.n_segs; i++) {
			int inside = 0;

			for (size_t k = 0; k < n; k++)
				inside |= ch.segs[i].ptr >= in[k].ptr &&
				          ch.segs[i].ptr + ch.segs[i].len <= in[k].ptr + in[k].len;
			if (!inside)
				abort();
			total += ch.segs[i].len;
		}
		if (total != ch.data_len)
			abort();
		if (ref) {
			if (desc == &zest__write_chunk__descriptor) {
				want = &((Zest__WriteChunk *)ref)->data;
				if (((Zest__WriteChunk *)ref)->offset !=
				    ((Zest__WriteChunk *)ch.msg)->offset)
					abort();
			} else {
				want = &((Zest__ReadChunk *)ref)->data;
			}
			if (want->len != total)
				abort();
			for (size_t i = 0; i < ch.n_segs; i++) {
				if (memcmp(want->data + pos, ch.segs[i].ptr, ch.segs[i].len))
					abort();
				pos += ch.segs[i].len;
			}
		}
	}
	if (ref)
		protobuf_c_message_free_unpacked(ref, NULL);
	rpc_chunk_clear(&ch);
	for (size_t i = 0; i < n; i++)
		free((void *)in[i].ptr);
	return 0;
}
