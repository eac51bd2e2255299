/*
 * rpc_wire_str: a string field must not hold a NUL byte.
 *
 * protobuf-c hands a string field over as a NUL-terminated char * and drops its wire
 * length, so "a\0b" reaches a handler as "a": the datanode stored such a key truncated.
 * Only the wire bytes still say how long the string was. After protobuf-c accepted a
 * message, this walks the same bytes once more by its descriptor (nested messages
 * included) and refuses any string field with a NUL, so no handler (server) and no
 * caller (client) ever sees a C string shorter than what was sent. Metadata bytes only:
 * the payload (`data`) is a bytes field and is never looked at.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rpc_internal.h"

#define NEST_MAX 8 /* our messages nest 2 deep (WriteChunk.open, ComposeRequest.parts) */

static int
varint(const uint8_t *p, size_t n, size_t *at, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned shift = 0; shift < 64 && *at < n; shift += 7) {
		uint8_t b = p[(*at)++];

		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -EINVAL;
}

static int
walk(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n, unsigned depth, char *err,
     size_t cap)
{
	size_t at = 0;

	while (at < n) {
		const ProtobufCFieldDescriptor *f;
		uint64_t tag, len;

		if (varint(p, n, &at, &tag))
			goto malformed;
		switch (tag & 7) {
		case 0:
			if (varint(p, n, &at, &len))
				goto malformed;
			continue;
		case 1:
		case 5:
			len = (tag & 7) == 1 ? 8 : 4;
			if (len > n - at)
				goto malformed;
			at += len;
			continue;
		case 2:
			if (varint(p, n, &at, &len) || len > n - at)
				goto malformed;
			break;
		default:
			goto malformed; /* groups: none of our messages has them */
		}
		f = tag >> 3 <= UINT32_MAX
		            ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3))
		            : NULL;
		if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p + at, '\0', len)) {
			if (err)
				snprintf(err, cap, "%s.%s contains NUL", desc->short_name, f->name);
			return -EINVAL;
		}
		if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
			int rc;

			if (depth == NEST_MAX)
				goto malformed;
			rc = walk(f->descriptor, p + at, (size_t)len, depth + 1, err, cap);
			if (rc)
				return rc;
		}
		at += (size_t)len;
	}
	return 0;
malformed:
	if (err)
		snprintf(err, cap, "malformed %s", desc->short_name);
	return -EINVAL;
}

int
rpc_wire_strings_check(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n,
                       char *err, size_t cap)
{
	return walk(desc, p, n, 0, err, cap);
}
