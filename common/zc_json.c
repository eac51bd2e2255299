/* JSON output shared by the tools' --json reports. */
#include <stdio.h>

#include "zc.h"

void
zc_json_string(FILE *out, const char *v)
{
	fputc('"', out);
	for (; *v; v++) {
		unsigned char ch = (unsigned char)*v;

		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(out, "\\u%04x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}
