/*
 * rpc_msg_unary: the unary methods' requests and responses, rpc.h structs to and from
 * the wire (packed and unpacked here, temporaries in an arena).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>

#include "rpc_internal.h"

static char *
str_out(const char *s)
{
	return (char *)(s ? s : "");
}

static void
objreq_to_pb(const struct rpc_object_req *in, Zest__ObjectRequest *out)
{
	zest__object_request__init(out);
	out->bucket = str_out(in->bucket);
	out->key = str_out(in->key);
	out->etag = str_out(in->etag);
}

static void
objreq_from_pb(const Zest__ObjectRequest *in, struct rpc_object_req *out)
{
	out->bucket = in->bucket;
	out->key = in->key;
	out->etag = in->etag;
}

static int
compose_to_pb(const struct rpc_compose_req *in, Zest__ComposeRequest *out,
              Zest__WriteCondition *cond, struct rpc_arena *a)
{
	Zest__ObjectRequest *v, **pv;

	zest__compose_request__init(out);
	out->bucket = str_out(in->bucket);
	out->key = str_out(in->key);
	out->delete_parts = in->delete_parts;
	out->etag = str_out(in->etag);
	if (in->cond) {
		zest__write_condition__init(cond);
		cond->if_none_match = in->cond->if_none_match;
		cond->if_match = str_out(in->cond->if_match);
		out->cond = cond;
	}
	if (rpc_msg_attrs_to_pb(in->attrs, in->n_attrs, &out->attrs, &out->n_attrs, a))
		return -ENOMEM;
	if (!in->n_parts)
		return 0;
	v = rpc_arena_alloc(a, in->n_parts * sizeof(*v));
	pv = rpc_arena_alloc(a, in->n_parts * sizeof(*pv));
	if (!v || !pv)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_parts; i++) {
		objreq_to_pb(&in->parts[i], &v[i]);
		pv[i] = &v[i];
	}
	out->parts = pv;
	out->n_parts = in->n_parts;
	return 0;
}

static int
compose_from_pb(const Zest__ComposeRequest *in, struct rpc_compose_req *out, struct rpc_arena *a)
{
	struct rpc_write_cond *cond;
	struct rpc_object_req *parts;

	out->bucket = in->bucket;
	out->key = in->key;
	out->delete_parts = in->delete_parts;
	out->etag = in->etag;
	if (in->cond) {
		cond = rpc_arena_alloc(a, sizeof(*cond));
		if (!cond)
			return -ENOMEM;
		cond->if_none_match = in->cond->if_none_match;
		cond->if_match = in->cond->if_match;
		out->cond = cond;
	}
	if (rpc_msg_attrs_from_pb(in->attrs, in->n_attrs, &out->attrs, &out->n_attrs, a))
		return -ENOMEM;
	if (!in->n_parts)
		return 0;
	parts = rpc_arena_alloc(a, in->n_parts * sizeof(*parts));
	if (!parts)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_parts; i++)
		objreq_from_pb(in->parts[i], &parts[i]);
	out->parts = parts;
	out->n_parts = in->n_parts;
	return 0;
}

/* Any request or response message, on the stack while it is packed. */
union pb_any {
	ProtobufCMessage base;
	Zest__ObjectRequest obj;
	Zest__ListRequest list;
	Zest__ComposeRequest compose;
	Zest__BucketRequest bucket;
	Zest__Empty empty;
	Zest__ObjectInfo info;
	Zest__DeleteResult del;
	Zest__ListResult lres;
	Zest__WriteResult wres;
	Zest__BucketInfo binfo;
	Zest__BucketList blist;
	Zest__CellsRequest cells;
	Zest__CellsResult cres;
};

static grpc_byte_buffer *
pack_free(const union pb_any *pb, int rc, struct rpc_arena *a)
{
	grpc_byte_buffer *bb = rc ? NULL : rpc_pack_message(&pb->base);

	rpc_arena_free(a);
	return bb;
}

