/*
 * cl_etcd: get, range, put, delete and txn, each a translation between zest's structs
 * (cl_etcd.h) and etcdserverpb messages around one cl_etcd_call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cl_etcd_internal.h"

#define CAST(p) ((uint8_t *)(uintptr_t)(p)) /* protobuf-c's bytes are not const */

/* ------------------------------------------------------------------ keys */

/*
 * The [key, end) etcd wants for r. A prefix ends at the prefix with its last byte below
 * 0xff raised by one ("a\xff" -> "b"); a prefix of only 0xff bytes, or an empty one, has
 * no such end and becomes "every key >= key", which etcd spells end = "\0" (with key
 * "\0" for the empty prefix: every key). *owned (free it) holds a computed end.
 */
int
cl_etcd_range_bounds(const struct cl_etcd_range *r, ProtobufCBinaryData *key,
                     ProtobufCBinaryData *end, uint8_t **owned)
{
	static const uint8_t zero[1] = { 0 };
	size_t n;

	*owned = NULL;
	if ((!r->key && r->key_len) || (!r->end && r->end_len) || (!r->key_len && !r->prefix))
		return -EINVAL;
	key->data = CAST(r->key);
	key->len = r->key_len;
	end->data = CAST(r->end);
	end->len = r->end_len;
	if (!r->prefix)
		return 0;
	for (n = r->key_len; n > 0 && ((const uint8_t *)r->key)[n - 1] == 0xff; n--)
		;
	if (!n) {
		end->data = CAST(zero);
		end->len = 1;
		if (!r->key_len) {
			key->data = CAST(zero);
			key->len = 1;
		}
		return 0;
	}
	*owned = malloc(n);
	if (!*owned)
		return -ENOMEM;
	memcpy(*owned, r->key, n);
	(*owned)[n - 1]++;
	end->data = *owned;
	end->len = n;
	return 0;
}

/* Copy etcd's kvs into one allocation: the array, then each key and value + NUL. */
int
cl_etcd_kvs_copy(Mvccpb__KeyValue **in, size_t n, struct cl_etcd_kvs *out)
{
	size_t bytes = n * sizeof(*out->kv);
	char *p;

	for (size_t i = 0; i < n; i++)
		bytes += in[i]->key.len + in[i]->value.len + 2;
	out->kv = NULL;
	out->n = 0;
	if (!n)
		return 0;
	out->kv = malloc(bytes);
	if (!out->kv)
		return -ENOMEM;
	p = (char *)(out->kv + n);
	for (size_t i = 0; i < n; i++) {
		struct cl_etcd_kv *kv = &out->kv[i];

		kv->key = p;
		kv->key_len = in[i]->key.len;
		if (kv->key_len)
			memcpy(p, in[i]->key.data, kv->key_len);
		p[kv->key_len] = '\0';
		p += kv->key_len + 1;
		kv->value = p;
		kv->value_len = in[i]->value.len;
		if (kv->value_len)
			memcpy(p, in[i]->value.data, kv->value_len);
		p[kv->value_len] = '\0';
		p += kv->value_len + 1;
		kv->create_revision = in[i]->create_revision;
		kv->mod_revision = in[i]->mod_revision;
		kv->version = in[i]->version;
		kv->lease = in[i]->lease;
	}
	out->n = n;
	return 0;
}

static int
range_result(const Etcdserverpb__RangeResponse *rr, bool keys_only, struct cl_etcd_kvs *out)
{
	int rc = cl_etcd_kvs_copy(rr->kvs, rr->n_kvs, out);

	if (rc)
		return rc;
	for (size_t i = 0; keys_only && i < out->n; i++)
		out->kv[i].value = NULL;
	out->more = rr->more;
	out->count = rr->count;
	out->revision = rr->header ? rr->header->revision : 0;
	return 0;
}

void
cl_etcd_kvs_fini(struct cl_etcd_kvs *kvs)
{
	if (!kvs)
		return;
	free(kvs->kv);
	memset(kvs, 0, sizeof(*kvs));
}

/* A RangeRequest for r; *owned as for bounds(). */
static int
range_request(const struct cl_etcd_range *r, Etcdserverpb__RangeRequest *req, uint8_t **owned)
{
	etcdserverpb__range_request__init(req);
	if (r->limit < 0 || r->revision < 0)
		return -EINVAL;
	req->limit = r->limit;
	req->revision = r->revision;
	req->serializable = r->serializable;
	req->keys_only = r->keys_only;
	return cl_etcd_range_bounds(r, &req->key, &req->range_end, owned);
}

static int
delete_request(const struct cl_etcd_range *r, Etcdserverpb__DeleteRangeRequest *req,
               uint8_t **owned)
{
	etcdserverpb__delete_range_request__init(req);
	if (r->limit || r->revision || r->serializable || r->keys_only)
		return -EINVAL;
	return cl_etcd_range_bounds(r, &req->key, &req->range_end, owned);
}

