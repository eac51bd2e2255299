/*
 * dn_meta_cell: the cells table (cluster mode). Key: big-endian extent id, group, cell
 * (16 bytes, so a cursor walks an extent's cells together). Value, little-endian:
 * version, flags (bit 0 pending, bit 1 retired), drive, k, m, cell size, stripes per
 * group, chunk size, length (u64), created (u64, CLOCK_REALTIME ns), bucket and key (u32
 * length + bytes), the number of chunk CRCs and the CRCs, then touched (u64, CLOCK_REALTIME
 * ns). An entry written before touched existed ends at the CRCs: it reads as touched 0, so
 * old stores open as they are (same version).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dn_meta_internal.h"

#define FLAG_PENDING 1u
#define FLAG_RETIRED 2u

void
dn_cell_rec_fini(struct dn_cell_rec *r)
{
	if (!r)
		return;
	free(r->bucket);
	free(r->key);
	free(r->crcs);
	memset(r, 0, sizeof(*r));
}

void
dn_cell_rec_take_info(struct dn_cell_rec *r, struct dn_cell_id id, struct dn_cell_info *info)
{
	*info = (struct dn_cell_info){ .id = id,
		                       .drive = r->drive,
		                       .length = r->length,
		                       .created_ns = r->created_ns,
		                       .touched_ns = r->touched_ns,
		                       .pending = r->pending,
		                       .retired = r->retired,
		                       .k = r->k,
		                       .m = r->m,
		                       .cell_size = r->cell_size,
		                       .stripes_per_group = r->spg,
		                       .chunk_size = r->chunk,
		                       .bucket = r->bucket,
		                       .key = r->key };
	free(r->crcs);
	*r = (struct dn_cell_rec){ 0 };
}

static void
cell_key(struct dn_cell_id id, uint8_t *buf, MDB_val *k)
{
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(id.extent >> (56 - 8 * i));
	for (int i = 0; i < 4; i++) {
		buf[8 + i] = (uint8_t)(id.group >> (24 - 8 * i));
		buf[12 + i] = (uint8_t)(id.cell >> (24 - 8 * i));
	}
	k->mv_data = buf;
	k->mv_size = 16;
}

static struct dn_cell_id
cell_id_of(const MDB_val *k)
{
	const uint8_t *p = k->mv_data;
	struct dn_cell_id id = { 0, 0, 0 };

	for (int i = 0; i < 8; i++)
		id.extent = id.extent << 8 | p[i];
	for (int i = 0; i < 4; i++) {
		id.group = id.group << 8 | p[8 + i];
		id.cell = id.cell << 8 | p[12 + i];
	}
	return id;
}

static void
wbuf_str(struct wbuf *b, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);

	dn_wbuf_u32(b, n);
	dn_wbuf_bytes(b, s, n);
}

static int
rec_encode(const struct dn_cell_rec *r, struct wbuf *b)
{
	dn_wbuf_u32(b, DN_CELL_VER);
	dn_wbuf_u32(b, (r->pending ? FLAG_PENDING : 0) | (r->retired ? FLAG_RETIRED : 0));
	dn_wbuf_u32(b, r->drive);
	dn_wbuf_u32(b, r->k);
	dn_wbuf_u32(b, r->m);
	dn_wbuf_u32(b, r->cell_size);
	dn_wbuf_u32(b, r->spg);
	dn_wbuf_u32(b, r->chunk);
	dn_wbuf_bytes(b, &r->length, 8);
	dn_wbuf_bytes(b, &r->created_ns, 8);
	wbuf_str(b, r->bucket);
	wbuf_str(b, r->key);
	dn_wbuf_u32(b, r->ncrc);
	dn_wbuf_bytes(b, r->crcs, (size_t)r->ncrc * 4);
	dn_wbuf_bytes(b, &r->touched_ns, 8);
	return b->err;
}

static char *
rbuf_str(struct rbuf *b, size_t max)
{
	uint32_t n = dn_rbuf_u32(b);
	const uint8_t *p;
	char *s;

	if (b->err || n > max) {
		b->err = -EBADMSG;
		return NULL;
	}
	p = dn_rbuf_span(b, n);
	if (!p)
		return NULL;
	s = malloc(n + 1);
	if (!s) {
		b->err = -ENOMEM;
		return NULL;
	}
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}

/* Decode a value; with crcs false the CRCs are skipped (listings need none). */
static int
rec_decode(const MDB_val *v, struct dn_cell_rec *r, bool crcs)
{
	struct rbuf b = { v->mv_data, v->mv_size, 0, 0 };
	const uint8_t *p;
	uint32_t flags;

	memset(r, 0, sizeof(*r));
	if (dn_rbuf_u32(&b) != DN_CELL_VER)
		return -EBADMSG;
	flags = dn_rbuf_u32(&b);
	r->pending = flags & FLAG_PENDING;
	r->retired = flags & FLAG_RETIRED;
	r->drive = dn_rbuf_u32(&b);
	r->k = dn_rbuf_u32(&b);
	r->m = dn_rbuf_u32(&b);
	r->cell_size = dn_rbuf_u32(&b);
	r->spg = dn_rbuf_u32(&b);
	r->chunk = dn_rbuf_u32(&b);
	p = dn_rbuf_span(&b, 16);
	if (p) {
		memcpy(&r->length, p, 8);
		memcpy(&r->created_ns, p + 8, 8);
	}
	r->bucket = rbuf_str(&b, DN_CELL_BUCKET_MAX);
	r->key = rbuf_str(&b, DN_CELL_KEY_MAX);
	r->ncrc = dn_rbuf_u32(&b);
	if (!b.err && (r->chunk == 0 || r->ncrc != zc_chunk_count(r->length, r->chunk)))
		b.err = -EBADMSG;
	p = dn_rbuf_span(&b, (size_t)r->ncrc * 4);
	if (p && crcs && r->ncrc) {
		r->crcs = malloc((size_t)r->ncrc * 4);
		if (r->crcs)
			memcpy(r->crcs, p, (size_t)r->ncrc * 4);
		else
			b.err = -ENOMEM;
	}
	if (!b.err && b.len - b.at >= 8) {
		p = dn_rbuf_span(&b, 8);
		if (p)
			memcpy(&r->touched_ns, p, 8);
	}
	if (b.err)
		dn_cell_rec_fini(r);
	return b.err;
}

