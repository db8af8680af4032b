/* koordlet native helpers: batch reader over cached descriptors, ordered batch writer, resctrl
 * schemata writer. Plain syscalls only; every result goes into caller-provided buffers. */
#define _GNU_SOURCE
#include "koordlet_native.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int kn_abi_version(void) { return 4; }

int64_t kn_missing(void) { return INT64_MIN; }

struct kn_file {
    char *path;
    int fd;      /* -1 when not open (never opened, or dropped after ENOENT/ENODEV) */
    int kind;
    int nkeys;
    int slot;    /* first value slot */
    char **keys; /* points into keybuf */
    size_t *keylens;
    char *keybuf;
};

struct kn_reader {
    struct kn_file *files;
    int n;
    int cap;
    int slots;
    char *buf;
    size_t bufsize;
};

kn_reader *kn_reader_new(int capacity, size_t bufsize) {
    if (capacity < 0 || bufsize < 64) return NULL;
    kn_reader *r = calloc(1, sizeof(*r));
    if (r == NULL) return NULL;
    r->files = calloc(capacity > 0 ? (size_t)capacity : 1, sizeof(struct kn_file));
    r->buf = malloc(bufsize);
    if (r->files == NULL || r->buf == NULL) {
        free(r->files);
        free(r->buf);
        free(r);
        return NULL;
    }
    r->cap = capacity;
    r->bufsize = bufsize;
    return r;
}

/* Close the file and free what it owns (its slot in the reader's array stays). */
static void file_release(struct kn_file *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    free(f->path);
    free(f->keys);
    free(f->keylens);
    free(f->keybuf);
    f->path = NULL;
    f->keys = NULL;
    f->keylens = NULL;
    f->keybuf = NULL;
}

void kn_reader_free(kn_reader *r) {
    if (r == NULL) return;
    for (int i = 0; i < r->n; i++) file_release(&r->files[i]);
    free(r->files);
    free(r->buf);
    free(r);
}

int kn_reader_add(kn_reader *r, const char *path, int kind, const char *keys, size_t keys_len, int nkeys) {
    if (r->n >= r->cap) return -ENOSPC;
    if (kind != KN_COUNTER && kind != KN_KEYVALUE && kind != KN_CPULIST) return -EINVAL;
    if (kind == KN_KEYVALUE && (nkeys <= 0 || keys == NULL)) return -EINVAL;
    struct kn_file *f = &r->files[r->n];
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    f->kind = kind;
    f->slot = r->slots;
    f->path = strdup(path);
    if (f->path == NULL) return -ENOMEM;
    if (kind != KN_KEYVALUE) {
        f->nkeys = 0;
        r->slots += 1;
    } else {
        f->nkeys = nkeys;
        f->keybuf = malloc(keys_len + 1);
        f->keys = calloc((size_t)nkeys, sizeof(char *));
        f->keylens = calloc((size_t)nkeys, sizeof(size_t));
        if (f->keybuf == NULL || f->keys == NULL || f->keylens == NULL) {
            file_release(f);
            return -ENOMEM;
        }
        memcpy(f->keybuf, keys, keys_len);
        f->keybuf[keys_len] = '\0';
        char *p = f->keybuf;
        for (int k = 0; k < nkeys; k++) {
            if (p >= f->keybuf + keys_len + 1) {
                file_release(f);
                return -EINVAL;
            }
            f->keys[k] = p;
            f->keylens[k] = strlen(p);
            p += f->keylens[k] + 1;
        }
        r->slots += nkeys;
    }
    return r->n++;
}

int kn_reader_reserve(kn_reader *r, int capacity) {
    if (capacity <= r->cap) return 0;
    struct kn_file *files = realloc(r->files, (size_t)capacity * sizeof(struct kn_file));
    if (files == NULL) return -ENOMEM;
    r->files = files;
    r->cap = capacity;
    return 0;
}

static int same_shape(const struct kn_file *a, const struct kn_file *b) {
    if (a->kind != b->kind || a->nkeys != b->nkeys) return 0;
    for (int k = 0; k < a->nkeys; k++)
        if (a->keylens[k] != b->keylens[k] || memcmp(a->keys[k], b->keys[k], a->keylens[k]) != 0) return 0;
    return 1;
}

int kn_reader_swap(kn_reader *r, int i, int j) {
    if (i < 0 || j < 0 || i >= r->n || j >= r->n) return -EINVAL;
    struct kn_file *a = &r->files[i], *b = &r->files[j];
    if (!same_shape(a, b)) return -EINVAL;
    char *path = a->path;
    int fd = a->fd;
    a->path = b->path;
    a->fd = b->fd;
    b->path = path;
    b->fd = fd;
    return 0;
}

