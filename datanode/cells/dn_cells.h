/*
 * dn_cells: the cell store of cluster mode (datanode/cells/), its one public header.
 *
 * Single cells of other coordinators' extents, and the coordinator's own: one file per
 * cell, (extent id, group, cell) its name, an entry in the LMDB table "cells" its index.
 * A cell is written whole (one stream), recorded pending once durable, committed when the
 * coordinator's etcd Txn succeeded, and read, deleted or collected by its name. Threads as
 * for objects: a struct dn_cell_write belongs to one thread until finish or abort.
 *
 * A cell's file is the single-node name of its cell (dn_layout_path) on the drive its entry
 * names; the entry is in the metadata's cells table (dn_meta.h). The cell store runs on the
 * store object (dn_store.h) beside the engine and calls only the layers below it; neither
 * includes nor calls the other. What the engine's open, close, restart sweep and scrubber
 * need of it is the table dn_cells_side, which the binding names in dn_store_opts.side.
 */
#ifndef ZEST_DN_CELLS_H
#define ZEST_DN_CELLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dn_store.h"
#include "zc_ref.h"

struct dn_cell_spec {
	struct dn_cell_id id;
	uint64_t length;            /* bytes in the cell; <= stripes_per_group x cell_size */
	unsigned k, m;              /* the extent's scheme */
	uint32_t cell_size;         /* a multiple of 4096 and of the store's chunk_size */
	uint32_t stripes_per_group; /* >= 1 */
	/* The object the coordinator writes (borrowed): the collector asks etcd about it. */
	const char *bucket, *key;
};

struct dn_cell_write;
/*
 * Start writing a cell: picks a drive (the writable one with most room; near-ties by a
 * hash of the name), creates its file. A retired entry of the name gives way (deleted
 * first: only a heal of the same extent writes a name again). Returns 0 and *out, -EINVAL (bad spec), ZC_E(ZC_CELL_EXISTS)
 * (the cell has an entry, or the extent id is one of this node's own objects: the
 * coordinator draws another), -EBUSY (a write of this name is still in progress, or its
 * abort still finishing: retry), -ENOSPC / ZC_E(ZC_NO_QUORUM) (no writable drive: all full /
 * some failed), -errno.
 */
int dn_cell_write_open(struct dn_store *s, const struct dn_cell_spec *spec,
                       struct dn_cell_write **out);
/*
 * Append segs at offset (= bytes so far), as dn_write_data does: written straight from
 * the segments through the drive's ring, each SQE holding its own zc_ref (the caller
 * keeps its own and may drop them on return); chunk CRCs computed in the same pass. May
 * block on in-flight credit or the io pool. Returns 0, -EINVAL (offset, past length),
 * -EAGAIN, -EIO; an error poisons the write (finish reports it).
 */
int dn_cell_write_data(struct dn_cell_write *w, uint64_t offset, const struct zc_seg *segs,
                       size_t n);
/* Called once, on the store's commit thread, when the cell is recorded (err 0) or not. */
typedef void (*dn_cell_cb)(void *arg, int err);
/*
 * Finish: every byte written (else -EINVAL), fdatasync the file and fsync its folder
 * through the ring, record the entry as pending, then cb. Takes ownership of w. On any
 * error the file is removed and nothing is recorded.
 */
void dn_cell_write_finish(struct dn_cell_write *w, dn_cell_cb cb, void *arg);
/* Drop an unfinished cell write: nothing is recorded, and once its SQEs completed the file
 * is removed and the name free again (-EBUSY until then). Takes ownership. */
void dn_cell_write_abort(struct dn_cell_write *w);
/* The coordinator's Txn committed: clear the pending flag. 0 (also if already), ZC_E(ZC_NO_KEY). */
int dn_cell_commit(struct dn_store *s, struct dn_cell_id id);
/* The entry of a cell into *info (fini it): 0, ZC_E(ZC_NO_KEY), -errno. */
int dn_cell_stat(struct dn_store *s, struct dn_cell_id id, struct dn_cell_info *info);
/*
 * Stream [offset, offset + length) of a cell (has_length false: to its end) through the
 * drive's ring, checking every chunk's CRC32C; cb as for dn_read, on the caller's
 * thread, which sleeps meanwhile. A retired cell's read touches every retired cell of its
 * extent on this node first (at most about once a second), so their read grace runs from
 * the extent's last read here; the file stays open for the whole read, so a deletion
 * meanwhile does not cut it. Returns 0, ZC_E(ZC_NO_KEY), -EINVAL
 * (range), -EBADMSG (a chunk failed its CRC, or the file is short), -EIO (drive failed), or cb's
 * value.
 */
