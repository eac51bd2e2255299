/* TEST DOUBLE: in-memory backend (see mem_backend.h). Copies payload; one global lock. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "mem_backend.h"
#include "zc_crc.h"

struct mobj {
	char *key;
	uint8_t *data;
	size_t size;
	char etag[S3_ETAG_MAX];
	uint64_t mtime_ns;
	char *attrs;
	size_t attrs_len;
};

struct mbucket {
	char name[64];
	uint64_t ctime_ns;
	struct mobj *objs; /* sorted by key */
	size_t n, cap;
};

struct mem {
	pthread_mutex_t lock;
	struct mbucket *buckets;
	size_t nb, capb;
	struct s3_backend be;
};

struct mput {
	struct mem *m;
	char bucket[64];
	char *key;
	uint8_t *data;
	size_t len, cap;
	/* "zc-*" buckets: segments kept by reference until commit, as a zero-copy backend
	 * (the rpc client) does, so tests see the read buffers outlive the put_write call */
	struct zc_seg *segs;
	size_t nseg, segcap;
};

static bool
holds_refs(const struct mput *p)
{
	return strncmp(p->bucket, "zc-", 3) == 0;
}

static void
drop_segs(struct mput *p)
{
	for (size_t i = 0; i < p->nseg; i++)
		if (p->segs[i].ref)
			zc_ref_put(p->segs[i].ref);
	free(p->segs);
	p->segs = NULL;
	p->nseg = p->segcap = 0;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct mbucket *
find_bucket(struct mem *m, const char *name)
{
	for (size_t i = 0; i < m->nb; i++)
		if (strcmp(m->buckets[i].name, name) == 0)
			return &m->buckets[i];
	return NULL;
}

/* Index of key or of where it would go; *found says which. */
static size_t
find_obj(const struct mbucket *b, const char *key, bool *found)
{
	size_t lo = 0, hi = b->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(b->objs[mid].key, key);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static void
obj_free(struct mobj *o)
{
	free(o->key);
	free(o->data);
	free(o->attrs);
}

/* Store an object (takes data). Caller holds the lock. */
static int
store(struct mem *m, const char *bucket, const char *key, uint8_t *data, size_t size,
      const char *etag, const char *attrs, size_t attrs_len, struct s3_obj_info *out)
{
	struct mbucket *b = find_bucket(m, bucket);
	struct mobj o = { 0 };
	bool found;
	size_t i;

	if (!b) {
		free(data);
		return ZC_E(ZC_NO_BUCKET);
	}
	o.key = strdup(key);
	o.attrs = malloc(attrs_len + 1);
	if (!o.key || !o.attrs) {
		free(o.key);
		free(o.attrs);
		free(data);
		return -ENOMEM;
	}
	memcpy(o.attrs, attrs, attrs_len);
	o.attrs_len = attrs_len;
	o.data = data;
	o.size = size;
	snprintf(o.etag, sizeof(o.etag), "%s", etag);
	o.mtime_ns = now_ns();
	i = find_obj(b, key, &found);
	if (found) {
		obj_free(&b->objs[i]);
		b->objs[i] = o;
	} else {
		if (b->n == b->cap) {
			size_t nc = b->cap ? b->cap * 2 : 64;
			void *p = realloc(b->objs, nc * sizeof(*b->objs));

			if (!p) {
				obj_free(&o);
				return -ENOMEM;
			}
			b->objs = p;
			b->cap = nc;
		}
		memmove(&b->objs[i + 1], &b->objs[i], (b->n - i) * sizeof(*b->objs));
		b->objs[i] = o;
		b->n++;
	}
	if (out) {
		memset(out, 0, sizeof(*out));
		snprintf(out->key, sizeof(out->key), "%s", key);
		out->size = size;
		snprintf(out->etag, sizeof(out->etag), "%s", etag);
		out->mtime_ns = o.mtime_ns;
	}
	return 0;
}

static int
m_put_open(void *ctx, const char *bucket, const char *key, uint64_t size, bool size_known,
           void **stream)
{
	struct mem *m = ctx;
	struct mput *p;

	pthread_mutex_lock(&m->lock);
	if (!find_bucket(m, bucket)) {
		pthread_mutex_unlock(&m->lock);
		return ZC_E(ZC_NO_BUCKET);
	}
	pthread_mutex_unlock(&m->lock);
	if (size_known && size > (2ull << 30))
		return -EFBIG;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->m = m;
	snprintf(p->bucket, sizeof(p->bucket), "%s", bucket);
	p->key = strdup(key);
	if (size_known && size && strncmp(bucket, "discard-", 8) != 0) {
		p->data = malloc(size);
		p->cap = size;
	}
	if (!p->key || (size_known && size && !p->data && strncmp(bucket, "discard-", 8) != 0)) {
		free(p->key);
		free(p->data);
		free(p);
		return -ENOMEM;
	}
	*stream = p;
	return 0;
}

static int
m_put_write(void *stream, const struct zc_seg *seg)
{
	struct mput *p = stream;

	if (strncmp(p->bucket, "discard-", 8) == 0) {
		p->len += seg->len; /* size only: lets tests measure the gateway's own memory */
		return 0;
	}
	if (holds_refs(p) && seg->ref) {
		if (p->nseg == p->segcap) {
			size_t nc = p->segcap ? p->segcap * 2 : 64;
			void *np = realloc(p->segs, nc * sizeof(*p->segs));

			if (!np)
				return -ENOMEM;
			p->segs = np;
			p->segcap = nc;
		}
		zc_ref_get(seg->ref);
		p->segs[p->nseg++] = *seg;
		return 0;
	}
	if (p->len + seg->len > p->cap) {
		size_t nc = p->cap ? p->cap : 65536;
		void *d;

		while (nc < p->len + seg->len)
			nc *= 2;
		d = realloc(p->data, nc);
		if (!d)
			return -ENOMEM;
		p->data = d;
		p->cap = nc;
	}
	memcpy(p->data + p->len, seg->ptr, seg->len);
	p->len += seg->len;
	return 0;
}

/* The gateway's span CRC32C, checked as the datanode checks a message's: a wrong one fails. */
static int
m_put_write_crc(void *stream, const struct zc_seg *seg, uint32_t crc32c)
{
	if (zc_crc32c(0, seg->ptr, seg->len) != crc32c)
		return -EBADMSG;
	return m_put_write(stream, seg);
}

static void
m_put_abort(void *stream)
{
	struct mput *p = stream;

	drop_segs(p);
	free(p->key);
	free(p->data);
	free(p);
}

static int cond_check(struct mem *m, const char *bucket, const char *key, const struct s3_cond *c);

static int
m_put_commit(void *stream, const char *etag, const char *attrs, size_t attrs_len,
             const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct mput *p = stream;
	int rc;

	/* gather the referenced segments now: their bytes must still be intact */
	for (size_t i = 0; i < p->nseg; i++) {
		struct zc_seg one = { p->segs[i].ptr, p->segs[i].len, NULL };

		rc = m_put_write(p, &one);
		if (rc < 0) {
			m_put_abort(p);
			return rc;
		}
	}
	drop_segs(p);
	pthread_mutex_lock(&p->m->lock);
	if (strncmp(p->bucket, "discard-", 8) == 0) {
		free(p->data);
		p->data = calloc(1, 1);
		p->len = 0; /* kept as an empty object: the bytes were dropped */
	}
	rc = cond_check(p->m, p->bucket, p->key, cond);
	if (rc == 0) {
		rc = store(p->m, p->bucket, p->key, p->data, p->len, etag, attrs, attrs_len, out);
		p->data = NULL;
	}
	pthread_mutex_unlock(&p->m->lock);
	m_put_abort(p);
	return rc;
}

static void
fill_info(const struct mobj *o, struct s3_obj_info *info)
{
	memset(info, 0, offsetof(struct s3_obj_info, attrs));
	snprintf(info->key, sizeof(info->key), "%s", o->key);
	info->size = o->size;
	snprintf(info->etag, sizeof(info->etag), "%s", o->etag);
	info->mtime_ns = o->mtime_ns;
	info->attrs_len = o->attrs_len < S3_ATTRS_MAX ? o->attrs_len : S3_ATTRS_MAX;
	memcpy(info->attrs, o->attrs, info->attrs_len);
}

/* Look an object up; caller holds the lock. */
static int
lookup(struct mem *m, const char *bucket, const char *key, struct mobj **o)
{
	struct mbucket *b = find_bucket(m, bucket);
	bool found;
	size_t i;

	if (!b)
		return ZC_E(ZC_NO_BUCKET);
	i = find_obj(b, key, &found);
	if (!found)
		return ZC_E(ZC_NO_KEY);
	*o = &b->objs[i];
	return 0;
}

/* A write's condition on the object it replaces; caller holds the lock. */
static int
cond_check(struct mem *m, const char *bucket, const char *key, const struct s3_cond *c)
{
	struct mobj *o = NULL;
	int rc;

	if (!c)
		return 0;
	rc = lookup(m, bucket, key, &o);
	if (rc < 0 && rc != ZC_E(ZC_NO_KEY))
		return rc;
	if (c->if_none_match && o)
		return ZC_E(ZC_PRECONDITION);
	if (!c->if_match[0])
		return 0;
	if (!o)
		return ZC_E(ZC_NO_KEY);
	if (strcmp(c->if_match, "*") != 0 && strcmp(c->if_match, o->etag) != 0)
		return ZC_E(ZC_PRECONDITION);
	return 0;
}

static int
m_get(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len, bool has_len,
      s3_info_fn on_info, s3_span_fn emit, void *arg)
{
	struct mem *m = ctx;
	struct mobj *o;
	struct s3_obj_info *info = malloc(sizeof(*info));
	int rc;

	if (!info)
		return -ENOMEM;
	uint8_t *copy = NULL;
	uint64_t n = 0;

	/* copy the range out so the (possibly slow) client write happens without the lock */
	pthread_mutex_lock(&m->lock);
	rc = lookup(m, bucket, key, &o);
	if (rc == 0) {
		fill_info(o, info);
		if (off < o->size) {
			n = o->size - off;
			if (has_len && len < n)
				n = len;
			copy = malloc(n);
			if (!copy)
				rc = -ENOMEM;
			else
				memcpy(copy, o->data + off, n);
		}
	}
	pthread_mutex_unlock(&m->lock);
	if (rc == 0)
		rc = on_info(arg, info);
	if (rc == 0 && n)
		rc = emit(arg, copy, n);
	free(copy);
	free(info);
	return rc < 0 ? rc : 0;
}

/* A pulled read: the range copied out under the lock, handed out in 64 KiB segments that
 * each hold a ref on the copy, as the rpc backend's gRPC slices do. */
struct mget {
	struct zc_ref ref;
	size_t n, at;
	uint8_t data[];
};

static void
mget_release(struct zc_ref *ref)
{
	free(ref);
}

static int
m_get_open(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len, bool has_len,
           struct s3_obj_info *info, void **stream)
{
	struct mem *m = ctx;
	struct mobj *o;
	struct mget *g = NULL;
	int rc;

	*stream = NULL;
	pthread_mutex_lock(&m->lock);
	rc = lookup(m, bucket, key, &o);
	if (rc == 0) {
		size_t n = 0;

		fill_info(o, info);
		if (off < o->size) {
			n = o->size - off;
			if (has_len && len < n)
				n = len;
			g = malloc(sizeof(*g) + n);
			if (!g) {
				rc = -ENOMEM;
			} else {
				zc_ref_init(&g->ref, mget_release);
				g->n = n;
				g->at = 0;
				memcpy(g->data, o->data + off, n);
			}
		}
	}
	pthread_mutex_unlock(&m->lock);
	*stream = g;
	return rc;
}

static int
m_get_next(void *stream, struct zc_seg *seg)
{
	struct mget *g = stream;
	size_t take = g->n - g->at < (64u << 10) ? g->n - g->at : (64u << 10);

	if (!take)
		return 0;
	seg->ptr = g->data + g->at;
	seg->len = take;
	seg->ref = &g->ref;
	zc_ref_get(&g->ref);
	g->at += take;
	return 1;
}

static void
m_get_close(void *stream)
{
	struct mget *g = stream;

	if (g)
		zc_ref_put(&g->ref);
}

static int
m_stat(void *ctx, const char *bucket, const char *key, struct s3_obj_info *out)
{
	struct mem *m = ctx;
	struct mobj *o;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = lookup(m, bucket, key, &o);
	if (rc == 0)
		fill_info(o, out);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static int
m_del(void *ctx, const char *bucket, const char *key, bool *existed)
{
	struct mem *m = ctx;
	struct mbucket *b;
	bool found = false;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	b = find_bucket(m, bucket);
	if (!b) {
		rc = ZC_E(ZC_NO_BUCKET);
	} else {
		size_t i = find_obj(b, key, &found);

		if (found) {
			obj_free(&b->objs[i]);
			memmove(&b->objs[i], &b->objs[i + 1], (b->n - i - 1) * sizeof(*b->objs));
			b->n--;
		}
	}
	pthread_mutex_unlock(&m->lock);
	*existed = found;
	return rc;
}

static int
m_list(void *ctx, const char *bucket, const char *prefix, const char *start_after,
       const char *delimiter, unsigned limit, struct s3_list_result *out)
{
	struct mem *m = ctx;
	struct mbucket *b;
	size_t pl = strlen(prefix), dl = strlen(delimiter), count = 0;
	char *last = NULL;
	int rc = 0;
	bool found;

	memset(out, 0, sizeof(*out));
	if (!limit)
		limit = 1000;
	pthread_mutex_lock(&m->lock);
	b = find_bucket(m, bucket);
	if (!b) {
		pthread_mutex_unlock(&m->lock);
		return ZC_E(ZC_NO_BUCKET);
	}
	for (size_t i = find_obj(b, start_after, &found); i < b->n && rc == 0; i++) {
		const struct mobj *o = &b->objs[i];
		const char *d;

		if (strncmp(o->key, prefix, pl) != 0) {
			if (strcmp(o->key, prefix) > 0)
				break;
			continue;
		}
		if (dl && (d = strstr(o->key + pl, delimiter))) {
			size_t cl = (size_t)(d - o->key) + dl;

			/* a common prefix already passed (start_after inside it) */
			if (strncmp(o->key, start_after, cl) <= 0 && strlen(start_after) >= cl &&
			    strncmp(o->key, start_after, cl) == 0)
				continue;
			if (last && strlen(last) == cl && strncmp(last, o->key, cl) == 0)
				continue;
			if (count == limit) {
				out->truncated = true;
				break;
			}
			free(last);
			last = strndup(o->key, cl);
			rc = last ? s3_list_result_add_prefix(out, last) : -ENOMEM;
			count++;
			continue;
		}
		if (strcmp(o->key, start_after) <= 0)
			continue;
		if (count == limit) {
			out->truncated = true;
			break;
		}
		free(last);
		last = strdup(o->key);
		rc = last ? s3_list_result_add(out, o->key, o->size, o->etag, o->mtime_ns)
		          : -ENOMEM;
		count++;
	}
	pthread_mutex_unlock(&m->lock);
	if (out->truncated && last) {
		out->next_start_after = last;
		last = NULL;
	}
	free(last);
	if (rc < 0)
		s3_list_result_fini(out);
	return rc;
}

static int
m_compose(void *ctx, const char *bucket, const char *key, const struct s3_objref *parts,
          size_t nparts, bool delete_parts, const char *etag, const char *attrs, size_t attrs_len,
          const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct mem *m = ctx;
	size_t total = 0, o = 0;
	uint8_t *data;
	int rc = 0;

	/* "xdev-*" buckets stand for another datanode: compose across them is refused */
	for (size_t i = 0; i < nparts; i++)
		if (strcmp(parts[i].bucket, bucket) != 0 &&
		    (strncmp(parts[i].bucket, "xdev-", 5) == 0 || strncmp(bucket, "xdev-", 5) == 0))
			return -EXDEV;
	pthread_mutex_lock(&m->lock);
	rc = cond_check(m, bucket, key, cond);
	if (rc < 0) {
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	for (size_t i = 0; i < nparts && rc == 0; i++) {
		struct mobj *p;

		rc = lookup(m, parts[i].bucket, parts[i].key, &p);
		if (rc == 0 && parts[i].etag && parts[i].etag[0] &&
		    strcmp(p->etag, parts[i].etag)) {
			pthread_mutex_unlock(&m->lock);
			return ZC_E(ZC_CHANGED); /* overwritten since the caller looked */
		}
		if (rc == 0)
			total += p->size;
	}
	if (rc < 0) {
		pthread_mutex_unlock(&m->lock);
		return ZC_E(ZC_NO_KEY);
	}
	data = malloc(total ? total : 1);
	if (!data) {
		pthread_mutex_unlock(&m->lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nparts; i++) {
		struct mobj *p = NULL;

		if (lookup(m, parts[i].bucket, parts[i].key, &p) < 0 || !p)
			continue;
		memcpy(data + o, p->data, p->size);
		o += p->size;
	}
	rc = store(m, bucket, key, data, total, etag, attrs, attrs_len, out);
	if (rc == 0 && delete_parts) {
		for (size_t i = 0; i < nparts; i++) {
			struct mbucket *b = find_bucket(m, parts[i].bucket);
			bool found;
			size_t k = find_obj(b, parts[i].key, &found);

			if (found) {
				obj_free(&b->objs[k]);
				memmove(&b->objs[k], &b->objs[k + 1],
				        (b->n - k - 1) * sizeof(*b->objs));
				b->n--;
			}
		}
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static int
m_bucket_create(void *ctx, const char *bucket)
{
	struct mem *m = ctx;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	if (find_bucket(m, bucket)) {
		rc = ZC_E(ZC_BUCKET_EXISTS);
	} else {
		if (m->nb == m->capb) {
			size_t nc = m->capb ? m->capb * 2 : 8;
			void *p = realloc(m->buckets, nc * sizeof(*m->buckets));

			if (!p) {
				pthread_mutex_unlock(&m->lock);
				return -ENOMEM;
			}
			m->buckets = p;
			m->capb = nc;
		}
		memset(&m->buckets[m->nb], 0, sizeof(m->buckets[0]));
		snprintf(m->buckets[m->nb].name, sizeof(m->buckets[0].name), "%s", bucket);
		m->buckets[m->nb].ctime_ns = now_ns();
		m->nb++;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static int
m_bucket_delete(void *ctx, const char *bucket)
{
	struct mem *m = ctx;
	struct mbucket *b;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	b = find_bucket(m, bucket);
	if (!b) {
		rc = ZC_E(ZC_NO_BUCKET);
	} else if (b->n) {
		rc = ZC_E(ZC_BUCKET_NOT_EMPTY);
	} else {
		free(b->objs);
		*b = m->buckets[--m->nb];
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static int
m_bucket_head(void *ctx, const char *bucket, struct s3_bucket_info *out)
{
	struct mem *m = ctx;
	struct mbucket *b;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	b = find_bucket(m, bucket);
	if (!b) {
		rc = ZC_E(ZC_NO_BUCKET);
	} else {
		snprintf(out->name, sizeof(out->name), "%s", b->name);
		out->ctime_ns = b->ctime_ns;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static int
bcmp_name(const void *a, const void *b)
{
	return strcmp(((const struct s3_bucket_info *)a)->name,
	              ((const struct s3_bucket_info *)b)->name);
}

static int
m_bucket_list(void *ctx, struct s3_bucket_info *out, size_t cap)
{
	struct mem *m = ctx;
	size_t n = 0;

	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nb && n < cap; i++, n++) {
		snprintf(out[n].name, sizeof(out[n].name), "%s", m->buckets[i].name);
		out[n].ctime_ns = m->buckets[i].ctime_ns;
	}
	pthread_mutex_unlock(&m->lock);
	qsort(out, n, sizeof(*out), bcmp_name);
	return (int)n;
}

struct s3_backend *
mem_backend_create(void)
{
	struct mem *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	pthread_mutex_init(&m->lock, NULL);
	m->be = (struct s3_backend){
		.ctx = m,
		.put_open = m_put_open,
		.put_write = m_put_write,
		.put_write_crc = m_put_write_crc,
		.put_commit = m_put_commit,
		.put_abort = m_put_abort,
		.get = m_get,
		.get_open = m_get_open,
		.get_next = m_get_next,
		.get_close = m_get_close,
		.stat = m_stat,
		.del = m_del,
		.list = m_list,
		.compose = m_compose,
		.bucket_create = m_bucket_create,
		.bucket_delete = m_bucket_delete,
		.bucket_head = m_bucket_head,
		.bucket_list = m_bucket_list,
	};
	return &m->be;
}

size_t
mem_backend_count(const struct s3_backend *be)
{
	struct mem *m = be->ctx;
	size_t n = 0;

	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nb; i++)
		n += m->buckets[i].n;
	pthread_mutex_unlock(&m->lock);
	return n;
}

void
mem_backend_destroy(struct s3_backend *be)
{
	struct mem *m;

	if (!be)
		return;
	m = be->ctx;
	for (size_t i = 0; i < m->nb; i++) {
		for (size_t k = 0; k < m->buckets[i].n; k++)
			obj_free(&m->buckets[i].objs[k]);
		free(m->buckets[i].objs);
	}
	free(m->buckets);
	pthread_mutex_destroy(&m->lock);
	free(m);
}
