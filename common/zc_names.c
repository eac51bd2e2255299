#include <stdint.h>
#include <string.h>

#include "zc_names.h"

bool
zc_utf8_valid(const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			len = 2;
			cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			len = 3;
			cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3F);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

bool
zc_bucket_name_reserved(const char *name)
{
	return strcmp(name, ZC_RESERVED_BUCKET) == 0;
}

/* ASCII only: the locale must not widen what a name may hold. */
static bool
lower_or_digit(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

const char *
zc_bucket_name_fault(const char *b, bool reserved_ok)
{
	size_t n = strlen(b);
	bool all_ip = true;
	int dots = 0;

	if (reserved_ok && zc_bucket_name_reserved(b))
		return NULL;
	if (n < ZC_BUCKET_NAME_MIN)
		return "is shorter than 3 bytes";
	if (n > ZC_BUCKET_NAME_MAX)
		return "is longer than 63 bytes";
	for (size_t i = 0; i < n; i++) {
		char c = b[i];

		if (!lower_or_digit(c) && c != '.' && c != '-')
			return "has a byte other than a-z, 0-9, '.' and '-'";
		if (c == '.' && (b[i + 1] == '.' || b[i + 1] == '-' || (i && b[i - 1] == '-')))
			return "has '..', '.-' or '-.'";
		if (c == '.')
			dots++;
		else if (c < '0' || c > '9')
			all_ip = false;
	}
	if (!lower_or_digit(b[0]) || !lower_or_digit(b[n - 1]))
		return "does not start and end with a letter or digit";
	if (all_ip && dots == 3)
		return "is formatted as an IP address";
	if (strncmp(b, "xn--", 4) == 0)
		return "starts with 'xn--'";
	if (n > 8 && strcmp(b + n - 8, "-s3alias") == 0)
		return "ends with '-s3alias'";
	return NULL;
}

bool
zc_bucket_name_valid(const char *name)
{
	return zc_bucket_name_fault(name, false) == NULL;
}

enum zc_key_fault
zc_key_check(const char *k, size_t n)
{
	if (n == 0)
		return ZC_KEY_EMPTY;
	if (n > ZC_KEY_MAX)
		return ZC_KEY_TOO_LONG;
	if (memchr(k, '\0', n))
		return ZC_KEY_NUL;
	if (!zc_utf8_valid(k, n))
		return ZC_KEY_BAD_UTF8;
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && k[j] != '/')
			j++;
		if ((j - i == 1 && k[i] == '.') || (j - i == 2 && k[i] == '.' && k[i + 1] == '.'))
			return ZC_KEY_DOT_SEGMENT;
		i = j + 1;
	}
	return ZC_KEY_OK;
}

bool
zc_key_valid(const char *k, size_t n)
{
	return zc_key_check(k, n) == ZC_KEY_OK;
}

const char *
zc_key_fault_text(enum zc_key_fault f)
{
	switch (f) {
	case ZC_KEY_OK:
		return "";
	case ZC_KEY_EMPTY:
		return "is empty";
	case ZC_KEY_TOO_LONG:
		return "is longer than 1024 bytes";
	case ZC_KEY_NUL:
		return "contains NUL";
	case ZC_KEY_BAD_UTF8:
		return "is not valid UTF-8";
	case ZC_KEY_DOT_SEGMENT:
		return "has a '.' or '..' path segment";
	}
	return "is invalid";
}

const char *
zc_list_arg_fault(const char *s, size_t n)
{
	if (n > ZC_KEY_MAX)
		return "is longer than 1024 bytes";
	if (memchr(s, '\0', n))
		return "contains NUL";
	if (!zc_utf8_valid(s, n))
		return "is not valid UTF-8";
	return NULL;
}
