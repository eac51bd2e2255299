/*
 * The cell store's side of the store object (dn_cells_side, dn_store.h's struct
 * dn_store_side): what the engine's open (an emptied drive too), close, restart sweep and
 * scrubber need from the cell store, reached through the table and never by name, so that
 * the engine and the cell store stay siblings over store/.
 *
 * The scrubber's walk lives here because what to do with a bad cell is the cell store's
 * business: the engine's scrubber only reads a file back and checks it.
 */
#include <errno.h>
#include <limits.h>

#include "dn_cells.h"

#define SCRUB_PAGE 50 /* cell entries listed at a time */

/*
 * A cell of the cell store is bad: get it marked missing in its record, so that its
 * object's healer rebuilds it (onto this node: the missing bit names its node). The one
 * place that says how. dn_cell_lost hands the name to the cluster healer (dn_cheal.c),
 * which marks it with dn_cheal_mark_missing at its next pass; and the entry and the file
 * are dropped: the bytes were bad, and no reader may be handed them meanwhile (a healer
 * that checks this store against the records finds the entry gone too). 1: handed over,
 * 0: gone already, -errno.
 */
static int
scrub_cell_lost(struct dn_store *s, struct dn_cell_id id)
{
	dn_cell_lost(s, id);
	return dn_cell_delete(s, id);
}

static int
scrub_cell(struct dn_store *s, struct dn_cell_id id, dn_side_check_fn check, dn_side_bad_fn bad,
           void *arg)
{
	struct dn_cell_rec rec, again;
	char path[PATH_MAX];
	struct dn_side_file f;
	int rc = dn_meta_cell_get(s->meta, id, &rec);

	if (zc_err_is(rc, ZC_NO_KEY))
		return 0; /* deleted since the listing */
	if (rc)
		return rc;
	if (rec.pending || rec.drive >= s->ndrives ||
	    dn_layout_path(s->drives[rec.drive].root, id.extent, id.group, id.cell, path,
	                   sizeof(path))) {
		dn_cell_rec_fini(&rec);
		return 0; /* pending: the collector's */
	}
	f = (struct dn_side_file){ .id = id,
		                   .drive = rec.drive,
		                   .path = path,
		                   .length = rec.length,
		                   .chunk = rec.chunk,
		                   .crcs = rec.crcs,
		                   .ncrc = rec.ncrc,
		                   .bucket = rec.bucket,
		                   .key = rec.key };
	rc = check(arg, &f);
	if (rc < 0)
		goto fini;
	if (rc != 1) {
		rc = 0; /* good, or not checked */
		goto fini;
	}
	/* The same entry still (not deleted, or deleted and written again, meanwhile)? */
	rc = dn_meta_cell_get(s->meta, id, &again);
	if (zc_err_is(rc, ZC_NO_KEY)) {
		rc = 0;
		goto fini;
	}
	if (rc)
		goto fini;
	if (again.drive == rec.drive && again.created_ns == rec.created_ns) {
		rc = scrub_cell_lost(s, id);
		bad(arg, &f, rc);
		rc = rc < 0 ? rc : 0;
	}
	dn_cell_rec_fini(&again);
fini:
	dn_cell_rec_fini(&rec);
	return rc;
}

/* dn_store_side.scrub: every committed cell, in name order, a page of entries at a time. */
static int
cells_scrub(struct dn_store *s, dn_side_check_fn check, dn_side_bad_fn bad, void *arg)
{
	struct dn_cell_id after;
	bool have = false;

	for (;;) {
		struct dn_cell_info *v;
		size_t n;
		int rc = dn_cell_list(s, have ? &after : NULL, SCRUB_PAGE, &v, &n);

		if (rc)
			return rc;
		for (size_t i = 0; i < n && !rc; i++) {
			after = v[i].id;
			have = true;
			/* pending: the collector's; retired: no record names it any more, it
			 * only waits out the read grace (a rotted one is read around) */
			if (!v[i].pending && !v[i].retired)
				rc = scrub_cell(s, v[i].id, check, bad, arg);
		}
		dn_cell_list_free(v, n);
		if (rc)
			return rc;
		if (n < SCRUB_PAGE)
			return 0;
	}
}

const struct dn_store_side dn_cells_side = {
	.init = dn_cells_init,
	.fini = dn_cells_fini,
	.drive_emptied = dn_cells_drive_emptied,
	.file_named = dn_cell_file_named,
	.scrub = cells_scrub,
};
