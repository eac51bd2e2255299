/* zest-prof's mode list: parsing --modes and what each mode means for the datanode. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "prof_modes.h"

static const char *const names[PROF_MODE_COUNT] = { "copy", "zerocopy", "discard" };

const char *
prof_mode_name(enum prof_mode m)
{
	return names[m];
}

const char *
prof_mode_marshaller(enum prof_mode m)
{
	return m == PROF_MODE_COPY ? "copy" : "zerocopy";
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
			         "--modes: unknown mode '%.*s' (known: copy, zerocopy, discard)",
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
