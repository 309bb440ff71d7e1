/* faultfs: an LD_PRELOAD shim that fails file writes under one directory, the way SQLite's own test VFS injects
 * I/O errors (test_fault: "the Nth write fails").
 *
 *   FAULT_PATH=/dir   only writes to files under this prefix count (the store), never stdout or the terminal
 *   FAULT_AT=N        the N-th counted write fails (1-based); unset or <1: count only
 *   FAULT_SPAN=K      K consecutive writes fail from the N-th on (0: every later write: a disk that stays full)
 *   FAULT_ERRNO=EIO|ENOSPC
 *   FAULT_COUNT_FILE  at exit, "<pid> <counted writes>" is appended there (calibration runs; only a process that
 *                     counted anything writes, so child processes such as git do not add noise)
 *
 * write, pwrite, pwrite64, writev, pwritev, fsync, fdatasync and ftruncate are counted. Build:
 *   cc -shared -fPIC -O2 -o faultfs.so faultfs.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *prefix = NULL;
static size_t plen = 0;
static long fail_at = -1, span = 0;
static int err_no = EIO;
static atomic_long counted = 0;
static atomic_int ready = 0;

static void init(void) {
    if (atomic_load(&ready)) return;
    prefix = getenv("FAULT_PATH");
    plen = prefix ? strlen(prefix) : 0;
    const char *v = getenv("FAULT_AT");
    fail_at = v ? atol(v) : -1;
    v = getenv("FAULT_SPAN");
    span = v ? atol(v) : 0;
    v = getenv("FAULT_ERRNO");
    err_no = (v && strcmp(v, "ENOSPC") == 0) ? ENOSPC : EIO;
    atomic_store(&ready, 1);
}

static int watched(int fd) {
    if (!prefix || fd < 0) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    return strncmp(path, prefix, plen) == 0;
}

static int fail_now(int fd) {
    init();
    if (!watched(fd)) return 0;
    long c = atomic_fetch_add(&counted, 1) + 1;
    if (fail_at < 1 || c < fail_at) return 0;
    if (span > 0 && c >= fail_at + span) return 0;
    errno = err_no;
    return 1;
}

#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n) { REAL(write); if (fail_now(fd)) return -1; return real_write(fd, buf, n); }
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { REAL(pwrite); if (fail_now(fd)) return -1; return real_pwrite(fd, buf, n, off); }
ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) { REAL(pwrite64); if (fail_now(fd)) return -1; return real_pwrite64(fd, buf, n, off); }
ssize_t writev(int fd, const struct iovec *iov, int cnt) { REAL(writev); if (fail_now(fd)) return -1; return real_writev(fd, iov, cnt); }
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) { REAL(pwritev); if (fail_now(fd)) return -1; return real_pwritev(fd, iov, cnt, off); }
int fsync(int fd) { REAL(fsync); if (fail_now(fd)) return -1; return real_fsync(fd); }
int fdatasync(int fd) { REAL(fdatasync); if (fail_now(fd)) return -1; return real_fdatasync(fd); }
int ftruncate(int fd, off_t len) { REAL(ftruncate); if (fail_now(fd)) return -1; return real_ftruncate(fd, len); }

__attribute__((destructor)) static void report(void) {
    const char *out = getenv("FAULT_COUNT_FILE");
    long c = atomic_load(&counted);
    if (!out || c == 0) return;
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0) return;
    char s[64];
    int n = snprintf(s, sizeof s, "%ld %ld\n", (long)getpid(), c);
    REAL(write);
    real_write(fd, s, n);
    close(fd);
}
