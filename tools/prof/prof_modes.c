/* zest-prof's mode list: parsing --modes and what each mode means for the datanode. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "prof_modes.h"

static const char *const names[PROF_MODE_COUNT] = { "copy", "zerocopy", "discard", "direct",
	                                            "copy-direct" };

const char *
prof_mode_name(enum prof_mode m)
{
	return names[m];
}

const char *
prof_mode_marshaller(enum prof_mode m)
{
	return m == PROF_MODE_COPY || m == PROF_MODE_COPY_DIRECT ? "copy" : "zerocopy";
}

const char *
prof_mode_data_io(enum prof_mode m)
{
	return m == PROF_MODE_DIRECT || m == PROF_MODE_COPY_DIRECT ? "direct" : "buffered";
}

bool
prof_mode_discards(enum prof_mode m)
{
	return m == PROF_MODE_DISCARD;
}

int
prof_modes_parse(const char *list, enum prof_mode *modes, char *err, size_t errlen)
{
	bool seen[PROF_MODE_COUNT] = { false };
	const char *p = list;
	int n = 0;

	if (!list || !*list) {
		snprintf(err, errlen, "--modes: empty list (want e.g. copy,zerocopy)");
		return -EINVAL;
	}
	for (;;) {
		size_t len = strcspn(p, ",");
		int m;

		for (m = 0; m < PROF_MODE_COUNT; m++)
			if (strlen(names[m]) == len && !strncmp(p, names[m], len))
				break;
		if (len == 0) {
			snprintf(err, errlen, "--modes: empty mode name in '%s'", list);
			return -EINVAL;
		}
		if (m == PROF_MODE_COUNT) {
			snprintf(err, errlen,
			         "--modes: unknown mode '%.*s' (known: copy, zerocopy, discard, "
			         "direct, copy-direct)",
			         (int)len, p);
			return -EINVAL;
		}
		if (seen[m]) {
			snprintf(err, errlen, "--modes: '%s' listed twice", names[m]);
			return -EINVAL;
		}
		seen[m] = true;
		modes[n++] = (enum prof_mode)m;
		if (!p[len])
			return n;
		p += len + 1;
	}
}

/* The mode with data cells written the given way; -1 when there is none (discard). */
static int
with_data_io(enum prof_mode m, bool direct)
{
	bool copy = m == PROF_MODE_COPY || m == PROF_MODE_COPY_DIRECT;

	if (m == PROF_MODE_DISCARD)
		return direct ? -1 : PROF_MODE_DISCARD;
	if (direct)
		return copy ? PROF_MODE_COPY_DIRECT : PROF_MODE_DIRECT;
	return copy ? PROF_MODE_COPY : PROF_MODE_ZEROCOPY;
}

int
prof_modes_cross_data_io(enum prof_mode *modes, int n, const char *list, char *err, size_t errlen)
{
	bool want[2] = { false, false }, seen[PROF_MODE_COUNT] = { false };
	enum prof_mode in[PROF_MAX_MODES];
	const char *p = list;
	bool order[2];
	int ni = 0, out = 0;

	if (!list || !*list) {
		snprintf(err, errlen, "--data-io: empty list (want e.g. buffered,direct)");
		return -EINVAL;
	}
	for (;;) {
		size_t len = strcspn(p, ",");
		int d = len == 8 && !strncmp(p, "buffered", 8) ? 0
		        : len == 6 && !strncmp(p, "direct", 6) ? 1
		                                               : -1;

		if (d < 0) {
			snprintf(err, errlen, "--data-io: unknown '%.*s' (known: buffered, direct)",
			         (int)len, p);
			return -EINVAL;
		}
		if (want[d]) {
			snprintf(err, errlen, "--data-io: '%.*s' listed twice", (int)len, p);
			return -EINVAL;
		}
		want[d] = true;
		order[ni++] = d;
		if (!p[len])
			break;
		p += len + 1;
	}
	memcpy(in, modes, (size_t)n * sizeof(*in));
	for (int i = 0; i < n; i++)
		for (int j = 0; j < ni; j++) {
			int m = with_data_io(in[i], order[j]);

			if (m < 0) {
				snprintf(err, errlen,
				         "--data-io: discard stores nothing: no direct");
				return -EINVAL;
			}
			if (seen[m]) {
				snprintf(err, errlen, "--data-io: mode '%s' would run twice",
				         names[m]);
				return -EINVAL;
			}
			seen[m] = true;
			modes[out++] = (enum prof_mode)m;
		}
	return out;
}
