/* TEST BUILDS ONLY: fault injection from the environment (dn_test_hooks.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dn_test_hooks.h"
#include "zc.h"

int
dn_test_hooks_apply(struct dn_store *s, unsigned ndrives)
{
	const char *env = getenv("ZEST_TEST_DRIVE_DELAY");
	char buf[256], *save = NULL;

	if (!env || !*env)
		return 0;
	if (strlen(env) >= sizeof(buf))
		goto bad;
	strcpy(buf, env);
	for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(item, ':'), *end;
		unsigned long drive;
		uint64_t ns;

		if (!colon)
			goto bad;
		*colon = 0;
		errno = 0;
		drive = strtoul(item, &end, 10);
		if (errno || end == item || *end || drive >= ndrives ||
		    zc_parse_duration_ns(colon + 1, &ns) < 0)
			goto bad;
		dn_drive_inject_delay(s, (unsigned)drive, ns);
		ZC_WARN("datanode", "test_hook=drive_delay drive=%lu delay_ms=%.3f (test build)",
		        drive, (double)ns / 1e6);
	}
	return 0;
bad:
	ZC_ERR("datanode", "bad ZEST_TEST_DRIVE_DELAY='%s' (want N:DURATION[,N:DURATION], N < %u)",
	       env, ndrives);
	return -EINVAL;
}
