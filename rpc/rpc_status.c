/* rpc: errors <-> gRPC status, copy counters, the method table. */
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_internal.h"
#include "rpc_stats.h"
#include "rpc_status_internal.h"
#include "zc.h"

atomic_ullong rpc_stat_received;
atomic_ullong rpc_stat_copied[RPC_STAGE_COUNT];
atomic_ullong rpc_stat_messages;
atomic_long rpc_stat_live_buffers;

grpc_status_code
rpc_status_from_err(int err)
{
	switch (zc_err_code(err)) {
	case ZC_OK:
		return GRPC_STATUS_OK;
	case ZC_NO_BUCKET:
	case ZC_NO_KEY:
		return GRPC_STATUS_NOT_FOUND;
	case ZC_BUCKET_EXISTS:
	case ZC_CELL_EXISTS:
		return GRPC_STATUS_ALREADY_EXISTS;
	case ZC_BUCKET_NOT_EMPTY:
	case ZC_PRECONDITION:
		return GRPC_STATUS_FAILED_PRECONDITION;
	case ZC_INVALID:
		return GRPC_STATUS_INVALID_ARGUMENT;
	case ZC_BAD_DIGEST:
		return GRPC_STATUS_DATA_LOSS;
	case ZC_SLOW_DOWN:
	case ZC_NO_SPACE:
	case ZC_CHANGED:
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case ZC_NO_QUORUM:
	case ZC_UNAVAILABLE:
		return GRPC_STATUS_UNAVAILABLE;
	case ZC_CANCELED:
		return GRPC_STATUS_CANCELLED;
	case ZC_NOT_IMPLEMENTED:
		return GRPC_STATUS_UNIMPLEMENTED;
	default:
		return GRPC_STATUS_INTERNAL;
	}
}

int
rpc_err_from_status(grpc_status_code code)
{
	switch (code) {
	case GRPC_STATUS_OK:
		return 0;
	case GRPC_STATUS_INVALID_ARGUMENT:
	case GRPC_STATUS_OUT_OF_RANGE:
		return -EINVAL;
	case GRPC_STATUS_DATA_LOSS:
		return -EBADMSG;
	case GRPC_STATUS_NOT_FOUND:
		return ZC_E(ZC_NO_KEY);
	case GRPC_STATUS_ALREADY_EXISTS:
		return -EEXIST;
	case GRPC_STATUS_FAILED_PRECONDITION:
		return ZC_E(ZC_PRECONDITION);
	case GRPC_STATUS_RESOURCE_EXHAUSTED:
		return ZC_E(ZC_SLOW_DOWN);
	case GRPC_STATUS_CANCELLED:
		return -ECANCELED;
	case GRPC_STATUS_DEADLINE_EXCEEDED:
		return -ETIMEDOUT;
	case GRPC_STATUS_PERMISSION_DENIED:
	case GRPC_STATUS_UNAUTHENTICATED:
		return -EACCES;
	case GRPC_STATUS_UNIMPLEMENTED:
		return -EOPNOTSUPP;
	case GRPC_STATUS_UNAVAILABLE:
		return ZC_E(ZC_UNAVAILABLE);
	default:
		return -EIO;
	}
}

/* The status of a finished call; its error from the RPC_ERR_KEY trailer when the peer sent
 * one (a zest datanode always does), else what the gRPC code stands for. */
void
rpc_status_from_wire(struct rpc_status *st, grpc_status_code code, grpc_slice details,
                     const grpc_metadata_array *trailing)
{
	st->err = rpc_err_from_status(code);
	rpc_slice_to_str(details, st->msg, sizeof(st->msg));
	for (size_t i = 0; code != GRPC_STATUS_OK && i < trailing->count; i++) {
		const grpc_metadata *md = &trailing->metadata[i];
		char v[12];
		long c;

		if (!grpc_slice_str_cmp(md->key, RPC_ERR_KEY)) {
			rpc_slice_to_str(md->value, v, sizeof(v));
			c = strtol(v, NULL, 10);
			if (c > 0 && c < ZC_CODE_COUNT)
				st->err = ZC_E((enum zc_code)c);
		}
	}
}

void
rpc_format_status(char *out, size_t cap, int err, const char *fmt, va_list ap)
{
	char text[RPC_STATUS_MSG_MAX];

	if (!cap)
		return;
	out[0] = 0;
	if (!err)
		return;
	if (fmt && fmt[0])
		vsnprintf(text, sizeof(text), fmt, ap);
	else
		snprintf(text, sizeof(text), "%s", err > -ZC_ERR_BASE ? strerror(-err) : "");
	/* The word is for people reading logs; the code travels in RPC_ERR_KEY. */
	snprintf(out, cap, "%s: %.*s", zc_code_word(zc_err_code(err)),
	         (int)(cap > 32 ? cap - 32 : 0), text);
}

void
rpc_format_status_str(char *out, size_t cap, int err, const char *text)
{
	rpc_format_status_l(out, cap, err, text && text[0] ? "%s" : NULL, text);
}

void
rpc_format_status_l(char *out, size_t cap, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rpc_format_status(out, cap, err, fmt, ap);
	va_end(ap);
}

static void
status_vset(struct rpc_status *st, int err, const char *fmt, va_list ap)
{
	st->err = err;
	rpc_format_status(st->msg, sizeof(st->msg), err, fmt, ap);
}