static int
cell_get(struct dn_meta *m, struct dn_cell_id id, struct dn_cell_rec *rec)
{
	MDB_txn *txn;
	struct rep *r;
	uint8_t kb[16];
	MDB_val k, v;
	int err = dn_meta_read_txn(m, &txn, &r);

	if (err)
		return err;
	cell_key(id, kb, &k);
	err = dn_meta_mdb_err(mdb_get(txn, r->cells, &k, &v));
	if (!err && rec)
		err = rec_decode(&v, rec, true);
	dn_meta_read_end(m, txn);
	return err;
}

int
dn_meta_cell_exists(struct dn_meta *m, struct dn_cell_id id)
{
	int err = cell_get(m, id, NULL);

	return zc_err_is(err, ZC_NO_KEY) ? 0 : err == 0 ? 1 : err;
}

int
dn_meta_cell_get(struct dn_meta *m, struct dn_cell_id id, struct dn_cell_rec *rec)
{
	return cell_get(m, id, rec);
}

struct put_batch {
	struct dn_meta_cell_put *v;
	size_t n;
	MDB_val *vals;
};

static int
put_txn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct put_batch *pb = arg;

	for (size_t i = 0; i < pb->n; i++) {
		uint8_t kb[16];
		MDB_val k, v = pb->vals[i];
		int rc;

		if (pb->vals[i].mv_size == 0)
			continue; /* could not be encoded: err set already */
		cell_key(pb->v[i].id, kb, &k);
		rc = mdb_put(txn, r->cells, &k, &v, MDB_NOOVERWRITE);
		if (rc == MDB_KEYEXIST) {
			if (first)
				pb->v[i].err = ZC_E(ZC_CELL_EXISTS);
			continue;
		}
		if (rc)
			return dn_meta_mdb_err(rc);
	}
	return 0;
}

