/* koordlet native helpers: thin syscall wrappers called through cffi (API mode).
 * No Python.h, no memory ownership crossing the boundary: callers pass buffers.
 * Return >= 0 on success, -errno on failure unless stated otherwise.
 * This header is also the cffi cdef: '#' lines are dropped, so constants live in the enum. */
#include <stddef.h>
#include <stdint.h>

int kn_abi_version(void);

/* File kinds of the batch reader. */
enum {
    KN_COUNTER = 0,  /* one integer (cpuacct.usage, memory.usage_in_bytes); "max" reads as INT64_MAX */
    KN_KEYVALUE = 1, /* "key value" lines (memory.stat, cpu.stat): values of the caller's keys */
    KN_CPULIST = 2   /* a CPU list ("0-3,8", cpuset.cpus): the number of CPUs in it; empty is 0 */
};

/* Value stored for a requested key the file does not contain (INT64_MIN). */
int64_t kn_missing(void);

/* Batch reader: caches one O_RDONLY|O_CLOEXEC descriptor per file index and reads every file with
 * pread(fd, buf, cap, 0). One reader is used by one thread at a time. */
typedef struct kn_reader kn_reader;

kn_reader *kn_reader_new(int capacity, size_t bufsize);
void kn_reader_free(kn_reader *r);
/* Append a file; `keys` holds `nkeys` NUL-terminated names back to back (KN_KEYVALUE only).
 * Returns the file index or -errno (-ENOSPC when full, -EINVAL on a bad kind). */
int kn_reader_add(kn_reader *r, const char *path, int kind, const char *keys, size_t keys_len, int nkeys);
/* Make room for `capacity` files (never less than held). Returns 0 or -ENOMEM. */
int kn_reader_reserve(kn_reader *r, int capacity);
/* Files `i` and `j` trade paths and descriptors (their kinds and keys must be the same, else -EINVAL):
 * a reader over many alike targets keeps them dense without reopening anything. Returns 0 or -errno. */
int kn_reader_swap(kn_reader *r, int i, int j);
/* Drop the files from index `n` on (closing their descriptors); their slots go too. */
int kn_reader_truncate(kn_reader *r, int n);
/* Number of int64 slots read() fills: 1 per counter or CPU-list file, nkeys per key-value file. */
int kn_reader_slots(const kn_reader *r);
/* Read every file: values[] gets the slots in file order, status[i] is 0 or -errno per file.
 * ENODEV (cgroup removed under a held fd) and ENOENT close and forget the descriptor; the next
 * call reopens the path. A full buffer is -EOVERFLOW, an unparsable wanted value -EINVAL.
 * Returns the number of files with a non-zero status. */
int kn_reader_read(kn_reader *r, int64_t *values, int *status);
/* Descriptors currently held (for leak tests). */
int kn_reader_open_fds(const kn_reader *r);

/* The pod sweep's fast path over n targets of one read (koordlet.metricsadvisor.podcolumns): target j's
 * CPU counter is values[o_cpu[j]] times cpu_scale (ns), its memory the sum of the three slots from
 * o_mem[j], its throttling periods and throttled counts the two slots from o_thr[j]. Against the
 * baselines base_cpu/base_per/base_thr (none where fresh[j] != 0) it writes cpu_out[j] = CPU ns delta /
 * (dt * 1e9), mem_out[j], thr_out[j] = throttled delta / periods delta (0 without periods), then stores
 * the new baselines and clears fresh. Returns 0; or 1, having changed no baseline, when a per-target
 * sweep must decide: a missing or overflowing value, a counter going back, a CPU delta above limit_ns. */
int kn_sweep_rates(const int64_t *values, const int *o_cpu, const int *o_mem, const int *o_thr, int n,
                   int64_t cpu_scale, double dt, double limit_ns, int64_t *base_cpu, int64_t *base_per,
                   int64_t *base_thr, unsigned char *fresh, double *cpu_out, double *mem_out, double *thr_out);

/* Ordered writes: open(O_WRONLY|O_TRUNC|O_CLOEXEC) (no O_CREAT: a gone cgroup stays gone), one write
 * of the whole value, close.
 * errs[i] is 0 or the positive errno (EIO for a short write). Returns the number of failures. */
int kn_write_batch(const char *const *paths, const char *const *values, const size_t *lens, int n, int *errs);

/* Write a resctrl schemata; on failure read `status_path` (info/last_cmd_status) into msg
 * (NUL-terminated, truncated to msgcap - 1). Returns 0 or the positive errno. */
int kn_write_schemata(const char *path, const char *data, size_t len, const char *status_path, char *msg,
                      size_t msgcap);
