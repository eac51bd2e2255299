/*
 * dn_cell_internal: the cell store's private parts (cluster mode), shared by dn_cell.c
 * (writes, commit, delete, list, the restart sweep), dn_cell_read.c and its metadata
 * table (dn_meta_cell.c). Never included from another module.
 *
 * A cell is named (extent id, group, cell) on its node; its file is the single-node name
 * <drive>/data/<id%256>/<id>.<group>.<cell> (dn_layout_path) on the drive its entry names.
 * The entry lives in the LMDB table "cells", replicated with the rest of the metadata.
 */
#ifndef ZEST_DN_CELL_INTERNAL_H
#define ZEST_DN_CELL_INTERNAL_H

#include "dn_internal.h"

#define DN_CELL_VER        1
#define DN_CELL_BUCKET_MAX 255
#define DN_CELL_KEY_MAX    1024

/* One cell's entry (the value of the cells table, decoded). */
struct dn_cell_rec {
	uint32_t drive;
	bool pending;
	unsigned k, m;
	uint32_t cell_size, spg, chunk;
	uint64_t length;
	uint64_t created_ns; /* CLOCK_REALTIME: the collector's age survives a restart */
	char *bucket, *key;
	uint32_t ncrc;
	uint32_t *crcs; /* one per chunk of the file, the last one short */
};
void dn_cell_rec_fini(struct dn_cell_rec *r);

/* ---- dn_meta_cell.c: the cells table ---- */
/* 1 when the cell has an entry, 0 when not, or -errno. */
int dn_meta_cell_exists(struct dn_meta *m, struct dn_cell_id id);
/* The entry of a cell into *rec (fini it): 0, -ENOENT, -EBADMSG, -EIO. */
int dn_meta_cell_get(struct dn_meta *m, struct dn_cell_id id, struct dn_cell_rec *rec);
/* One new entry of a batch; err is an output (-EEXIST when the cell has one already). */
struct dn_meta_cell_put {
	struct dn_cell_id id;
	const struct dn_cell_rec *rec;
	int err;
};
/* Record n new entries in one transaction per replica. 0 with each err set, or -errno. */
int dn_meta_cell_put_batch(struct dn_meta *m, struct dn_meta_cell_put *v, size_t n);
/* Clear the pending flag: 0 (also when already committed), -ENOENT, -errno. */
int dn_meta_cell_commit(struct dn_meta *m, struct dn_cell_id id);
/* Remove the entry; its drive in *drive. 1 removed, 0 there was none, or -errno. */
int dn_meta_cell_del(struct dn_meta *m, struct dn_cell_id id, uint32_t *drive);
/* Entries after *after (NULL: from the first) in name order, at most limit (0: all);
 * pending_only: only pending ones created before than_ns. Free with dn_cell_list_free. */
int dn_meta_cell_list(struct dn_meta *m, const struct dn_cell_id *after, bool pending_only,
                      uint64_t than_ns, size_t limit, struct dn_cell_info **out, size_t *n);

/* ---- dn_cell.c ---- */
/* The store's cell state: cell writes between open and their entry. */
int dn_cells_init(struct dn_store *s);
void dn_cells_fini(struct dn_store *s);
/*
 * The restart sweep's question for a file in a data folder of drive that no extent owns:
 * is `name` the file of a cell whose entry puts it on this drive? 1 yes (keep it), 0 no,
 * -errno (keep it too: the metadata could not say).
 */
int dn_cell_file_named(struct dn_store *s, unsigned drive, const char *name);

#endif
