/*
 * dn_rpc_names: the names every call brings, checked before the store sees them.
 *
 * The gateway checks what its clients name, but the datanode's gRPC port takes calls from
 * anyone who reaches it, and a name the store took cannot be taken back cheaply (a bucket
 * named with invalid UTF-8 spoilt every client's ListBuckets XML). So the datanode keeps
 * the same rules (common/zc_names.h), plus the gateway's reserved bucket, and refuses
 * anything else with INVALID_ARGUMENT (ZC_INVALID) and a message saying which name and
 * why, before any state is touched. A NUL inside a string never gets this far: the rpc
 * layer refuses it at unpack time (rpc_wire_str.c), where the wire length is still known.
 */
#include <stdio.h>
#include <string.h>

#include "dn_rpc_internal.h"
#include "zc_names.h"

#define SHOWN_MAX 48 /* bytes of a refused name shown in the message */

/* name for a message: printable ASCII as is, other bytes as \xNN, cut after SHOWN_MAX. */
static void
shown(const char *name, char *out, size_t cap)
{
	size_t n = strlen(name), o = 0;

	for (size_t i = 0; i < n && i < SHOWN_MAX && o + 5 < cap; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
	}
	if (n > SHOWN_MAX && o + 4 < cap)
		o += (size_t)snprintf(out + o, cap - o, "...");
	out[o] = '\0';
}

static int
refuse(char *msg, size_t cap, const char *what, const char *name, const char *why)
{
	char s[4 * SHOWN_MAX + 8];

	shown(name, s, sizeof(s));
	snprintf(msg, cap, "%s '%s' %s", what, s, why);
	return ZC_E(ZC_INVALID);
}

int
dn_rpc_names_bucket(const char *bucket, char *msg, size_t cap)
{
	const char *why = zc_bucket_name_fault(bucket, true);

	return why ? refuse(msg, cap, "bucket name", bucket, why) : 0;
}

int
dn_rpc_names_object(const char *bucket, const char *key, char *msg, size_t cap)
{
	enum zc_key_fault f;
	int err = dn_rpc_names_bucket(bucket, msg, cap);

	if (err)
		return err;
	f = zc_key_check(key, strlen(key));
	return f ? refuse(msg, cap, "key", key, zc_key_fault_text(f)) : 0;
}

int
dn_rpc_names_list(const char *bucket, const char *prefix, const char *start_after,
                  const char *delimiter, char *msg, size_t cap)
{
	const char *const args[] = { prefix, start_after, delimiter };
	static const char *const what[] = { "prefix", "start_after", "delimiter" };
	int err = dn_rpc_names_bucket(bucket, msg, cap);

	for (size_t i = 0; !err && i < 3; i++) {
		const char *why = zc_list_arg_fault(args[i], strlen(args[i]));

		if (why)
			err = refuse(msg, cap, what[i], args[i], why);
	}
	return err;
}

/* The target, then each part (an empty bucket is the target's). */
static int
compose_names(const struct rpc_compose_req *req, char *msg, size_t cap)
{
	int err = dn_rpc_names_object(req->bucket, req->key, msg, cap);

	for (size_t i = 0; !err && i < req->n_parts; i++) {
		const struct rpc_object_req *p = &req->parts[i];
		char m[RPC_STATUS_MSG_MAX - 32];

		err = dn_rpc_names_object(p->bucket[0] ? p->bucket : req->bucket, p->key, m,
		                          sizeof(m));
		if (err)
			snprintf(msg, cap, "part %zu: %s", i + 1, m);
	}
	return err;
}

int
dn_rpc_names_unary(enum rpc_method m, const union rpc_unary_req *req, struct rpc_reply *reply)
{
	char msg[RPC_STATUS_MSG_MAX];
	int err;

	switch (m) {
	case RPC_STAT:
	case RPC_DELETE:
		err = dn_rpc_names_object(req->object.bucket, req->object.key, msg, sizeof(msg));
		break;
	case RPC_LIST:
		err = dn_rpc_names_list(req->list.bucket, req->list.prefix, req->list.start_after,
		                        req->list.delimiter, msg, sizeof(msg));
		break;
	case RPC_COMPOSE:
		err = compose_names(&req->compose, msg, sizeof(msg));
		break;
	case RPC_CREATE_BUCKET:
	case RPC_DELETE_BUCKET:
	case RPC_HEAD_BUCKET:
		err = dn_rpc_names_bucket(req->bucket.bucket, msg, sizeof(msg));
		break;
	default:
		err = 0;
	}
	if (err)
		rpc_reply_error(reply, "%s", msg);
	return err;
}
