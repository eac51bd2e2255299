/*
 * libFuzzer target for rpc_marshal_recv, the path a received gRPC byte buffer takes:
 * byte 0 seeds how the message is cut into slices, byte 1 picks the marshaller
 * (bit 0: copy) and the message type (bit 1: ReadChunk). Checks that both marshallers
 * agree on success and on the data bytes, and that every holder is released.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>

#include "rpc.h"
#include "rpc_stats.h"
#include "rpc_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static grpc_byte_buffer *
make_bb(const uint8_t *msg, size_t size, uint32_t seed)
{
	grpc_slice s[64];
	size_t n = 0, off = 0;
	grpc_byte_buffer *bb;

	while (off < size && n < 63) {
		size_t len;

		seed ^= seed << 13;
		seed ^= seed >> 17;
		seed ^= seed << 5;
		len = seed % (size - off + 1);
		s[n++] = grpc_slice_from_copied_buffer((const char *)msg + off, len);
		off += len;
	}
	s[n++] = grpc_slice_from_copied_buffer((const char *)msg + off, size - off);
	bb = grpc_raw_byte_buffer_create(s, n);
	for (size_t i = 0; i < n; i++)
		grpc_slice_unref(s[i]);
	return bb;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool inited;
	struct rpc_chunk a = { 0 }, b = { 0 };
	const ProtobufCMessageDescriptor *desc;
	struct zc_ref *ha, *hb;
	uint32_t seed;
	int ra, rb;

	if (!inited) {
		grpc_init();
		inited = true;
	}
	if (size < 2)
		return 0;
	seed = data[0] * 2654435761u + 7;
	desc = data[1] & 2 ? &zest__read_chunk__descriptor : &zest__write_chunk__descriptor;
	ra = rpc_marshal_recv(RPC_MARSHAL_ZEROCOPY, desc, 3, make_bb(data + 2, size - 2, seed), &a,
	                      &ha);
	rb = rpc_marshal_recv(RPC_MARSHAL_COPY, desc, 3, make_bb(data + 2, size - 2, seed), &b,
	                      &hb);
	/* protobuf-c accepts a few inputs our parser names as bad (e.g. groups), never the
	 * reverse: whatever the zero-copy parser accepts, the copy path accepts too */
	if (!ra && rb)
		abort();
	if (!ra && !rb) {
		size_t pos = 0;

		if (a.data_len != b.data_len || (b.n_segs && b.segs[0].len != b.data_len))
			abort();
		for (size_t i = 0; i < a.n_segs; i++) {
			if (memcmp(a.segs[i].ptr, b.segs[0].ptr + pos, a.segs[i].len))
				abort();
			pos += a.segs[i].len;
		}
	}
	rpc_chunk_fini(&a);
	rpc_chunk_fini(&b);
	if (ha)
		zc_ref_put(ha);
	if (hb)
		zc_ref_put(hb);
	if (rpc_live_buffers() != 0)
		abort();
	return 0;
}