int kn_reader_truncate(kn_reader *r, int n) {
    if (n < 0 || n > r->n) return -EINVAL;
    if (n == r->n) return 0;
    r->slots = r->files[n].slot;
    for (int i = n; i < r->n; i++) file_release(&r->files[i]);
    r->n = n;
    return 0;
}

int kn_reader_slots(const kn_reader *r) { return r->slots; }

int kn_reader_open_fds(const kn_reader *r) {
    int c = 0;
    for (int i = 0; i < r->n; i++) c += r->files[i].fd >= 0;
    return c;
}

/* Parse a decimal integer (optional '-') or the word "max" from [p, end); no surrounding blanks. */
static int parse_int(const char *p, const char *end, int64_t *out) {
    if (end - p == 3 && memcmp(p, "max", 3) == 0) {
        *out = INT64_MAX;
        return 0;
    }
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end) return -EINVAL;
    uint64_t v = 0;
    for (; p < end; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (d > 9) return -EINVAL;
        /* counters are u64 in the kernel; anything past INT64_MAX is refused, not wrapped */
        if (v > ((uint64_t)INT64_MAX - d) / 10) return -ERANGE;
        v = v * 10 + d;
    }
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int parse_counter(const char *buf, size_t n, int64_t *out) {
    const char *p = buf, *end = buf + n;
    while (p < end && is_blank(*p)) p++;
    while (end > p && is_blank(end[-1])) end--;
    return parse_int(p, end, out);
}

/* Number of CPUs in a list such as "0-3,8" (blanks around it ignored, empty = 0). CPU numbers above
 * KN_MAX_CPU are refused (-ERANGE), anything but digits, '-' and ',' in place is -EINVAL. */
#define KN_MAX_CPU 65535 /* koordlet.api.cpulist.MAX_CPU_ID */
static int parse_cpulist(const char *buf, size_t n, int64_t *out) {
    const char *p = buf, *end = buf + n;
    while (p < end && is_blank(*p)) p++;
    while (end > p && is_blank(end[-1])) end--;
    int64_t count = 0;
    while (p < end) {
        int64_t range[2] = {-1, -1};
        for (int part = 0; part < 2; part++) {
            int64_t v = -1;
            for (; p < end && *p >= '0' && *p <= '9'; p++) {
                v = (v < 0 ? 0 : v) * 10 + (*p - '0');
                if (v > KN_MAX_CPU) return -ERANGE;
            }
            if (v < 0) return -EINVAL;
            range[part] = v;
            if (part == 0 && p < end && *p == '-') {
                p++;
                continue;
            }
            break;
        }
        if (range[1] < 0) range[1] = range[0];
        if (range[1] < range[0]) return -EINVAL;
        count += range[1] - range[0] + 1;
        if (p < end) {
            if (*p != ',' || p + 1 == end) return -EINVAL;
            p++;
        }
    }
    *out = count;
    return 0;
}

static int parse_keyvalue(const struct kn_file *f, const char *buf, size_t n, int64_t *out) {
    const char *p = buf, *end = buf + n;
    int found = 0;
    while (p < end && found < f->nkeys) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL) eol = end;
        const char *sp = p;
        while (sp < eol && *sp != ' ') sp++;
        size_t klen = (size_t)(sp - p);
        for (int k = 0; k < f->nkeys; k++) {
            if (f->keylens[k] == klen && out[k] == INT64_MIN && memcmp(f->keys[k], p, klen) == 0) {
                const char *v = sp, *ve = eol;
                while (v < ve && is_blank(*v)) v++;
                while (ve > v && is_blank(ve[-1])) ve--;
                int rc = parse_int(v, ve, &out[k]);
                if (rc < 0) return rc;
                found++;
                break;
            }
        }
        p = eol + 1;
    }
    return 0;
}

