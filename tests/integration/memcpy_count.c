/*
 * memcpy_count: an LD_PRELOAD library for the integration tests that counts the bytes
 * memcpy/memmove copy, split by who called: the main program (zest's own code, linked
 * statically into it) or a shared library (gRPC, OpenSSL, libc...). At exit it writes
 * "program=<bytes> libraries=<bytes>" to $ZEST_MEMCPY_OUT. Copies under 1 KiB (headers,
 * names, small structs) are not counted: the question is payload copies.
 *
 * Not usable under ASan (its runtime must come first in the library list).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_COUNTED 1024

static atomic_ullong from_program, from_libraries;
static uintptr_t prog_lo, prog_hi; /* the main program's mapped range */

static int
find_program(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	/* the first object is the main program */
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type != PT_LOAD)
			continue;
		if (!prog_lo || lo < prog_lo)
			prog_lo = lo;
		if (hi > prog_hi)
			prog_hi = hi;
	}
	return 1;
}

__attribute__((constructor)) static void
init(void)
{
	dl_iterate_phdr(find_program, NULL);
}

static void
count(const void *caller, size_t n)
{
	uintptr_t a = (uintptr_t)caller;

	if (n < MIN_COUNTED)
		return;
	if (a >= prog_lo && a < prog_hi)
		atomic_fetch_add_explicit(&from_program, n, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&from_libraries, n, memory_order_relaxed);
}

/* Loops of our own (built with -fno-builtin -fno-tree-loop-distribute-patterns, so the
 * compiler does not turn them back into memcpy calls): the libc functions are what we
 * replace. */
typedef uint64_t __attribute__((may_alias, aligned(1))) u64_any;

static void
copy_fwd(unsigned char *d, const unsigned char *s, size_t n)
{
	while (n >= sizeof(uint64_t)) {
		*(u64_any *)d = *(const u64_any *)s;
		d += sizeof(uint64_t);
		s += sizeof(uint64_t);
		n -= sizeof(uint64_t);
	}
	while (n--)
		*d++ = *s++;
}

void *
memcpy(void *dst, const void *src, size_t n)
{
	count(__builtin_return_address(0), n);
	copy_fwd(dst, src, n);
	return dst;
}

void *
__memcpy_chk(void *dst, const void *src, size_t n, size_t cap)
{
	if (n > cap)
		abort();
	count(__builtin_return_address(0), n);
	copy_fwd(dst, src, n);
	return dst;
}

void *
memmove(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	count(__builtin_return_address(0), n);
	if (d <= s || d >= s + n) {
		copy_fwd(d, s, n);
	} else {
		d += n;
		s += n;
		while (n--)
			*--d = *--s;
	}
	return dst;
}

__attribute__((destructor)) static void
fini(void)
{
	const char *path = getenv("ZEST_MEMCPY_OUT");
	FILE *f;

	if (!path || !(f = fopen(path, "w")))
		return;
	fprintf(f, "program=%llu libraries=%llu\n", (unsigned long long)atomic_load(&from_program),
	        (unsigned long long)atomic_load(&from_libraries));
	fclose(f);
}
