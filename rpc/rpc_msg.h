/*
 * rpc private: the wire side of rpc.h's messages. The protobuf-c types (zest.pb-c.h)
 * stop here: the marshaller's parse API, the method descriptors and the conversions
 * between rpc.h's structs and protobuf-c's. Included by rpc/ and by the tests and
 * fuzzers of the marshaller, never by another module.
 *
 * Conversions touch metadata only: strings are pointed to, never copied; arrays of
 * structs are built in a struct rpc_arena. Converting to protobuf-c gives a message
 * that borrows the rpc.h struct's strings (protobuf-c's char * fields are never
 * written through); converting from protobuf-c gives structs that borrow the message.
 */
#ifndef ZEST_RPC_MSG_H
#define ZEST_RPC_MSG_H

#include <grpc/byte_buffer.h>

#include "rpc.h"
#include "zest.pb-c.h"

/* ------------------------------------------------------------------ chunk parser */

/*
 * One parsed chunk message. `msg` holds every field except `data` (unpacked by
 * protobuf-c; its data field is empty); the data are segs[0..n_segs), data_len bytes in
 * all. Segment refs are borrowed from the parsed input (see rpc_chunk_parse).
 */
struct rpc_chunk {
	ProtobufCMessage *msg; /* Zest__WriteChunk or Zest__ReadChunk */
	struct zc_seg *segs;
	size_t n_segs, cap_segs;
	size_t data_len;
	char err[160]; /* why parsing failed, for the status message */
	/* scratch reused between messages: gathered non-data fields, input spans */
	uint8_t *meta;
	size_t meta_cap;
	struct zc_seg *in;
	size_t in_cap;
};

/*
 * Parse one protobuf message of type `desc` whose bytes lie in in[0..n_in) (any split,
 * any alignment), without gathering field `data_field` (a bytes field): its value comes
 * back as segments into the input, each carrying the input span's ref (no ref taken).
 * Other known fields are gathered (metadata only, at most RPC_MAX_META bytes) and
 * unpacked by protobuf-c; unknown fields are skipped. Reuses chunk->segs.
 * Returns 0, or -EINVAL with chunk->err naming the problem (truncated varint, length
 * past the end, wrong wire type, bad field number, malformed nested field).
 */
int rpc_chunk_parse(const ProtobufCMessageDescriptor *desc, unsigned data_field,
                    const struct zc_seg *in, size_t n_in, struct rpc_chunk *chunk);

/* Free chunk->msg (keeps the segs array for reuse). */
void rpc_chunk_clear(struct rpc_chunk *chunk);

/* Free everything a chunk holds. */
void rpc_chunk_fini(struct rpc_chunk *chunk);

/* Request and response types of a method. */
const ProtobufCMessageDescriptor *rpc_method_request(enum rpc_method m);
const ProtobufCMessageDescriptor *rpc_method_response(enum rpc_method m);

/* ------------------------------------------------------------------ arena */

/* Blocks freed together; also a protobuf-c allocator (its free is a no-op). */
struct rpc_arena {
	struct rpc_arena_blk *head;
};

/* n zeroed bytes aligned for any type, or NULL (ENOMEM). */
void *rpc_arena_alloc(struct rpc_arena *a, size_t n);
/* Free every block; the arena is empty (and reusable) afterwards. */
void rpc_arena_free(struct rpc_arena *a);
/* Unpack a message with every allocation in a (freed by rpc_arena_free, never by
 * protobuf_c_message_free_unpacked). Gathers bb; NULL when bb is NULL or malformed,
 * including a string field that holds a NUL (rpc_wire_strings_check), saying why in err
 * (cap bytes; err NULL: not said). */
ProtobufCMessage *rpc_arena_unpack(struct rpc_arena *a, const ProtobufCMessageDescriptor *desc,
                                   grpc_byte_buffer *bb, char *err, size_t cap);

/* ------------------------------------------------------------------ streams */

/* An attribute array either way (n == 0: NULL, 0). 0 or -ENOMEM. */
int rpc_msg_attrs_to_pb(const struct rpc_attr *in, size_t n, Zest__Attr ***out, size_t *n_out,
                        struct rpc_arena *a);