int dn_cell_read(struct dn_store *s, struct dn_cell_id id, uint64_t offset, uint64_t length,
                 bool has_length, dn_read_cb cb, void *arg);
/*
 * A committed cell of this store is lost (the scrubber found it rotted): its name goes to
 * the hook dn_cell_lost_hook set (the cluster healer, which marks the cell missing in its
 * object's record, dn_cheal_mark_missing), on the caller's thread; with none, nothing.
 * The hook must not block (it queues). One hook per store; NULL fn removes it, and once
 * that returns the old hook is not running and never runs again.
 */
typedef void (*dn_cell_lost_fn)(void *arg, struct dn_cell_id id);
void dn_cell_lost_hook(struct dn_store *s, dn_cell_lost_fn fn, void *arg);
void dn_cell_lost(struct dn_store *s, struct dn_cell_id id);
/* Remove a cell's entry, then its file. Returns 1 when it existed, 0 when not, -errno. */
int dn_cell_delete(struct dn_store *s, struct dn_cell_id id);
/*
 * The record that named a cell was replaced or deleted (DeleteCells, the collector's "not
 * named"): a committed cell is marked retired at now and stays readable until the
 * collector deletes it, the read grace after its last touch (a GET that started on the
 * old record reads it to the end); a pending one is deleted at once (no committed record
 * a reader follows named it). A cell retired already keeps its time. 1 when it existed,
 * 0 when not, -errno.
 */
int dn_cell_retire(struct dn_store *s, struct dn_cell_id id);
/* How many cells dn_cell_retire retired since the store opened (any thread). */
uint64_t dn_cell_retired_total(struct dn_store *s);
/*
 * Refresh the cell's touched time (CLOCK_REALTIME now): the coordinator's writer is making
 * progress (a pending cell), or a reader reads a retired one (dn_cell_read does that
 * itself). 0, ZC_E(ZC_NO_KEY), -errno.
 */
int dn_cell_touch(struct dn_store *s, struct dn_cell_id id);
/*
 * Delete the cell only if its entry is still as listed in *expect (created, touched,
 * pending, retired the same: no touch, commit or rewrite came since), in one metadata
 * transaction, then its file. 1 deleted, 0 not, -errno.
 */
int dn_cell_delete_if(struct dn_store *s, const struct dn_cell_info *expect);
/*
 * Pending cells, not retired, recorded and last touched before than_ns (CLOCK_REALTIME),
 * at most limit (0: all), in name order: the collector's work list. Free with
 * dn_cell_list_free.
 */
int dn_cell_list_pending_older(struct dn_store *s, uint64_t than_ns, size_t limit,
                               struct dn_cell_info **out, size_t *n);
/* Retired cells last touched before than_ns, as above: the collector deletes them. */
int dn_cell_list_retired_older(struct dn_store *s, uint64_t than_ns, size_t limit,
                               struct dn_cell_info **out, size_t *n);

/*
 * Every cell, pending or committed, after *after (NULL: from the first) in name order, at
 * most limit (0: all): the collector's scan of committed cells, in pages. Free with
 * dn_cell_list_free.
 */
int dn_cell_list(struct dn_store *s, const struct dn_cell_id *after, size_t limit,
                 struct dn_cell_info **out, size_t *n);

/* ---- the cell store's side of the store object (dn_store.h, struct dn_store_side) ---- */
/*
 * The table to put in dn_store_opts.side: init and fini below, file_named for the restart
 * sweep, and the scrubber's walk over committed cells (dn_cell_scrub.c: a bad one is
 * handed to dn_cell_lost and deleted). A store opened without it has no cell state: no
 * dn_cell_* call may be made on it.
 */
extern const struct dn_store_side dn_cells_side;
/* The store's cell state: cell writes between open and their entry. */
int dn_cells_init(struct dn_store *s);
void dn_cells_fini(struct dn_store *s);
/*
 * The restart sweep's question for a file in a data folder of drive that no extent owns:
 * is `name` the file of a cell whose entry puts it on this drive? 1 yes (keep it), 0 no,
 * -errno (keep it too: the metadata could not say).
 */
int dn_cell_file_named(struct dn_store *s, unsigned drive, const char *name);
/*
 * Drive came back empty at open (dn_store_side.drive_emptied): every cell entry that puts
 * a cell on it goes (its file went with the drive), so that the node's cluster healer,
 * which checks a store that lost cells against every record (dn_store_lost_at_open), finds
 * them absent and has them rebuilt. 0 or -errno.
 */
int dn_cells_drive_emptied(struct dn_store *s, unsigned drive);

#endif