grpc_byte_buffer *
rpc_msg_pack_req(enum rpc_method m, const union rpc_unary_req *req)
{
	struct rpc_arena a = { 0 };
	Zest__WriteCondition cond;
	union pb_any pb;
	int rc = 0;

	switch (m) {
	case RPC_STAT:
	case RPC_DELETE:
		objreq_to_pb(&req->object, &pb.obj);
		break;
	case RPC_LIST:
		zest__list_request__init(&pb.list);
		pb.list.bucket = str_out(req->list.bucket);
		pb.list.prefix = str_out(req->list.prefix);
		pb.list.start_after = str_out(req->list.start_after);
		pb.list.limit = req->list.limit;
		pb.list.delimiter = str_out(req->list.delimiter);
		break;
	case RPC_COMPOSE:
		rc = compose_to_pb(&req->compose, &pb.compose, &cond, &a);
		break;
	case RPC_CREATE_BUCKET:
	case RPC_DELETE_BUCKET:
	case RPC_HEAD_BUCKET:
		zest__bucket_request__init(&pb.bucket);
		pb.bucket.bucket = str_out(req->bucket.bucket);
		break;
	case RPC_LIST_BUCKETS:
		zest__empty__init(&pb.empty);
		break;
	case RPC_DELETE_CELLS:
	case RPC_COMMIT_CELLS:
		rc = rpc_msg_cells_req_to_pb(&req->cells, &pb.cells, &a);
		break;
	default:
		return NULL;
	}
	return pack_free(&pb, rc, &a);
}

int
rpc_msg_unpack_req(enum rpc_method m, grpc_byte_buffer *bb, union rpc_unary_req *out,
                   struct rpc_arena *a, char *err, size_t cap)
{
	ProtobufCMessage *msg = rpc_arena_unpack(a, rpc_method_request(m), bb, err, cap);
	const union pb_any *pb = (const union pb_any *)msg;

	memset(out, 0, sizeof(*out));
	if (!msg)
		return -EINVAL;
	switch (m) {
	case RPC_STAT:
	case RPC_DELETE:
		objreq_from_pb(&pb->obj, &out->object);
		return 0;
	case RPC_LIST:
		out->list.bucket = pb->list.bucket;
		out->list.prefix = pb->list.prefix;
		out->list.start_after = pb->list.start_after;
		out->list.limit = pb->list.limit;
		out->list.delimiter = pb->list.delimiter;
		return 0;
	case RPC_COMPOSE:
		return compose_from_pb(&pb->compose, &out->compose, a);
	case RPC_CREATE_BUCKET:
	case RPC_DELETE_BUCKET:
	case RPC_HEAD_BUCKET:
		out->bucket.bucket = pb->bucket.bucket;
		return 0;
	case RPC_LIST_BUCKETS:
		return 0;
	case RPC_DELETE_CELLS:
	case RPC_COMMIT_CELLS:
		return rpc_msg_cells_req_from_pb(&pb->cells, &out->cells, a);
	default:
		return -EINVAL;
	}
}

static int
list_to_pb(const struct rpc_list_result *in, Zest__ListResult *out, struct rpc_arena *a)
{
	Zest__ObjectInfo *v, **pv;

	zest__list_result__init(out);
	out->n_common_prefixes = in->n_common_prefixes;
	out->common_prefixes = (char **)in->common_prefixes;
	out->truncated = in->truncated;
	out->next_start_after = str_out(in->next_start_after);
	if (!in->n_entries)
		return 0;
	v = rpc_arena_alloc(a, in->n_entries * sizeof(*v));
	pv = rpc_arena_alloc(a, in->n_entries * sizeof(*pv));
	if (!v || !pv)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_entries; i++) {
		if (rpc_msg_info_to_pb(&in->entries[i], &v[i], a))
			return -ENOMEM;
		pv[i] = &v[i];
	}
	out->entries = pv;
	out->n_entries = in->n_entries;
	return 0;
}

static int
blist_to_pb(const struct rpc_bucket_list *in, Zest__BucketList *out, struct rpc_arena *a)
{
	Zest__BucketInfo *v, **pv;

	zest__bucket_list__init(out);
	if (!in->n_buckets)
		return 0;
	v = rpc_arena_alloc(a, in->n_buckets * sizeof(*v));
	pv = rpc_arena_alloc(a, in->n_buckets * sizeof(*pv));
	if (!v || !pv)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_buckets; i++) {
		zest__bucket_info__init(&v[i]);
		v[i].name = str_out(in->buckets[i].name);
		v[i].ctime_ns = in->buckets[i].ctime_ns;
		pv[i] = &v[i];
	}
	out->buckets = pv;
	out->n_buckets = in->n_buckets;
	return 0;
}

