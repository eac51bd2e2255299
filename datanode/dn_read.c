/*
 * Reads: stripe by stripe, each needed data cell is read whole, checked chunk by chunk
 * against its CRC32C, and handed out in a refcounted buffer the caller may keep. A cell
 * that is missing, on a failed drive, unreadable or fails a CRC makes the stripe degraded:
 * any k good cells rebuild it (ec_codec_decode).
 *
 * Phase 1 reads with pread on the caller's thread; moving reads onto the drive rings is
 * phase 2 work.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dn_internal.h"

struct rbuf {
	struct zc_ref ref;
	uint8_t data[];
};

static void
rbuf_release(struct zc_ref *ref)
{
	free(ref);
}

/* Read cell c of a stripe into buf (cell bytes, zero padded) and verify its chunks. */
static int
read_cell(struct dn_store *s, const struct dn_extent *e, uint32_t group, uint32_t stripe,
	  unsigned c, uint8_t *buf)
{
	const struct dn_geom *g = &e->g;
	uint32_t len = c < g->k ? dn_geom_cell_len(g, group, stripe, c) : g->cell;
	unsigned d = e->groups[group].drives[c];
	const uint32_t *crcs;
	char path[PATH_MAX];
	uint64_t off = (uint64_t)stripe * g->cell;
	ssize_t got;
	int fd, err = 0;

	memset(buf + len, 0, g->cell - len);
	if (len == 0)
		return 0;
	if ((e->groups[group].missing & (1u << c)) || d >= s->ndrives ||
	    !dn_drive_ok(&s->drives[d]))
		return -EIO;
	err = dn_layout_path(s->drives[d].root, e->id, group, c, path, sizeof(path));
	if (err)
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = pread(fd, buf, len, (off_t)off);
	close(fd);
	if (got != (ssize_t)len)
		return got < 0 ? -errno : -EIO;
	crcs = dn_extent_crcs(e, group, c);
	for (uint32_t at = 0; at < len; at += g->chunk) {
		uint32_t n = len - at < g->chunk ? len - at : g->chunk;
		size_t idx = (size_t)(off + at) / g->chunk;

		if (ec_crc32c(0, buf + at, n) != crcs[idx]) {
			ZC_WARN("read", "id=%llx group=%u cell=%u chunk=%zu crc mismatch",
				(unsigned long long)e->id, group, c, idx);
			return -EBADMSG;
		}
	}
	return 0;
}

int
dn_read_stripe(struct dn_store *s, const struct dn_extent *e, uint32_t group, uint32_t stripe,
	       uint32_t need, uint8_t **cells, bool *degraded)
{
	unsigned n = e->g.k + e->g.m, good = 0;
	uint32_t erased = 0, tried = 0, bad;
	struct ec_codec *codec;
	int err, last = -EIO;

	for (unsigned c = 0; c < n; c++) {
		if (!(need & (1u << c)))
			continue;
		tried |= 1u << c;
		err = read_cell(s, e, group, stripe, c, cells[c]);
		if (err) {
			erased |= 1u << c;
			last = err;
		} else {
			good++;
		}
	}
	if (!erased)
		return 0;
	*degraded = true;
	bad = erased;
	/* Gather more cells until k are good, then rebuild the rest. */
	for (unsigned c = 0; c < n && good < e->g.k; c++) {
		if (tried & (1u << c))
			continue;
		tried |= 1u << c;
		err = read_cell(s, e, group, stripe, c, cells[c]);
		if (err) {
			last = err;
			bad |= 1u << c;
		} else {
			good++;
		}
	}
	if (good < e->g.k)
		return last;
	/* Every cell not read good (failed or never tried) is rebuilt: n - good <= m. */
	erased = 0;
	for (unsigned c = 0; c < n; c++)
		if (!(tried & (1u << c)) || (bad & (1u << c)))
			erased |= 1u << c;
	err = dn_store_codec(s, e->g.k, e->g.m, &codec);
	if (err)
		return err;
	err = ec_codec_decode(codec, e->g.cell, cells, erased);
	if (err)
		return err;
	return 0;
}

static int
read_extent(struct dn_store *s, const struct dn_extent *e, uint64_t from, uint64_t to,
	    uint64_t base, dn_read_cb cb, void *arg, bool *degraded)
{
	const struct dn_geom *g = &e->g;
	uint64_t sb = dn_geom_stripe_bytes(g), gb = dn_geom_group_bytes(g);
	unsigned n = g->k + g->m;
	uint64_t at = from - from % sb;

	if (from >= to)
		return 0;
	for (; at < to; at += sb) {
		uint32_t group = (uint32_t)(at / gb), stripe = (uint32_t)(at % gb / sb);
		uint64_t lo = from > at ? from - at : 0, hi = to - at < sb ? to - at : sb;
		uint32_t need = 0;
		uint8_t *cells[EC_MAX_CELLS];
		struct rbuf *b = malloc(sizeof(*b) + (size_t)n * g->cell);
		struct zc_seg seg;
		int err;

		if (!b)
			return -ENOMEM;
		zc_ref_init(&b->ref, rbuf_release);
		for (unsigned c = 0; c < n; c++)
			cells[c] = b->data + (size_t)c * g->cell;
		for (unsigned c = (unsigned)(lo / g->cell); c < g->k && (uint64_t)c * g->cell < hi;
		     c++)
			need |= 1u << c;
		err = dn_read_stripe(s, e, group, stripe, need, cells, degraded);
		if (!err) {
			/* Data cells sit back to back: the stripe's range is one span. */
			seg.ptr = b->data + lo;
			seg.len = hi - lo;
			seg.ref = &b->ref;
			err = cb(arg, base + at + lo, &seg);
		}
		zc_ref_put(&b->ref);
		if (err)
			return err;
	}
	return 0;
}

int
dn_read(struct dn_store *s, const char *bucket, const char *key, uint64_t offset,
	uint64_t length, bool has_length, struct dn_object_info *info, dn_read_cb cb, void *arg)
{
	struct dn_obj o;
	uint64_t base = 0, end;
	bool degraded = false;
	int err;

	if (!bucket || !key || !cb)
		return -EINVAL;
	err = dn_meta_get_obj(s->meta, bucket, key, &o);
	if (err)
		return err;
	if (offset > o.size || (has_length && length > o.size - offset)) {
		err = -EINVAL;
		goto fini;
	}
	end = has_length ? offset + length : o.size;
	if (info) {
		memset(info, 0, sizeof(*info));
		info->key = dn_strdup(key);
		info->size = o.size;
		info->etag = o.etag;
		info->mtime_ns = o.mtime_ns;
		info->crc32c = o.crc32c;
		info->k = o.k;
		info->m = o.m;
		info->attrs = o.attrs;
		info->nattrs = o.nattrs;
		o.etag = NULL;
		o.attrs = NULL;
		o.nattrs = 0;
	}
	for (size_t i = 0; i < o.npieces && !err && base < end; i++) {
		uint64_t psz = o.pieces[i].size;
		struct dn_extent e;

		if (base + psz > offset) {
			uint64_t from = offset > base ? offset - base : 0;
			uint64_t to = end - base < psz ? end - base : psz;

			err = dn_meta_get_extent(s->meta, o.pieces[i].ext_id, &e);
			if (!err) {
				err = read_extent(s, &e, from, to, base, cb, arg, &degraded);
				dn_extent_free(&e);
			}
		}
		base += psz;
	}
	if (degraded)
		atomic_fetch_add(&s->degraded_reads, 1);
	if (err && info)
		dn_object_info_fini(info);
fini:
	dn_obj_fini(&o);
	return err;
}
