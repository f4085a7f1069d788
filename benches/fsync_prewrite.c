/* What one durable 1 KiB append costs on this disk, by how the file's blocks came to be:
 * the question behind RocketMQ's warmMapedFileEnable (write a new segment's blocks for real
 * so later syncs are pure overwrites).
 *
 *   cc -O2 -o /tmp/fsync_prewrite benches/fsync_prewrite.c
 *   /tmp/fsync_prewrite <file on the store's disk> <mode> <how> <appends>
 *
 * mode: 0 sparse (ftruncate), 1 fallocate (unwritten extents, what the CommitLog does),
 *       2 zeros written with pwrite + fsync, 3 fallocate + zeros written through the mapping
 *       (4 KiB page-cache folios, as the store's appender sees them) + msync;
 * how:  0 msync(MS_SYNC) of the appended range, 1 fdatasync.
 * Each append copies 1,100 bytes into a MAP_SHARED mapping (MADV_RANDOM) and syncs it; prints
 * appends/s, latency p50/p99, CPU per append (user + system) and context switches per append.
 * The file is removed at the end. Machine load changes the latencies a lot: compare modes in
 * alternating runs; CPU and context switches per append are the steadier figures.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double cpu_us(const struct rusage *r) {
    return r->ru_utime.tv_sec * 1e6 + r->ru_utime.tv_usec + r->ru_stime.tv_sec * 1e6 + r->ru_stime.tv_usec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s FILE MODE(0-3) HOW(0 msync, 1 fdatasync) APPENDS\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    int mode = atoi(argv[2]), how = atoi(argv[3]), n = atoi(argv[4]);
    const size_t size = 64 << 20, len = 1100;
    if (n <= 0 || (size_t)n * len > size) {
        fprintf(stderr, "APPENDS must be 1..%zu\n", size / len);
        return 2;
    }
    unlink(path);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    if (mode == 0) {
        if (ftruncate(fd, size)) perror("ftruncate");
    } else if (mode == 1 || mode == 3) {
        if (fallocate(fd, 0, 0, size)) perror("fallocate");
    } else {
        char *z = calloc(1, 1 << 20);
        for (size_t o = 0; o < size; o += 1 << 20)
            if (pwrite(fd, z, 1 << 20, o) != 1 << 20) perror("pwrite");
        fsync(fd);
        free(z);
    }
    char *m = mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(m, size, MADV_RANDOM);
    if (mode == 3) {
        for (size_t o = 0; o < size; o += 4096) m[o] = 0;
        msync(m, size, MS_SYNC);
    }
    sleep(1); /* let the preparation's writes settle */
    char buf[1100];
    memset(buf, 'x', sizeof buf);
    double *lat = malloc(n * sizeof(double));
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now_us();
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        double s = now_us();
        memcpy(m + off, buf, len);
        size_t from = off & ~4095UL;
        if (how == 0)
            msync(m + from, off + len - from, MS_SYNC);
        else
            fdatasync(fd);
        off += len;
        lat[i] = now_us() - s;
    }
    double t1 = now_us();
    getrusage(RUSAGE_SELF, &r1);
    qsort(lat, n, sizeof(double), cmp);
    printf("mode=%d how=%d appends=%d  %.0f/s  p50=%.1f us p99=%.1f us  cpu=%.1f us/append  "
           "ctxsw=%.2f/append\n",
           mode, how, n, n / ((t1 - t0) / 1e6), lat[n / 2], lat[n * 99 / 100],
           (cpu_us(&r1) - cpu_us(&r0)) / n,
           (double)(r1.ru_nvcsw - r0.ru_nvcsw + r1.ru_nivcsw - r0.ru_nivcsw) / n);
    munmap(m, size);
    close(fd);
    unlink(path);
    return 0;
}
