/*
 * dn_scrub: the scrubber of one datanode (docs/reliability.md, "Scrub"). Nothing else reads
 * a cell nobody GETs, so without it a rotted cell file (bit rot, a torn sector, a file cut
 * short) is found only by the client that reads it, and m + 1 cells of a group rotting
 * unseen lose the object.
 *
 * A pass walks every cell this datanode holds: the cells of its single-node objects (the
 * extents table) and those of the layer beside the engine (the cell store's committed
 * cluster cells, walked by its dn_store_side.scrub with this file's check), and reads each
 * file whole with pread, O_DIRECT where the file system allows it (the media, not the page
 * cache: a rotted sector under a cached page would pass), at most rate_bps bytes a second
 * over the pass. Each chunk is checked against the CRC32C its metadata recorded, and the
 * file's length against the recorded one. A bad cell is
 * - single-node: marked missing in its extent (one metadata transaction), so reads go
 *   around it at once, and handed to the background healer (dn_heal.c), which rebuilds it
 *   in place at its next turn (--heal-interval; with the healer off it waits for
 *   `zest-datanode heal`);
 * - cluster mode: handed to the cluster healer (dn_cheal.c), which marks it missing in its
 *   record and has it rebuilt onto this node (the cell store's own walk, in cells/,
 *   says how).
 *
 * A pass starts every interval_ns, counted from the start of the previous one (a pass
 * longer than that is followed at once by the next); the first one interval_ns after
 * start, at most 10 minutes, so that a restart storm does not read every drive at once.
 *
 * Threads: create/stop/destroy from one thread; the scrubber runs on its own ("dn-scrub");
 * dn_scrub_pass from any one thread while no scrubber thread runs (tests);
 * dn_scrub_metrics from any (the metrics thread).
 */
#ifndef ZEST_DN_SCRUB_H
#define ZEST_DN_SCRUB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dn.h"

#define DN_SCRUB_DEFAULT_RATE     (16ull << 20)           /* --scrub-rate 16MiB/s */
#define DN_SCRUB_DEFAULT_INTERVAL (7 * 86400000000000ull) /* --scrub-interval 7d */

struct dn_scrub;

struct dn_scrub_opts {
	struct dn_store *store; /* borrowed, outlives the scrubber */
	uint64_t rate_bps;      /* bytes read per second at most, > 0 */
	uint64_t interval_ns;   /* between pass starts; 0: DN_SCRUB_DEFAULT_INTERVAL */
	bool no_thread;         /* tests: passes only when called */
};

/* What a pass found; errors by kind. */
enum dn_scrub_kind {
	DN_SCRUB_CRC,     /* a chunk failed its CRC32C */
	DN_SCRUB_SIZE,    /* the file is shorter or longer than recorded */
	DN_SCRUB_MISSING, /* the file is not there */
	DN_SCRUB_IO,      /* open or read failed (EIO, ...) */
	DN_SCRUB_KINDS
};

struct dn_scrub_stats {
	uint64_t cells; /* cells read */
	uint64_t bytes; /* bytes read */
	uint64_t errors[DN_SCRUB_KINDS];
	uint64_t repaired; /* bad cells handed to their healer */
};

/* 0 and *out (its thread started unless no_thread), -EINVAL, -ENOMEM, -EAGAIN. */
int dn_scrub_create(const struct dn_scrub_opts *o, struct dn_scrub **out);
/* Stop the thread (a pass in progress ends at its next cell or sleep); afterwards the
 * scrubber touches the store no more and dn_scrub_metrics still answers. Idempotent. */
void dn_scrub_stop(struct dn_scrub *sc);
/* Stop, then free. NULL: no-op. */
void dn_scrub_destroy(struct dn_scrub *sc);

/* One whole pass, at the rate; adds to *st (may be NULL) and to the counters. Returns 0,
 * -ECANCELED (stopped), or a metadata error (the pass ends there). */
int dn_scrub_pass(struct dn_scrub *sc, struct dn_scrub_stats *st);

/* zest_scrub_bytes_total, zest_scrub_cells_total, zest_scrub_errors_total{kind},
 * zest_scrub_repairs_total, zest_scrub_passes_total, zest_scrub_pass_seconds,
 * zest_scrub_last_pass_timestamp_seconds. */
void dn_scrub_metrics(struct dn_scrub *sc, FILE *out);

#endif
