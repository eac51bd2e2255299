/* s3_place: which datanode owns an object (zc_place's rendezvous hash), and merging listings
 * across datanodes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "s3_place_internal.h"
#include "zc_place.h"

uint64_t
s3_obj_hash(const char *bucket, const char *key)
{
	uint64_t h = zc_place_hash(ZC_PLACE_SEED, bucket, strlen(bucket) + 1);

	return zc_place_hash(h, key, strlen(key));
}

/* Multipart parts ("p/<upload-id>/<n>" in the reserved bucket) carry their target's hash
 * in the last 16 hex digits of the upload id: they land where Compose will need them. */
static bool
part_hash(const char *bucket, const char *key, uint64_t *h)
{
	const char *id;
	uint64_t v = 0;

	if (strcmp(bucket, S3_RESERVED_BUCKET) != 0 || strncmp(key, "p/", 2) != 0)
		return false;
	id = key + 2;
	if (strlen(id) < 32 || id[32] != '/')
		return false;
	for (int i = 16; i < 32; i++) {
		char c = id[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (d < 0)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*h = v;
	return true;
}

unsigned
s3_place(const char *const *nodes, unsigned n, const char *bucket, const char *key)
{
	uint64_t obj;

	if (!part_hash(bucket, key, &obj))
		obj = s3_obj_hash(bucket, key);
	return zc_place_first(obj, nodes, n);
}

struct cursor {
	const struct s3_list_result *r;
	size_t e, p; /* next entry, next prefix */
};

/* The smaller of a cursor's next entry and next prefix; NULL when exhausted. */
static const char *
head(const struct cursor *c, bool *is_prefix)
{
	const char *ek = c->e < c->r->n ? c->r->entries[c->e].key : NULL;
	const char *pk = c->p < c->r->nprefix ? c->r->prefixes[c->p] : NULL;

	if (ek && (!pk || strcmp(ek, pk) < 0)) {
		*is_prefix = false;
		return ek;
	}
	*is_prefix = pk != NULL;
	return pk;
}

static const char *
last_item(const struct s3_list_result *r)
{
	const char *ek = r->n ? r->entries[r->n - 1].key : NULL;
	const char *pk = r->nprefix ? r->prefixes[r->nprefix - 1] : NULL;

	if (!ek)
		return pk;
	if (!pk)
		return ek;
	return strcmp(ek, pk) > 0 ? ek : pk;
}

int
s3_list_merge(const struct s3_list_result *const *parts, unsigned n, unsigned limit,
              struct s3_list_result *out)
{
	struct cursor *cur = calloc(n ? n : 1, sizeof(*cur));
	const char *bound = NULL, *last = NULL;
	unsigned count = 0;
	bool more = false;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!cur)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		cur[i].r = parts[i];
		if (parts[i]->truncated) {
			const char *l = last_item(parts[i]);

			if (l && (!bound || strcmp(l, bound) < 0))
				bound = l;
		}
	}
	for (;;) {
		const char *best = NULL;
		bool best_prefix = false;

		for (unsigned i = 0; i < n; i++) {
			bool isp;
			const char *h = head(&cur[i], &isp);

			if (h && (!best || strcmp(h, best) < 0)) {
				best = h;
				best_prefix = isp;
			}
		}
		if (!best)
			break;
		if ((bound && strcmp(best, bound) > 0) || count == limit) {
			more = true;
			break;
		}
		/* take it, and skip the same name on every node (common prefixes repeat) */
		for (unsigned i = 0; i < n; i++) {
			bool isp;
			const char *h = head(&cur[i], &isp);

			if (h && strcmp(h, best) == 0) {
				if (isp)
					cur[i].p++;
				else
					cur[i].e++;
			}
		}
		if (best_prefix) {
			rc = s3_list_result_add_prefix(out, best);
		} else {
			const struct s3_list_entry *e = NULL;

			for (unsigned i = 0; i < n && !e; i++)
				if (cur[i].e &&
				    strcmp(parts[i]->entries[cur[i].e - 1].key, best) == 0)
					e = &parts[i]->entries[cur[i].e - 1];
			rc = s3_list_result_add(out, best, e ? e->size : 0, e ? e->etag : "",
			                        e ? e->mtime_ns : 0);
		}
		if (rc < 0)
			break;
		last = best;
		count++;
	}
	if (rc == 0 && !more && bound)
		more = true; /* a truncated node always leaves something to ask for */
	if (rc == 0 && more && last) {
		out->truncated = true;
		out->next_start_after = strdup(last);
		if (!out->next_start_after)
			rc = -ENOMEM;
	}
	free(cur);
	if (rc < 0)
		s3_list_result_fini(out);
	return rc;
}