grpc_byte_buffer *
rpc_msg_pack_resp(enum rpc_method m, const void *resp)
{
	struct rpc_arena a = { 0 };
	union pb_any pb;
	int rc = 0;

	switch (m) {
	case RPC_STAT:
		rc = rpc_msg_info_to_pb(resp, &pb.info, &a);
		break;
	case RPC_DELETE:
		zest__delete_result__init(&pb.del);
		pb.del.existed = ((const struct rpc_delete_result *)resp)->existed;
		break;
	case RPC_LIST:
		rc = list_to_pb(resp, &pb.lres, &a);
		break;
	case RPC_COMPOSE:
		rpc_msg_result_to_pb(resp, &pb.wres);
		break;
	case RPC_CREATE_BUCKET:
	case RPC_HEAD_BUCKET: {
		const struct rpc_bucket_info *bi = resp;

		zest__bucket_info__init(&pb.binfo);
		pb.binfo.name = str_out(bi->name);
		pb.binfo.ctime_ns = bi->ctime_ns;
		break;
	}
	case RPC_DELETE_BUCKET:
		zest__empty__init(&pb.empty);
		break;
	case RPC_LIST_BUCKETS:
		rc = blist_to_pb(resp, &pb.blist, &a);
		break;
	case RPC_DELETE_CELLS:
	case RPC_COMMIT_CELLS:
		zest__cells_result__init(&pb.cres);
		pb.cres.count = ((const struct rpc_cells_result *)resp)->count;
		break;
	default:
		return NULL;
	}
	return pack_free(&pb, rc, &a);
}

static int
list_from_pb(const Zest__ListResult *in, struct rpc_list_result *out, struct rpc_arena *a)
{
	struct rpc_object_info *v;

	out->common_prefixes = (const char *const *)in->common_prefixes;
	out->n_common_prefixes = in->n_common_prefixes;
	out->truncated = in->truncated;
	out->next_start_after = in->next_start_after;
	if (!in->n_entries)
		return 0;
	v = rpc_arena_alloc(a, in->n_entries * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_entries; i++)
		if (rpc_msg_info_from_pb(in->entries[i], &v[i], a))
			return -ENOMEM;
	out->entries = v;
	out->n_entries = in->n_entries;
	return 0;
}

static int
blist_from_pb(const Zest__BucketList *in, struct rpc_bucket_list *out, struct rpc_arena *a)
{
	struct rpc_bucket_info *v;

	if (!in->n_buckets)
		return 0;
	v = rpc_arena_alloc(a, in->n_buckets * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_buckets; i++) {
		v[i].name = in->buckets[i]->name;
		v[i].ctime_ns = in->buckets[i]->ctime_ns;
	}
	out->buckets = v;
	out->n_buckets = in->n_buckets;
	return 0;
}

int
rpc_msg_unpack_resp(enum rpc_method m, grpc_byte_buffer *bb, struct rpc_unary_resp *out)
{
	struct rpc_arena a = { 0 };
	ProtobufCMessage *msg;
	const union pb_any *pb;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if ((unsigned)m >= RPC_METHOD_COUNT || rpc_method_is_stream(m))
		return -EINVAL;
	msg = rpc_arena_unpack(&a, rpc_method_response(m), bb, NULL, 0);
	if (!msg) {
		rpc_arena_free(&a);
		return -EINVAL;
	}
	pb = (const union pb_any *)msg;
	switch (m) {
	case RPC_STAT:
		rc = rpc_msg_info_from_pb(&pb->info, &out->info, &a);
		break;
	case RPC_DELETE:
		out->del.existed = pb->del.existed;
		break;
	case RPC_LIST:
		rc = list_from_pb(&pb->lres, &out->list, &a);
		break;
	case RPC_COMPOSE:
		rpc_msg_result_from_pb(&pb->wres, &out->write);
		break;
	case RPC_CREATE_BUCKET:
	case RPC_HEAD_BUCKET:
		out->bucket.name = pb->binfo.name;
		out->bucket.ctime_ns = pb->binfo.ctime_ns;
		break;
	case RPC_LIST_BUCKETS:
		rc = blist_from_pb(&pb->blist, &out->buckets, &a);
		break;
	case RPC_DELETE_CELLS:
	case RPC_COMMIT_CELLS:
		out->cells.count = pb->cres.count;
		break;
	default:
		break;
	}
	if (rc) {
		rpc_arena_free(&a);
		memset(out, 0, sizeof(*out));
		return rc;
	}
	out->method = m;
	out->mem = a.head;
	return 0;
}

void
rpc_unary_resp_fini(struct rpc_unary_resp *resp)
{
	struct rpc_arena a;

	if (!resp)
		return;
	a.head = resp->mem;
	rpc_arena_free(&a);
	memset(resp, 0, sizeof(*resp));
}
