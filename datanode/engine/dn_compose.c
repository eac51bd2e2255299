/* Compose: one object made of other objects' extents, in one metadata transaction (the
 * multipart Complete's datanode half); its fault hook for test builds. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_internal.h"

static int compose_once(struct dn_store *s, const char *bucket, const char *key,
                        const char *const *part_buckets, const char *const *parts,
                        const char *const *part_etags, size_t nparts, bool delete_parts,
                        const char *etag, const struct dn_attr *attrs, size_t nattrs,
                        const struct dn_cond *cond, struct dn_write_result *res);

int
dn_compose(struct dn_store *s, const char *bucket, const char *key, const char *const *part_buckets,
           const char *const *parts, size_t nparts, bool delete_parts, const char *etag,
           const struct dn_attr *attrs, size_t nattrs, struct dn_write_result *res)
{
	return dn_compose_if(s, bucket, key, part_buckets, parts, NULL, nparts, delete_parts, etag,
	                     attrs, nattrs, NULL, res);
}

int
dn_compose_if(struct dn_store *s, const char *bucket, const char *key,
              const char *const *part_buckets, const char *const *parts,
              const char *const *part_etags, size_t nparts, bool delete_parts, const char *etag,
              const struct dn_attr *attrs, size_t nattrs, const struct dn_cond *cond,
              struct dn_write_result *res)
{
	int err = -ESTALE;

	/* A part overwritten between reading it and the commit: read the parts again. */
	for (int i = 0; i < 5 && err == -ESTALE; i++)
		err = compose_once(s, bucket, key, part_buckets, parts, part_etags, nparts,
		                   delete_parts, etag, attrs, nattrs, cond, res);
	return err == -ESTALE ? ZC_E(ZC_CHANGED) : err;
}

int
dn_compose_parts(struct dn_store *s, const char *bucket, const char *const *part_buckets,
                 const char *const *parts, const char *const *part_etags, size_t nparts,
                 struct dn_obj *o)
{
	struct dn_obj p;
	size_t cap = 0;
	int err = 0;

	memset(o, 0, sizeof(*o));
	o->k = s->o.k;
	o->m = s->o.m;
	/* Parts are read outside the write transaction; a part changed meanwhile is caught
	 * because its extents are re-referenced inside it (a freed extent fails there). */
	for (size_t i = 0; i < nparts && !err; i++) {
		const char *pb = part_buckets ? part_buckets[i] : NULL;

		err = dn_meta_get_obj(s->meta, pb && pb[0] ? pb : bucket, parts[i], &p);
		if (err)
			break;
		/* The pieces read are this version's: a pinned ETag checked here holds for
		 * exactly the data composed (a later overwrite is caught as -ESTALE below). */
		if (part_etags && part_etags[i] && part_etags[i][0] &&
		    (!p.etag || strcmp(p.etag, part_etags[i]) != 0)) {
			dn_obj_fini(&p);
			err = ZC_E(ZC_CHANGED);
			break;
		}
		if (o->npieces + p.npieces > cap) {
			struct dn_piece *nv;

			cap = (o->npieces + p.npieces) * 2;
			nv = realloc(o->pieces, cap * sizeof(*nv));
			if (!nv) {
				dn_obj_fini(&p);
				err = -ENOMEM;
				break;
			}
			o->pieces = nv;
		}
		memcpy(o->pieces + o->npieces, p.pieces, p.npieces * sizeof(*p.pieces));
		o->npieces += p.npieces;
		o->crc32c = i == 0 ? p.crc32c : zc_crc32c_combine(o->crc32c, p.crc32c, p.size);
		o->size += p.size;
		if (i == 0) {
			o->k = p.k;
			o->m = p.m;
		}
		dn_obj_fini(&p);
	}
	if (err) {
		free(o->pieces);
		o->pieces = NULL;
	}
	return err;
}

static int
compose_once(struct dn_store *s, const char *bucket, const char *key,
             const char *const *part_buckets, const char *const *parts,
             const char *const *part_etags, size_t nparts, bool delete_parts, const char *etag,
             const struct dn_attr *attrs, size_t nattrs, const struct dn_cond *cond,
             struct dn_write_result *res)
{
	struct dn_obj o = { 0 };
	struct dn_extent *freed = NULL;
	struct timespec ts;
	size_t nfreed = 0;
	int err;

	if (!bucket || !key || (nparts && !parts))
		return -EINVAL;
	err = dn_compose_parts(s, bucket, part_buckets, parts, part_etags, nparts, &o);
	if (err)
		return err;
	(void)ZC_FAULT(ZC_FP_DN_COMPOSE, NULL, 0); /* test builds: call, pause, delay */
	clock_gettime(CLOCK_REALTIME, &ts);
	o.mtime_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	o.etag = (char *)(etag ? etag : "");
	o.attrs = (struct dn_attr *)attrs;
	o.nattrs = nattrs;
	err = dn_meta_put_obj_if(s->meta, bucket, key, &o, NULL, delete_parts ? part_buckets : NULL,
	                         delete_parts ? parts : NULL, delete_parts ? nparts : 0, cond,
	                         &freed, &nfreed);
	free(o.pieces);
	if (err)
		return err;
	dn_extents_release(s, freed, nfreed);
	atomic_fetch_add(&s->objects_committed, 1);
	if (res) {
		res->size = o.size;
		res->crc32c = o.crc32c;
		res->etag = etag;
		res->mtime_ns = o.mtime_ns;
	}
	return 0;
}