int
cl_etcd_range(struct cl_etcd *c, const struct cl_etcd_range *r, struct cl_etcd_kvs *out,
              unsigned timeout_ms)
{
	Etcdserverpb__RangeRequest req;
	Etcdserverpb__RangeResponse *resp;
	uint8_t *owned;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = range_request(r, &req, &owned);
	if (rc)
		return rc;
	rc = cl_etcd_call(c, ETCD_RANGE, &req.base, &etcdserverpb__range_response__descriptor,
	                  (ProtobufCMessage **)&resp, timeout_ms);
	free(owned);
	if (rc)
		return rc;
	rc = range_result(resp, r->keys_only, out);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

int
cl_etcd_get(struct cl_etcd *c, const void *key, size_t key_len, bool serializable,
            struct cl_etcd_kvs *out, unsigned timeout_ms)
{
	struct cl_etcd_range r = { .key = key, .key_len = key_len, .serializable = serializable };
	int rc;

	memset(out, 0, sizeof(*out));
	if (!key_len)
		return -EINVAL;
	rc = cl_etcd_range(c, &r, out, timeout_ms);
	return rc ? rc : out->n ? 0 : ZC_E(ZC_NO_KEY);
}

int
cl_etcd_put(struct cl_etcd *c, const void *key, size_t key_len, const void *value, size_t value_len,
            int64_t lease, int64_t *revision, unsigned timeout_ms)
{
	Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__PutResponse *resp;
	int rc;

	if (!key || !key_len || (!value && value_len) || lease < 0)
		return -EINVAL;
	req.key = (ProtobufCBinaryData){ key_len, CAST(key) };
	req.value = (ProtobufCBinaryData){ value_len, CAST(value) };
	req.lease = lease;
	rc = cl_etcd_call(c, ETCD_PUT, &req.base, &etcdserverpb__put_response__descriptor,
	                  (ProtobufCMessage **)&resp, timeout_ms);
	if (rc)
		return rc;
	if (revision)
		*revision = resp->header ? resp->header->revision : 0;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

int
cl_etcd_delete(struct cl_etcd *c, const struct cl_etcd_range *r, int64_t *deleted,
               int64_t *revision, unsigned timeout_ms)
{
	Etcdserverpb__DeleteRangeRequest req;
	Etcdserverpb__DeleteRangeResponse *resp;
	uint8_t *owned;
	int rc;

	rc = delete_request(r, &req, &owned);
	if (rc)
		return rc;
	rc = cl_etcd_call(c, ETCD_DELETE_RANGE, &req.base,
	                  &etcdserverpb__delete_range_response__descriptor,
	                  (ProtobufCMessage **)&resp, timeout_ms);
	free(owned);
	if (rc)
		return rc;
	if (deleted)
		*deleted = resp->deleted;
	if (revision)
		*revision = resp->header ? resp->header->revision : 0;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

/* ------------------------------------------------------------------ txn */

/* The messages behind one RequestOp, and a computed range end it points to. */
struct op_msg {
	Etcdserverpb__RequestOp op;
	union {
		Etcdserverpb__RangeRequest range;
		Etcdserverpb__PutRequest put;
		Etcdserverpb__DeleteRangeRequest del;
	} u;
	uint8_t *owned;
};

static int
op_request(const struct cl_etcd_op *in, struct op_msg *m)
{
	etcdserverpb__request_op__init(&m->op);
	m->owned = NULL;
	switch (in->type) {
	case CL_ETCD_OP_PUT:
		if (!in->r.key || !in->r.key_len || in->r.end || in->r.prefix ||
		    (!in->value && in->value_len) || in->lease < 0)
			return -EINVAL;
		etcdserverpb__put_request__init(&m->u.put);
		m->u.put.key = (ProtobufCBinaryData){ in->r.key_len, CAST(in->r.key) };
		m->u.put.value = (ProtobufCBinaryData){ in->value_len, CAST(in->value) };
		m->u.put.lease = in->lease;
		m->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
		m->op.request_put = &m->u.put;
		return 0;
	case CL_ETCD_OP_DELETE:
		m->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
		m->op.request_delete_range = &m->u.del;
		return delete_request(&in->r, &m->u.del, &m->owned);
	case CL_ETCD_OP_RANGE:
		m->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
		m->op.request_range = &m->u.range;
		return range_request(&in->r, &m->u.range, &m->owned);
	}
	return -EINVAL;
}

static int
cmp_request(const struct cl_etcd_cmp *in, Etcdserverpb__Compare *m)
{
	etcdserverpb__compare__init(m);
	if (!in->key || !in->key_len || (unsigned)in->op > CL_ETCD_NOT_EQUAL)
		return -EINVAL;
	m->key = (ProtobufCBinaryData){ in->key_len, CAST(in->key) };
	if (in->end && in->end_len)
		m->range_end = (ProtobufCBinaryData){ in->end_len, CAST(in->end) };
	/* our enums carry etcd's values */
	m->result = (Etcdserverpb__Compare__CompareResult)in->op;
	m->target = (Etcdserverpb__Compare__CompareTarget)in->target;
	switch (in->target) {
	case CL_ETCD_CMP_VERSION:
		m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
		m->version = in->num;
		return 0;
	case CL_ETCD_CMP_CREATE:
		m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
		m->create_revision = in->num;
		return 0;
	case CL_ETCD_CMP_MOD:
		m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
		m->mod_revision = in->num;
		return 0;
	case CL_ETCD_CMP_VALUE:
		if (!in->value && in->value_len)
			return -EINVAL;
		m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
		/* an empty value still needs a non-NULL pointer to be sent as set */
		m->value = (ProtobufCBinaryData){ in->value_len, CAST(in->value ? in->value : "") };
		return 0;
	}
	return -EINVAL;
}

static int
txn_result(const Etcdserverpb__TxnResponse *resp, struct cl_etcd_txn_result *res)
{
	res->succeeded = resp->succeeded;
	res->revision = resp->header ? resp->header->revision : 0;
	if (!resp->n_responses)
		return 0;
	res->op = calloc(resp->n_responses, sizeof(*res->op));
	if (!res->op)
		return -ENOMEM;
	res->n_op = resp->n_responses;
	for (size_t i = 0; i < resp->n_responses; i++) {
		const Etcdserverpb__ResponseOp *r = resp->responses[i];
		struct cl_etcd_op_result *o = &res->op[i];
		int rc;

		switch (r->response_case) {
		case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE:
			o->type = CL_ETCD_OP_RANGE;
			rc = range_result(r->response_range, false, &o->kvs);
			if (rc)
				return rc;
			break;
		case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE:
			o->type = CL_ETCD_OP_DELETE;
			o->deleted = r->response_delete_range->deleted;
			break;
		case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT:
			o->type = CL_ETCD_OP_PUT;
			break;
		default:
			return -EIO; /* we never send a nested txn */
		}
	}
	return 0;
}

void
cl_etcd_txn_result_fini(struct cl_etcd_txn_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->n_op; i++)
		cl_etcd_kvs_fini(&res->op[i].kvs);
	free(res->op);
	memset(res, 0, sizeof(*res));
}

int
cl_etcd_txn(struct cl_etcd *c, const struct cl_etcd_txn *txn, struct cl_etcd_txn_result *res,
            unsigned timeout_ms)
{
	Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
	size_t n_ops = txn->n_then + txn->n_els, n_done = 0;
	Etcdserverpb__TxnResponse *resp;
	Etcdserverpb__RequestOp **opp = NULL;
	Etcdserverpb__Compare *cmp = NULL, **cmpp = NULL;
	struct op_msg *ops = NULL;
	int rc = -ENOMEM;

	if (res)
		memset(res, 0, sizeof(*res));
	if ((!txn->cmp && txn->n_cmp) || (!txn->then && txn->n_then) || (!txn->els && txn->n_els))
		return -EINVAL;
	cmp = calloc(txn->n_cmp + 1, sizeof(*cmp));
	cmpp = calloc(txn->n_cmp + 1, sizeof(*cmpp));
	ops = calloc(n_ops + 1, sizeof(*ops));
	opp = calloc(n_ops + 1, sizeof(*opp));
	if (!cmp || !cmpp || !ops || !opp)
		goto out;
	for (size_t i = 0; i < txn->n_cmp; i++) {
		rc = cmp_request(&txn->cmp[i], &cmp[i]);
		if (rc)
			goto out;
		cmpp[i] = &cmp[i];
	}
	for (; n_done < n_ops; n_done++) {
		const struct cl_etcd_op *in =
		        n_done < txn->n_then ? &txn->then[n_done] : &txn->els[n_done - txn->n_then];

		rc = op_request(in, &ops[n_done]);
		if (rc) {
			free(ops[n_done].owned);
			goto out;
		}
		opp[n_done] = &ops[n_done].op;
	}
	req.n_compare = txn->n_cmp;
	req.compare = cmpp;
	req.n_success = txn->n_then;
	req.success = opp;
	req.n_failure = txn->n_els;
	req.failure = opp + txn->n_then;
	rc = cl_etcd_call(c, ETCD_TXN, &req.base, &etcdserverpb__txn_response__descriptor,
	                  (ProtobufCMessage **)&resp, timeout_ms);
	if (rc)
		goto out;
	if (res) {
		rc = txn_result(resp, res);
		if (rc)
			cl_etcd_txn_result_fini(res);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
out:
	for (size_t i = 0; i < n_done; i++)
		free(ops[i].owned);
	free(opp);
	free(ops);
	free(cmpp);
	free(cmp);
	return rc;
}
