/*
 * dn_store_side: the hooks of a layer beside the engine on the store object (datanode/store/,
 * included by dn_store.h). The engine (engine/) and the cell store (cells/) are siblings over
 * store/: neither includes nor calls the other. The engine's open, close, restart sweep and
 * scrubber call these hooks without knowing whose they are; the cell store exports its
 * table (dn_cells_side, cells/dn_cell_scrub.c) and the binding names it in
 * dn_store_opts.side. Threads: as the engine calls them (open and close on the caller's
 * thread, the sweep inside open, scrub on the scrubber's thread).
 */
#ifndef ZEST_DN_STORE_SIDE_H
#define ZEST_DN_STORE_SIDE_H

#include <stddef.h>
#include <stdint.h>

#include "dn_meta.h"

struct dn_store;

/*
 * A file of cells as the scrubber (engine/dn_scrub.c) checks it: where it is, how long,
 * a CRC32C per chunk bytes (ncrc of them), and for its log line the cell's name and, when
 * known, its object (borrowed for the call).
 */
struct dn_side_file {
	struct dn_cell_id id;
	unsigned drive;
	const char *path;
	uint64_t length;
	uint32_t chunk;
	const uint32_t *crcs;
	size_t ncrc;
	const char *bucket, *key; /* NULL when not known */
};
/* Read f back and check it: 0 good, 1 bad, 2 not checked (an error that is not the
 * file's), < 0 stop the walk (the walk returns it). */
typedef int (*dn_side_check_fn)(void *arg, const struct dn_side_file *f);
/* A file check found bad, and what its keeper did: handed (1) to its healer, or could
 * not (-errno). Not called for a file whose entry went meanwhile (deleted, not rot). */
typedef void (*dn_side_bad_fn)(void *arg, const struct dn_side_file *f, int handed);

/*
 * A layer that keeps cells on the store beside the engine (the cell store, cells/): the
 * engine's open, close, restart sweep and scrubber call these without knowing whose they
 * are. Every member may be NULL.
 */
struct dn_store_side {
	/* At open, after the store layer's locks and pools, before the drives start; and at
	 * close, after the drives, the commit thread and the metadata stopped (also when open
	 * failed before or in init: fini copes with a zeroed state). */
	int (*init)(struct dn_store *s);
	void (*fini)(struct dn_store *s);
	/*
	 * The restart sweep's question for a file of drive's data folders that no extent
	 * owns: is it one of this layer's? 1 yes (kept), 0 no (removed), -errno (kept: the
	 * metadata could not say).
	 */
	int (*file_named)(struct dn_store *s, unsigned drive, const char *name);
	/*
	 * At open, after the metadata and before the restart sweep: drive came back empty into
	 * a store that exists (dn_store.emptied), its files lost; drop what this layer's
	 * entries say was on it. 0 or -errno (open fails).
	 */
	int (*drive_emptied)(struct dn_store *s, unsigned drive);
	/*
	 * A scrub pass's walk over this layer's cells: check(arg, f) for each one worth
	 * reading, bad(arg, f, handed) after a bad one was dealt with. Returns 0, or the first
	 * error (a check's < 0, a metadata error).
	 */
	int (*scrub)(struct dn_store *s, dn_side_check_fn check, dn_side_bad_fn bad, void *arg);
};

#endif