int
dn_meta_cell_put_batch(struct dn_meta *m, struct dn_meta_cell_put *v, size_t n)
{
	struct wbuf *bufs = calloc(n, sizeof(*bufs));
	struct put_batch pb = { v, n, calloc(n, sizeof(MDB_val)) };
	int err = 0;

	if (!bufs || !pb.vals) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		v[i].err = rec_encode(v[i].rec, &bufs[i]);
		if (!v[i].err)
			pb.vals[i] = (MDB_val){ bufs[i].len, bufs[i].p };
	}
	err = dn_meta_write(m, put_txn, &pb);
out:
	for (size_t i = 0; bufs && i < n; i++)
		free(bufs[i].p);
	free(bufs);
	free(pb.vals);
	return err;
}

struct one_arg {
	struct dn_cell_id id;
	uint32_t drive;
	int found;
};

static int
commit_txn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct one_arg *a = arg;
	uint8_t kb[16];
	MDB_val k, v;
	uint8_t *copy;
	int rc;

	(void)first;
	cell_key(a->id, kb, &k);
	rc = mdb_get(txn, r->cells, &k, &v);
	if (rc)
		return dn_meta_mdb_err(rc);
	if (v.mv_size < 8)
		return -EBADMSG;
	/* The flags word sits at a fixed place (little-endian): rewrite the value with the
	 * pending bit cleared, the others kept. */
	copy = malloc(v.mv_size);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, v.mv_data, v.mv_size);
	copy[4] &= (uint8_t)~FLAG_PENDING;
	v.mv_data = copy;
	rc = mdb_put(txn, r->cells, &k, &v, 0);
	free(copy);
	return dn_meta_mdb_err(rc);
}

int
dn_meta_cell_commit(struct dn_meta *m, struct dn_cell_id id)
{
	struct one_arg a = { id, 0, 0 };
	struct dn_cell_rec rec;
	int err = cell_get(m, id, &rec);

	if (err)
		return err;
	if (!rec.pending) { /* a repeated commit: nothing to write, no sync */
		dn_cell_rec_fini(&rec);
		return 0;
	}
	dn_cell_rec_fini(&rec);
	return dn_meta_write(m, commit_txn, &a);
}

static int
del_txn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct one_arg *a = arg;
	struct dn_cell_rec rec;
	uint8_t kb[16];
	MDB_val k, v;
	int rc, err;

	cell_key(a->id, kb, &k);
	rc = mdb_get(txn, r->cells, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return dn_meta_mdb_err(rc);
	if (first) {
		err = rec_decode(&v, &rec, false);
		a->drive = err ? UINT32_MAX : rec.drive;
		dn_cell_rec_fini(&rec);
		a->found = 1;
	}
	return dn_meta_mdb_err(mdb_del(txn, r->cells, &k, NULL));
}

int
dn_meta_cell_del(struct dn_meta *m, struct dn_cell_id id, uint32_t *drive)
{
	struct one_arg a = { id, UINT32_MAX, 0 };
	int err;

	if (dn_meta_cell_exists(m, id) == 0)
		return 0; /* DeleteCells repeats: a missing cell costs no write */
	err = dn_meta_write(m, del_txn, &a);
	if (err)
		return err;
	*drive = a.drive;
	return a.found;
}

struct if_arg {
	const struct dn_cell_info *expect;
	uint32_t drive;
	int found;
};