int rpc_msg_attrs_from_pb(Zest__Attr *const *in, size_t n, const struct rpc_attr **out,
                          size_t *n_out, struct rpc_arena *a);

void rpc_msg_open_to_pb(const struct rpc_write_open *in, Zest__WriteOpen *out);
void rpc_msg_open_from_pb(const Zest__WriteOpen *in, struct rpc_write_open *out);
/* Set wc's etag, attrs and cond (into *cond) from in (NULL: none). 0 or -ENOMEM. */
int rpc_msg_commit_to_pb(const struct rpc_commit *in, Zest__WriteChunk *wc,
                         Zest__WriteCondition *cond, struct rpc_arena *a);
/* The commit fields of wc; out->cond points to *cond when wc has one. 0 or -ENOMEM. */
int rpc_msg_commit_from_pb(const Zest__WriteChunk *wc, struct rpc_commit *out,
                           struct rpc_write_cond *cond, struct rpc_arena *a);
void rpc_msg_result_to_pb(const struct rpc_write_result *in, Zest__WriteResult *out);
void rpc_msg_result_from_pb(const Zest__WriteResult *in, struct rpc_write_result *out);
void rpc_msg_read_req_to_pb(const struct rpc_read_req *in, Zest__ReadRequest *out);
void rpc_msg_read_req_from_pb(const Zest__ReadRequest *in, struct rpc_read_req *out);
int rpc_msg_info_to_pb(const struct rpc_object_info *in, Zest__ObjectInfo *out,
                       struct rpc_arena *a);
int rpc_msg_info_from_pb(const Zest__ObjectInfo *in, struct rpc_object_info *out,
                         struct rpc_arena *a);

/* ------------------------------------------------------------------ cells (rpc_msg_cell.c) */

void rpc_msg_cell_id_to_pb(const struct rpc_cell_id *in, Zest__CellId *out);
/* in NULL (the field absent): all zero. */
void rpc_msg_cell_id_from_pb(const Zest__CellId *in, struct rpc_cell_id *out);
/* out->id points to *id. */
void rpc_msg_cell_open_to_pb(const struct rpc_cell_open *in, Zest__CellOpen *out, Zest__CellId *id);
void rpc_msg_cell_open_from_pb(const Zest__CellOpen *in, struct rpc_cell_open *out);
void rpc_msg_cell_read_req_to_pb(const struct rpc_cell_read_req *in, Zest__CellReadRequest *out,
                                 Zest__CellId *id);
void rpc_msg_cell_read_req_from_pb(const Zest__CellReadRequest *in, struct rpc_cell_read_req *out);
/* The list either way, arrays in a. 0 or -ENOMEM. */
int rpc_msg_cells_req_to_pb(const struct rpc_cells_req *in, Zest__CellsRequest *out,
                            struct rpc_arena *a);
int rpc_msg_cells_req_from_pb(const Zest__CellsRequest *in, struct rpc_cells_req *out,
                              struct rpc_arena *a);

/* ------------------------------------------------------------------ unary */

/* Pack method m's request (NULL for ListBuckets). NULL on ENOMEM. */
grpc_byte_buffer *rpc_msg_pack_req(enum rpc_method m, const union rpc_unary_req *req);
/* Unpack m's request from bb (not consumed) into out, all memory in a. Returns 0,
 * -EINVAL (missing or malformed; why in err, cap bytes, when known) or -ENOMEM. */
int rpc_msg_unpack_req(enum rpc_method m, grpc_byte_buffer *bb, union rpc_unary_req *out,
                       struct rpc_arena *a, char *err, size_t cap);
/* Pack m's response; resp is the rpc.h struct of m's response type (NULL for
 * DeleteBucket). NULL on ENOMEM. */
grpc_byte_buffer *rpc_msg_pack_resp(enum rpc_method m, const void *resp);
/* Unpack m's response from bb (not consumed) into out (which owns the memory after).
 * Returns 0, -EINVAL (missing or malformed) or -ENOMEM; on error out is zeroed. */
int rpc_msg_unpack_resp(enum rpc_method m, grpc_byte_buffer *bb, struct rpc_unary_resp *out);

#endif
