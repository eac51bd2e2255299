/*
 * zest-prof's datanode modes: what --modes accepts and how each mode starts the datanode.
 *
 * copy      --marshaller copy
 * zerocopy  --marshaller zerocopy
 * discard   --marshaller zerocopy --discard (payload received, parsed and dropped)
 * direct       --marshaller zerocopy --data-io direct (data cells copied once, O_DIRECT)
 * copy-direct  --marshaller copy --data-io direct
 *
 * Pure functions, no state; any thread.
 */
#ifndef ZEST_PROF_MODES_H
#define ZEST_PROF_MODES_H

#include <stdbool.h>
#include <stddef.h>

enum prof_mode {
	PROF_MODE_COPY,
	PROF_MODE_ZEROCOPY,
	PROF_MODE_DISCARD,
	PROF_MODE_DIRECT,
	PROF_MODE_COPY_DIRECT,
	PROF_MODE_COUNT
};

/* Each mode at most once in a list. */
#define PROF_MAX_MODES PROF_MODE_COUNT

/* "copy", "zerocopy", "discard", "direct", "copy-direct". */
const char *prof_mode_name(enum prof_mode m);

/* The datanode's --marshaller value for the mode. */
const char *prof_mode_marshaller(enum prof_mode m);

/* The datanode's --data-io value for the mode: "buffered" or "direct". */
const char *prof_mode_data_io(enum prof_mode m);

/* True when the datanode runs with --discard. */
bool prof_mode_discards(enum prof_mode m);

/*
 * Parses a comma list of mode names ("discard,zerocopy") into modes[], in the order given.
 * Returns the number of modes (1..PROF_MAX_MODES), or -EINVAL with a one-line reason in err
 * (NUL-terminated, cut to errlen) for an empty list or item, an unknown name or a repeat.
 */
int prof_modes_parse(const char *list, enum prof_mode *modes, char *err, size_t errlen);

/*
 * The data-io dimension (--data-io buffered,direct): replaces modes[0..n) with each mode
 * in each data-io of the comma list, mode-major ("copy,zerocopy" x "buffered,direct" ->
 * copy, copy-direct, zerocopy, direct). Returns the new count, or -EINVAL with a reason in
 * err for an empty or unknown item, a repeat, discard with direct, or a list that names a
 * mode twice.
 */
int prof_modes_cross_data_io(enum prof_mode *modes, int n, const char *list, char *err,
                             size_t errlen);

#endif