static int
del_if_txn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct if_arg *a = arg;
	struct dn_cell_rec rec;
	uint8_t kb[16];
	MDB_val k, v;
	bool same;
	int rc, err;

	cell_key(a->expect->id, kb, &k);
	rc = mdb_get(txn, r->cells, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return dn_meta_mdb_err(rc);
	err = rec_decode(&v, &rec, false);
	if (err)
		return err;
	same = rec.created_ns == a->expect->created_ns && rec.touched_ns == a->expect->touched_ns &&
	       rec.pending == a->expect->pending && rec.retired == a->expect->retired;
	if (first) {
		a->drive = rec.drive;
		a->found = same;
	}
	dn_cell_rec_fini(&rec);
	/* Each replica decides alone: they hold the same entry, so they agree. */
	if (!same)
		return 0;
	return dn_meta_mdb_err(mdb_del(txn, r->cells, &k, NULL));
}

int
dn_meta_cell_del_if(struct dn_meta *m, const struct dn_cell_info *expect, uint32_t *drive)
{
	struct if_arg a = { expect, UINT32_MAX, 0 };
	int err = dn_meta_write(m, del_if_txn, &a);

	if (err)
		return err;
	*drive = a.drive;
	return a.found;
}

struct touch_arg {
	struct dn_cell_id id;
	bool retire;
	uint64_t now_ns;
	int changed;
};

static int
touch_txn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct touch_arg *a = arg;
	struct dn_cell_rec rec;
	struct wbuf b = { 0 };
	uint8_t kb[16];
	MDB_val k, v;
	int rc, err;

	cell_key(a->id, kb, &k);
	rc = mdb_get(txn, r->cells, &k, &v);
	if (rc)
		return dn_meta_mdb_err(rc);
	err = rec_decode(&v, &rec, true);
	if (err)
		return err;
	if (a->retire && rec.retired) {
		dn_cell_rec_fini(&rec);
		return 0; /* retired already: its time stays the first one */
	}
	rec.retired |= a->retire;
	rec.touched_ns = a->now_ns;
	err = rec_encode(&rec, &b);
	dn_cell_rec_fini(&rec);
	if (!err) {
		v = (MDB_val){ b.len, b.p };
		err = dn_meta_mdb_err(mdb_put(txn, r->cells, &k, &v, 0));
	}
	free(b.p);
	if (!err && first)
		a->changed = 1;
	return err;
}

int
dn_meta_cell_touch(struct dn_meta *m, struct dn_cell_id id, bool retire, uint64_t now_ns)
{
	struct touch_arg a = { id, retire, now_ns, 0 };
	int err = dn_meta_write(m, touch_txn, &a);

	return err ? err : a.changed;
}

struct touch_ext_arg {
	uint64_t extent, now_ns;
	int changed;
};

static int
touch_ext_txn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct touch_ext_arg *a = arg;
	struct dn_cell_id from = { a->extent, 0, 0 };
	uint8_t kb[16];
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, err = 0, changed = 0;

	cell_key(from, kb, &k);
	rc = mdb_cursor_open(txn, r->cells, &cur);
	if (rc)
		return dn_meta_mdb_err(rc);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0 && !err;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct dn_cell_rec rec;
		struct wbuf b = { 0 };
		MDB_val nv;

		if (k.mv_size != 16 || memcmp(k.mv_data, kb, 8) != 0)
			break; /* past the extent's cells */
		if (rec_decode(&v, &rec, true))
			continue;
		if (rec.retired) {
			rec.touched_ns = a->now_ns;
			err = rec_encode(&rec, &b);
			if (!err) {
				nv = (MDB_val){ b.len, b.p };
				err = dn_meta_mdb_err(mdb_cursor_put(cur, &k, &nv, MDB_CURRENT));
			}
			free(b.p);
			changed++;
		}
		dn_cell_rec_fini(&rec);
	}
	if (!err && rc && rc != MDB_NOTFOUND)
		err = dn_meta_mdb_err(rc);
	mdb_cursor_close(cur);
	if (first)
		a->changed = changed;
	return err;
}

