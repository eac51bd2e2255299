/*
 * s3_backend_rpc: struct s3_backend over the zest.Datanode rpc client: errors, attributes,
 * placement, create and destroy. The design (threads, placement, zero copy, errors) and
 * which file holds what: s3_backend_rpc_internal.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_backend_rpc_internal.h"
#include "zc.h"

struct rpc_client *
s3_brpc_place(struct rbe *b, const char *bucket, const char *key)
{
	return b->cl[b->n == 1 ? 0 : s3_place((const char *const *)b->names, b->n, bucket, key)];
}

/* ------------------------------------------------------------------ attrs */

/* "name:value\n" lines -> Attr messages pointing into a private copy. */
int
s3_brpc_attrs_parse(struct attrs *at, const char *s, size_t len)
{
	char *p, *end;

	at->n = 0;
	at->buf = malloc(len + 1);
	if (!at->buf)
		return -ENOMEM;
	memcpy(at->buf, s, len);
	at->buf[len] = 0;
	p = at->buf;
	end = at->buf + len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *colon;

		if (!nl)
			nl = end;
		*nl = 0;
		colon = strchr(p, ':');
		if (colon && at->n < MAX_ATTRS) {
			*colon = 0;
			at->a[at->n].name = p;
			at->a[at->n].value = colon + 1;
			at->n++;
		}
		p = nl + 1;
	}
	return 0;
}

void
s3_brpc_info_from_rpc(const struct rpc_object_info *in, const char *key, struct s3_obj_info *out)
{
	size_t o = 0;

	memset(out, 0, offsetof(struct s3_obj_info, attrs));
	snprintf(out->key, sizeof(out->key), "%s", in->key && in->key[0] ? in->key : key);
	out->size = in->size;
	snprintf(out->etag, sizeof(out->etag), "%s", in->etag ? in->etag : "");
	out->mtime_ns = in->mtime_ns;
	for (size_t i = 0; i < in->n_attrs; i++) {
		int w = snprintf(out->attrs + o, sizeof(out->attrs) - o, "%s:%s\n",
		                 in->attrs[i].name, in->attrs[i].value);

		if (w < 0 || (size_t)w >= sizeof(out->attrs) - o)
			break;
		o += (size_t)w;
	}
	out->attrs[o] = 0;
	out->attrs_len = o;
}

/* A condition as the rpc carries it (pointing into c); NULL when there is none. */
const struct rpc_write_cond *
s3_brpc_cond_to_rpc(const struct s3_cond *c, struct rpc_write_cond *rc)
{
	if (!c || (!c->if_none_match && !c->if_match[0]))
		return NULL;
	rc->if_none_match = c->if_none_match;
	rc->if_match = c->if_match;
	return rc;
}

/* ------------------------------------------------------------------ lifecycle */

void
s3_backend_rpc_destroy(struct s3_backend *be)
{
	struct rbe *b;

	if (!be)
		return;
	b = be->ctx;
	for (unsigned i = 0; i < b->n; i++) {
		rpc_client_destroy(b->cl ? b->cl[i] : NULL);
		free(b->names ? b->names[i] : NULL);
	}
	free(b->cl);
	free(b->names);
	free(b);
}

int
s3_backend_rpc_create(const char *const *nodes, unsigned n, const struct rpc_tls *tls,
                      unsigned stream_timeout_ms, struct s3_backend **out)
{
	struct rbe *b;
	int rc = 0;

	if (!nodes || n == 0)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->be = (struct s3_backend){
		.ctx = b,
		.put_open = s3_brpc_put_open,
		.put_write = s3_brpc_put_write,
		.put_write_crc = s3_brpc_put_write_crc,
		.put_commit = s3_brpc_put_commit,
		.put_abort = s3_brpc_put_abort,
		.get_open = s3_brpc_get_open,
		.get_next = s3_brpc_get_next,
		.get_close = s3_brpc_get_close,
		.stat = s3_brpc_stat,
		.del = s3_brpc_del,
		.list = s3_brpc_list,
		.compose = s3_brpc_compose,
		.bucket_create = s3_brpc_bucket_create,
		.bucket_delete = s3_brpc_bucket_delete,
		.bucket_head = s3_brpc_bucket_head,
		.bucket_list = s3_brpc_bucket_list,
	};
	b->names = calloc(n, sizeof(*b->names));
	b->cl = calloc(n, sizeof(*b->cl));
	if (!b->names || !b->cl) {
		rc = -ENOMEM;
		goto fail;
	}
	b->n = n;
	for (unsigned i = 0; i < n; i++) {
		struct rpc_client_opts o = { 0 };

		for (unsigned j = 0; j < i; j++)
			if (strcmp(nodes[i], nodes[j]) == 0)
				rc = -EEXIST; /* the same node twice would skew placement */
		if (rc < 0)
			goto fail;
		b->names[i] = strdup(nodes[i]);
		if (!b->names[i]) {
			rc = -ENOMEM;
			goto fail;
		}
		o.target = nodes[i];
		o.channels = 2;
		o.stream_window = GET_STREAM_WINDOW;
		/* a hung datanode must not hold a PUT or GET (and its client) for ever */
		o.progress_timeout_ms =
		        stream_timeout_ms ? stream_timeout_ms : S3_STREAM_TIMEOUT_MS;
		o.tls = *tls;
		rc = rpc_client_create(&o, &b->cl[i]);
		if (rc < 0)
			goto fail;
	}
	*out = &b->be;
	return 0;
fail:
	s3_backend_rpc_destroy(&b->be);
	return rc;
}