void
rpc_status_set(struct rpc_status *st, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	status_vset(st, err, fmt, ap);
	va_end(ap);
}

void
rpc_stats_get(struct rpc_stats *out)
{
	out->received_bytes = atomic_load(&rpc_stat_received);
	for (int i = 0; i < RPC_STAGE_COUNT; i++)
		out->copied_bytes[i] = atomic_load(&rpc_stat_copied[i]);
	out->messages = atomic_load(&rpc_stat_messages);
}

const char *
rpc_stage_name(enum rpc_copy_stage stage)
{
	static const char *const names[RPC_STAGE_COUNT] = { "gather", "unpack", "align" };

	return (unsigned)stage < RPC_STAGE_COUNT ? names[stage] : "unknown";
}

long
rpc_live_buffers(void)
{
	return atomic_load(&rpc_stat_live_buffers);
}

int
rpc_marshaller_parse(const char *name, enum rpc_marshaller *out)
{
	if (!strcmp(name, "zerocopy"))
		*out = RPC_MARSHAL_ZEROCOPY;
	else if (!strcmp(name, "copy"))
		*out = RPC_MARSHAL_COPY;
	else
		return -EINVAL;
	return 0;
}

static const struct {
	const char *path;
	const ProtobufCMessageDescriptor *req, *resp;
} methods[RPC_METHOD_COUNT] = {
	[RPC_WRITE] = { "/zest.Datanode/Write", &zest__write_chunk__descriptor,
	                &zest__write_result__descriptor },
	[RPC_READ] = { "/zest.Datanode/Read", &zest__read_request__descriptor,
	               &zest__read_chunk__descriptor },
	[RPC_STAT] = { "/zest.Datanode/Stat", &zest__object_request__descriptor,
	               &zest__object_info__descriptor },
	[RPC_DELETE] = { "/zest.Datanode/Delete", &zest__object_request__descriptor,
	                 &zest__delete_result__descriptor },
	[RPC_LIST] = { "/zest.Datanode/List", &zest__list_request__descriptor,
	               &zest__list_result__descriptor },
	[RPC_COMPOSE] = { "/zest.Datanode/Compose", &zest__compose_request__descriptor,
	                  &zest__write_result__descriptor },
	[RPC_CREATE_BUCKET] = { "/zest.Datanode/CreateBucket", &zest__bucket_request__descriptor,
	                        &zest__bucket_info__descriptor },
	[RPC_DELETE_BUCKET] = { "/zest.Datanode/DeleteBucket", &zest__bucket_request__descriptor,
	                        &zest__empty__descriptor },
	[RPC_HEAD_BUCKET] = { "/zest.Datanode/HeadBucket", &zest__bucket_request__descriptor,
	                      &zest__bucket_info__descriptor },
	[RPC_LIST_BUCKETS] = { "/zest.Datanode/ListBuckets", &zest__empty__descriptor,
	                       &zest__bucket_list__descriptor },
	[RPC_WRITE_CELL] = { "/zest.Datanode/WriteCell", &zest__cell_chunk__descriptor,
	                     &zest__cell_result__descriptor },
	[RPC_READ_CELL] = { "/zest.Datanode/ReadCell", &zest__cell_read_request__descriptor,
	                    &zest__read_chunk__descriptor },
	[RPC_DELETE_CELLS] = { "/zest.Datanode/DeleteCells", &zest__cells_request__descriptor,
	                       &zest__cells_result__descriptor },
	[RPC_COMMIT_CELLS] = { "/zest.Datanode/CommitCells", &zest__cells_request__descriptor,
	                       &zest__cells_result__descriptor },
};

bool
rpc_method_is_stream(enum rpc_method m)
{
	return m == RPC_WRITE || m == RPC_READ || m == RPC_WRITE_CELL || m == RPC_READ_CELL;
}

const char *
rpc_method_path(enum rpc_method m)
{
	return (unsigned)m < RPC_METHOD_COUNT ? methods[m].path : NULL;
}

const ProtobufCMessageDescriptor *
rpc_method_request(enum rpc_method m)
{
	return (unsigned)m < RPC_METHOD_COUNT ? methods[m].req : NULL;
}

const ProtobufCMessageDescriptor *
rpc_method_response(enum rpc_method m)
{
	return (unsigned)m < RPC_METHOD_COUNT ? methods[m].resp : NULL;
}

void
rpc_slice_to_str(grpc_slice s, char *out, size_t cap)
{
	size_t n = GRPC_SLICE_LENGTH(s);

	if (!cap)
		return;
	if (n >= cap)
		n = cap - 1;
	memcpy(out, GRPC_SLICE_START_PTR(s), n);
	out[n] = 0;
}

int
rpc_tune_malloc(void)
{
	/* Setting the mmap threshold also stops glibc's dynamic threshold adjustment. */
	if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, 1 << 30))
		return -EINVAL;
	return 0;
}

int
rpc_status_err(const struct rpc_status *st)
{
	enum zc_code code;

	if (!st->err)
		return 0;
	code = zc_err_code(st->err);
	if (code == ZC_UNAVAILABLE || code == ZC_INTERNAL)
		ZC_WARN("rpc", "datanode error code=%s err=%d msg=\"%s\"", zc_code_word(code),
		        st->err, st->msg);
	return ZC_E(code);
}
