/* rpc private: counters, byte-buffer holders and the send-side packer. */
#ifndef ZEST_RPC_INTERNAL_H
#define ZEST_RPC_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>

#include <grpc/grpc.h>
#include <grpc/byte_buffer.h>

#include "rpc_chan.h"
#include "rpc_stats.h"
#include "rpc_msg.h"
#include "rpc_status_internal.h"
#include "rpc_tls_internal.h"

extern atomic_ullong rpc_stat_received;
extern atomic_ullong rpc_stat_copied[RPC_STAGE_COUNT];
extern atomic_ullong rpc_stat_messages;
extern atomic_long rpc_stat_live_buffers;

static inline void
rpc_count_copy(enum rpc_copy_stage stage, size_t n)
{
	atomic_fetch_add_explicit(&rpc_stat_copied[stage], n, memory_order_relaxed);
}

/*
 * Parse a received message (takes ownership of bb, destroyed when the last segment ref
 * is put). Zero-copy: segments point into bb's slices and carry one shared holder ref.
 * Copy: gather, protobuf-c unpack, copy into one 4096-aligned buffer. On success the
 * chunk's segments carry `*hold`, one reference the caller must zc_ref_put after the
 * callback. Returns 0 or -EINVAL (chunk->err says why); on error *hold is NULL and bb
 * is freed.
 */
int rpc_marshal_recv(enum rpc_marshaller mode, const ProtobufCMessageDescriptor *desc,
                     unsigned data_field, grpc_byte_buffer *bb, struct rpc_chunk *chunk,
                     struct zc_ref **hold);

/*
 * Build a byte buffer for msg (whose data field is empty) followed by data segs sent
 * without a copy: [packed msg + data tag/len][one slice per seg]. Each seg's ref is
 * taken and put when gRPC releases the slice. Returns NULL on ENOMEM.
 */
grpc_byte_buffer *rpc_marshal_send(const ProtobufCMessage *msg, unsigned data_field,
                                   const struct zc_seg *segs, size_t n_segs, size_t data_len);

/* Pack a whole protobuf-c message into a new byte buffer (metadata; a copy). */
grpc_byte_buffer *rpc_pack_message(const ProtobufCMessage *msg);

/* Unpack a small message (gathers; used for requests and results). NULL on error,
 * including a string field that holds a NUL (rpc_wire_strings_check). */
ProtobufCMessage *rpc_unpack_message(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb);
/* The same, saying why in err (cap bytes; NULL: not said) when it returns NULL. */
ProtobufCMessage *rpc_unpack_message_err(const ProtobufCMessageDescriptor *desc,
                                         grpc_byte_buffer *bb, char *err, size_t cap);

/*
 * Refuse a string field holding a NUL byte in the n wire bytes of a message of type desc
 * that protobuf-c accepted (it would hand the handler the string cut at the NUL; nested
 * messages are walked too). Returns 0, or -EINVAL with err ("WriteOpen.key contains NUL",
 * or "malformed X"; err may be NULL). rpc_wire_str.c.
 */
int rpc_wire_strings_check(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n,
                           char *err, size_t cap);

/*
 * A status message for people: zc_code_word of err's code, ": ", and the formatted text
 * (fmt NULL or "": strerror). err 0 gives "". The code itself travels in RPC_ERR_KEY.
 */
void rpc_format_status(char *out, size_t cap, int err, const char *fmt, va_list ap);
void rpc_format_status_l(char *out, size_t cap, int err, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void rpc_format_status_str(char *out, size_t cap, int err, const char *text);

/* Read the peer / status detail slice into a C string. */
/* "zerocopy" / "copy" -> enum; returns 0 or -EINVAL (the sink server's flag). */
int rpc_marshaller_parse(const char *name, enum rpc_marshaller *out);

void rpc_slice_to_str(grpc_slice s, char *out, size_t cap);

#endif
