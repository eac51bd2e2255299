/* Logging: one line per message to stderr, written with a single call so lines never mix. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zc.h"

enum zc_level zc_log_level = ZC_LEVEL_INFO;

static const char *const level_names[] = { "ERROR", "WARN", "INFO", "DEBUG" };

void
zc_log_init(void)
{
	const char *v = getenv("ZEST_LOG");

	if (!v)
		return;
	for (int i = 0; i <= ZC_LEVEL_DBG; i++)
		if (strcasecmp(v, level_names[i]) == 0)
			zc_log_level = (enum zc_level)i;
}

void
zc_log(enum zc_level level, const char *component, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if (level > zc_log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %s %s: ", tm.tm_hour, tm.tm_min,
	             tm.tm_sec, ts.tv_nsec / 1000000, level_names[level], component);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