int
dn_meta_cell_touch_retired(struct dn_meta *m, uint64_t extent, uint64_t now_ns)
{
	struct touch_ext_arg a = { extent, now_ns, 0 };
	int err = dn_meta_write(m, touch_ext_txn, &a);

	return err ? err : a.changed;
}

void
dn_cell_info_fini(struct dn_cell_info *info)
{
	if (!info)
		return;
	free(info->bucket);
	free(info->key);
	memset(info, 0, sizeof(*info));
}

void
dn_cell_list_free(struct dn_cell_info *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		dn_cell_info_fini(&v[i]);
	free(v);
}

/* Does rec belong to the listing? A pending cell's age runs from its last touch (the
 * coordinator refreshes the cells of a write in progress), or its creation if later. */
static bool
list_wants(const struct dn_cell_rec *rec, enum dn_meta_cell_which which, uint64_t than_ns)
{
	uint64_t last = rec->touched_ns > rec->created_ns ? rec->touched_ns : rec->created_ns;

	switch (which) {
	case DN_META_CELLS_PENDING:
		return rec->pending && !rec->retired && last < than_ns;
	case DN_META_CELLS_RETIRED:
		/* the retirement is a touch: its age runs from there, or the last read */
		return rec->retired && rec->touched_ns < than_ns;
	default:
		return true;
	}
}

int
dn_meta_cell_list(struct dn_meta *m, const struct dn_cell_id *after, enum dn_meta_cell_which which,
                  uint64_t than_ns, size_t limit, struct dn_cell_info **out, size_t *n)
{
	uint8_t kb[16];
	bool skip_after = false;
	struct dn_cell_info *v = NULL;
	size_t nv = 0, cap = 0;
	MDB_cursor *cur;
	MDB_txn *txn;
	struct rep *r;
	MDB_val k, val;
	int err = dn_meta_read_txn(m, &txn, &r), rc;

	if (err)
		return err;
	rc = mdb_cursor_open(txn, r->cells, &cur);
	if (rc) {
		err = dn_meta_mdb_err(rc);
		goto end;
	}
	if (after) {
		cell_key(*after, kb, &k);
		skip_after = true;
		rc = mdb_cursor_get(cur, &k, &val, MDB_SET_RANGE);
	} else {
		rc = mdb_cursor_get(cur, &k, &val, MDB_FIRST);
	}
	for (; rc == 0 && (!limit || nv < limit); rc = mdb_cursor_get(cur, &k, &val, MDB_NEXT)) {
		struct dn_cell_rec rec;

		if (skip_after) {
			skip_after = false;
			if (k.mv_size == 16 && memcmp(k.mv_data, kb, 16) == 0)
				continue;
		}
		if (k.mv_size != 16 || rec_decode(&val, &rec, false)) {
			ZC_WARN("cell", "unreadable cell entry skipped");
			continue;
		}
		if (!list_wants(&rec, which, than_ns)) {
			dn_cell_rec_fini(&rec);
			continue;
		}
		if (nv == cap) {
			struct dn_cell_info *nvv;

			cap = cap ? cap * 2 : 16;
			nvv = realloc(v, cap * sizeof(*v));
			if (!nvv) {
				dn_cell_rec_fini(&rec);
				err = -ENOMEM;
				break;
			}
			v = nvv;
		}
		dn_cell_rec_take_info(&rec, cell_id_of(&k), &v[nv++]);
	}
	if (!err && rc && rc != MDB_NOTFOUND)
		err = dn_meta_mdb_err(rc);
	mdb_cursor_close(cur);
end:
	dn_meta_read_end(m, txn);
	if (err) {
		dn_cell_list_free(v, nv);
		return err;
	}
	*out = v;
	*n = nv;
	return 0;
}