int kn_reader_read(kn_reader *r, int64_t *values, int *status) {
    int failed = 0;
    for (int i = 0; i < r->n; i++) {
        struct kn_file *f = &r->files[i];
        int nslots = f->kind == KN_KEYVALUE ? f->nkeys : 1;
        int64_t *out = values + f->slot;
        for (int k = 0; k < nslots; k++) out[k] = INT64_MIN;
        int st = 0;
        if (f->fd < 0) {
            f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
            if (f->fd < 0) st = -errno;
        }
        if (st == 0) {
            ssize_t got = pread(f->fd, r->buf, r->bufsize, 0);
            if (got < 0) {
                st = -errno;
                /* ENODEV: the cgroup was removed while we held its file; a new cgroup at the same
                 * path needs a fresh open */
                if (st == -ENODEV || st == -ENOENT) {
                    close(f->fd);
                    f->fd = -1;
                }
            } else if ((size_t)got == r->bufsize) {
                st = -EOVERFLOW;
            } else if (f->kind == KN_COUNTER) {
                st = parse_counter(r->buf, (size_t)got, out);
            } else if (f->kind == KN_CPULIST) {
                st = parse_cpulist(r->buf, (size_t)got, out);
            } else {
                st = parse_keyvalue(f, r->buf, (size_t)got, out);
            }
            if (st < 0)
                for (int k = 0; k < nslots; k++) out[k] = INT64_MIN;
        }
        status[i] = st;
        failed += st != 0;
    }
    return failed;
}

/* Beyond 2^53 an int64 is not exact as a double, and Python divides such ints exactly: those take the
 * per-target sweep, so both paths give the same floats. */
#define KN_EXACT ((int64_t)1 << 53)

int kn_sweep_rates(const int64_t *values, const int *o_cpu, const int *o_mem, const int *o_thr, int n,
                   int64_t cpu_scale, double dt, double limit_ns, int64_t *base_cpu, int64_t *base_per,
                   int64_t *base_thr, unsigned char *fresh, double *cpu_out, double *mem_out, double *thr_out) {
    const double denom = dt * 1e9;
    /* every check before any baseline moves: a refused sweep leaves the caller's state as it was */
    for (int j = 0; j < n; j++) {
        int64_t ns, mem, a = values[o_mem[j]], b = values[o_mem[j] + 1], c = values[o_mem[j] + 2];
        int64_t per = values[o_thr[j]], thr = values[o_thr[j] + 1], raw = values[o_cpu[j]];
        if (raw == INT64_MIN || a == INT64_MIN || b == INT64_MIN || c == INT64_MIN || per == INT64_MIN ||
            thr == INT64_MIN)
            return 1;
        if (__builtin_mul_overflow(raw, cpu_scale, &ns) || __builtin_add_overflow(a, b, &mem) ||
            __builtin_add_overflow(mem, c, &mem) || mem >= KN_EXACT || mem <= -KN_EXACT)
            return 1;
        mem_out[j] = (double)mem;
        if (fresh[j]) {
            cpu_out[j] = thr_out[j] = 0.0;
            continue;
        }
        int64_t dcpu, dper, dthr;
        if (__builtin_sub_overflow(ns, base_cpu[j], &dcpu) || __builtin_sub_overflow(per, base_per[j], &dper) ||
            __builtin_sub_overflow(thr, base_thr[j], &dthr))
            return 1;
        if (dcpu < 0 || dper < 0 || dthr < 0 || dcpu >= KN_EXACT || dper >= KN_EXACT || dthr >= KN_EXACT ||
            (double)dcpu > limit_ns)
            return 1;
        cpu_out[j] = (double)dcpu / denom;
        thr_out[j] = dper ? (double)dthr / (double)dper : 0.0;
    }
    for (int j = 0; j < n; j++) {
        base_cpu[j] = values[o_cpu[j]] * cpu_scale;
        base_per[j] = values[o_thr[j]];
        base_thr[j] = values[o_thr[j] + 1];
        fresh[j] = 0;
    }
    return 0;
}

static int write_one(const char *path, const char *data, size_t len) {
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) return errno;
    ssize_t n = write(fd, data, len);
    /* cgroup files take one value per write(2); a short write means the kernel took part of it */
    int err = n < 0 ? errno : ((size_t)n != len ? EIO : 0);
    if (close(fd) < 0 && err == 0) err = errno;
    return err;
}

int kn_write_batch(const char *const *paths, const char *const *values, const size_t *lens, int n, int *errs) {
    int failed = 0;
    for (int i = 0; i < n; i++) {
        errs[i] = write_one(paths[i], values[i], lens[i]);
        failed += errs[i] != 0;
    }
    return failed;
}

int kn_write_schemata(const char *path, const char *data, size_t len, const char *status_path, char *msg,
                      size_t msgcap) {
    if (msgcap > 0) msg[0] = '\0';
    int err = write_one(path, data, len);
    if (err == 0 || msgcap == 0) return err;
    /* resctrl explains EINVAL only through info/last_cmd_status (e.g. "Mask out of range") */
    int fd = open(status_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err;
    ssize_t got = read(fd, msg, msgcap - 1);
    close(fd);
    if (got < 0) got = 0;
    while (got > 0 && is_blank(msg[got - 1])) got--;
    msg[got] = '\0';
    return err;
}
