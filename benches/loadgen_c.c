/*
 * Native raw-frame produce generator for benches/broker_bench.py (the "produce" mode of loadgen.py in C).
 *
 * Python (loadgen.py, native_templates) pre-encodes one SEND_MESSAGE_V2 request frame per queue id, with two
 * fixed-width fields to patch per request: the opaque (10 characters, right-aligned, space-padded: JSON
 * allows the spaces) and the last 12 hex digits of the UNIQ_KEY property. This program opens `conns`
 * connections, keeps `inflight` requests outstanding on each with an epoll loop, matches responses by the
 * opaque found in the JSON header, and times every request with CLOCK_MONOTONIC.
 *
 *   loadgen_c HOST PORT CONNS INFLIGHT TEMPLATE_FILE LAT_PATH WORKER_ID [TX_GROUP UNIQ_PREFIX]
 *
 * With TX_GROUP the templates are transactional half messages (sysFlag TRANSACTION_PREPARED_TYPE, properties
 * TRAN_MSG and PGROUP): every one answered SEND_OK is committed as a Java TransactionMQProducer commits it, by
 * a oneway END_TRANSACTION (commitOrRollback 8) naming the half message's queue offset and CommitLog offset
 * (from the offset message id the answer carries) and its UNIQ_KEY (UNIQ_PREFIX + the 12 patched digits).
 *
 * TEMPLATE_FILE: int32 count, then per template int32 frame_len, int32 opaque_pos, int32 uniq_pos, frame.
 * Protocol with the parent as loadgen.py: prints READY once connected, reads "GO <start> <end>"
 * (CLOCK_MONOTONIC seconds) on stdin, runs until <end>, drains for at most 10 s, writes the latencies (doubles,
 * microseconds, requests sent inside the window and answered inside it) to LAT_PATH and prints one JSON line.
 *
 * Build: cc -O2 -o loadgen_c loadgen_c.c (broker_bench.py does this into a cache directory).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RING 65536            /* send-time slots per connection (max requests in flight) */
#define SPAN (1LL << 23)      /* opaques of one connection: base + (seq mod SPAN), a multiple of RING */
#define RBUF (4 << 20)
#define DRAIN 10.0

typedef struct {
    unsigned char *frame;
    int len, opaque_pos, uniq_pos;
} tmpl_t;

typedef struct {
    int fd;
    int idx;
    long long base;     /* first opaque of this connection: (worker * 16 + conn) * SPAN < 2^31 */
    long long next;     /* next sequence number */
    int outstanding;
    double *sent;       /* RING entries: send time, or 0 when free */
    unsigned char *rbuf;
    size_t rlen;
    unsigned char *wbuf;
    size_t wlen, woff, wcap;
    int want_out;
    int done;
} conn_t;

static tmpl_t *tmpls;
static int ntmpl;
static double start_at, end_at;
static long long ok_in_window, ok_total, errors;
static double *lat;
static size_t nlat, caplat;
static int epfd;
static int stopping;
static char err_sample[256];
static int inflight;
static const char *tx_group, *tx_prefix;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void lat_push(double us) {
    if (nlat == caplat) {
        caplat = caplat ? caplat * 2 : 1 << 20;
        lat = realloc(lat, caplat * sizeof(double));
        if (!lat) die("realloc");
    }
    lat[nlat++] = us;
}

static void wbuf_reserve(conn_t *c, size_t extra) {
    if (c->wlen + extra > c->wcap) {
        if (c->woff) {
            memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
            c->wlen -= c->woff;
            c->woff = 0;
        }
        while (c->wlen + extra > c->wcap) c->wcap = c->wcap ? c->wcap * 2 : 65536;
        c->wbuf = realloc(c->wbuf, c->wcap);
        if (!c->wbuf) die("realloc");
    }
}

static void set_events(conn_t *c, int out) {
    if (c->want_out == out) return;
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) die("epoll_ctl");
    c->want_out = out;
}

static void flush_conn(conn_t *c) {
    while (c->woff < c->wlen) {
        ssize_t n = write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            die("write");
        }
        c->woff += (size_t)n;
    }
    if (c->woff == c->wlen) c->woff = c->wlen = 0;
    set_events(c, c->wlen != 0);
}

/* `v` (>= 0) in decimal, right-aligned in `width` bytes padded with spaces (as "%*lld"; the
   frame's JSON header reads the padded number the same). Per request: cheaper than snprintf. */
static void put_decimal(unsigned char *out, int width, long long v) {
    int i = width - 1;
    do {
        out[i--] = (unsigned char)('0' + v % 10);
        v /= 10;
    } while (v && i >= 0);
    while (i >= 0) out[i--] = ' ';
}

/* `v` in upper-case hex, zero-padded to `width` bytes (as "%0*llX"). */
static void put_hex(unsigned char *out, int width, long long v) {
    static const char digits[] = "0123456789ABCDEF";
    unsigned long long u = (unsigned long long)v;
    for (int i = width - 1; i >= 0; i--, u >>= 4) out[i] = (unsigned char)digits[u & 15];
}

static void fill(conn_t *c, double t) {
    if (t >= end_at) stopping = 1;
    if (stopping) {
        if (c->wlen) flush_conn(c); /* commits queued by the last answers */
        return;
    }
    int k = inflight - c->outstanding;
    for (int i = 0; i < k; i++) {
        long long seq = c->next;
        if (c->sent[seq % RING] != 0.0) break; /* an old request is still out: ring full */
        long long op = c->base + (seq & (SPAN - 1));
        tmpl_t *tp = &tmpls[seq % ntmpl];
        wbuf_reserve(c, (size_t)tp->len);
        unsigned char *f = c->wbuf + c->wlen;
        memcpy(f, tp->frame, (size_t)tp->len);
        put_decimal(f + tp->opaque_pos, 10, op);
        put_hex(f + tp->uniq_pos, 12, op);
        c->wlen += (size_t)tp->len;
        c->sent[seq % RING] = t;
        c->next++;
        c->outstanding++;
    }
    flush_conn(c);
}

static long long find_num(const unsigned char *h, size_t n, const char *key, int *found) {
    const unsigned char *p = memmem(h, n, key, strlen(key));
    *found = 0;
    if (!p) return 0;
    p += strlen(key);
    const unsigned char *e = h + n;
    while (p < e && (*p == ' ' || *p == ':' || *p == '"')) p++;
    int neg = 0;
    if (p < e && *p == '-') { neg = 1; p++; }
    long long v = 0;
    while (p < e && *p >= '0' && *p <= '9') { v = v * 10 + (*p - '0'); p++; *found = 1; }
    return neg ? -v : v;
}

/* The string value of `key` in a JSON header (hex digits only), into out (NUL-terminated); its length. */
static size_t find_hex(const unsigned char *h, size_t n, const char *key, char *out, size_t cap) {
    const unsigned char *p = memmem(h, n, key, strlen(key));
    size_t k = 0;
    if (!p) return 0;
    p += strlen(key);
    const unsigned char *e = h + n;
    while (p < e && (*p == ' ' || *p == ':' || *p == '"')) p++;
    while (p < e && k + 1 < cap && ((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'F') || (*p >= 'a' && *p <= 'f')))
        out[k++] = (char)*p++;
    out[k] = 0;
    return k;
}

/* Queue the oneway END_TRANSACTION that commits the half message answered by header `h`. */
static void commit(conn_t *c, const unsigned char *h, size_t hlen, long long op) {
    char msg_id[64];
    int found;
    long long queue_offset = find_num(h, hlen, "\"queueOffset\"", &found);
    size_t n = find_hex(h, hlen, "\"msgId\"", msg_id, sizeof msg_id);
    if (!found || n < 16) {
        errors++;
        if (!err_sample[0]) snprintf(err_sample, sizeof err_sample, "a send answer without msgId/queueOffset");
        return;
    }
    unsigned long long log_offset = strtoull(msg_id + n - 16, NULL, 16);
    char hdr[768];
    int hl = snprintf(hdr, sizeof hdr,
                      "{\"code\":37,\"extFields\":{\"producerGroup\":\"%s\",\"tranStateTableOffset\":\"%lld\","
                      "\"commitLogOffset\":\"%llu\",\"commitOrRollback\":\"8\",\"fromTransactionCheck\":\"false\","
                      "\"msgId\":\"%s%012llX\",\"transactionId\":\"%s%012llX\"},\"flag\":2,\"language\":\"JAVA\","
                      "\"opaque\":%lld,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":409}",
                      tx_group, queue_offset, log_offset, tx_prefix, op, tx_prefix, op, op);
    if (hl <= 0 || (size_t)hl >= sizeof hdr) die("END_TRANSACTION header");
    wbuf_reserve(c, (size_t)hl + 8);
    uint32_t w[2] = {htonl((uint32_t)hl + 4), htonl((uint32_t)hl)};
    memcpy(c->wbuf + c->wlen, w, 8);
    memcpy(c->wbuf + c->wlen + 8, hdr, (size_t)hl);
    c->wlen += (size_t)hl + 8;
}

static void on_readable(conn_t *c) {
    /* One read per wake-up (level-triggered epoll calls again if more is buffered). */
    if (c->rlen == RBUF) {
        fprintf(stderr, "a response frame larger than %d bytes\n", RBUF);
        exit(2);
    }
    ssize_t n;
    do {
        n = read(c->fd, c->rbuf + c->rlen, RBUF - c->rlen);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        die("read");
    }
    if (n == 0) {
        fprintf(stderr, "connection %d closed by peer\n", c->idx);
        c->done = 1;
        return;
    }
    c->rlen += (size_t)n;
    double t = now_s();
    int in_window = t >= start_at && t <= end_at;
    size_t pos = 0;
    while (c->rlen - pos >= 8) {
        uint32_t len_be, word_be;
        memcpy(&len_be, c->rbuf + pos, 4);
        memcpy(&word_be, c->rbuf + pos + 4, 4);
        size_t len = ntohl(len_be), hlen = ntohl(word_be) & 0xFFFFFF;
        if (c->rlen - pos < 4 + len) break;
        const unsigned char *h = c->rbuf + pos + 8;
        int fo, fc;
        long long op = find_num(h, hlen, "\"opaque\"", &fo);
        long long code = find_num(h, hlen, "\"code\"", &fc);
        pos += 4 + len;
        if (!fo) continue;
        long long rel = op - c->base;
        if (rel < 0 || rel >= SPAN) continue;
        double t0 = c->sent[rel % RING];
        if (t0 == 0.0) continue;
        c->sent[rel % RING] = 0.0;
        c->outstanding--;
        if (!fc || code != 0) {
            errors++;
            if (!err_sample[0]) {
                size_t m = hlen < sizeof err_sample - 1 ? hlen : sizeof err_sample - 1;
                for (size_t i = 0; i < m; i++) err_sample[i] = (h[i] == '"' || h[i] == '\\' || h[i] < 32) ? '\'' : (char)h[i];
            }
            continue;
        }
        if (tx_group) commit(c, h, hlen, op);
        ok_total++;
        if (in_window) {
            ok_in_window++;
            if (t0 >= start_at) lat_push((t - t0) * 1e6);
        }
    }
    if (pos) {
        memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
        c->rlen -= pos;
    }
    fill(c, t);
    if (stopping && c->outstanding == 0 && c->wlen == 0) c->done = 1;
}

static tmpl_t *load_templates(const char *path, int *count) {
    FILE *f = fopen(path, "rb");
    if (!f) die("template file");
    int32_t n;
    if (fread(&n, 4, 1, f) != 1) die("template count");
    tmpl_t *t = calloc((size_t)n, sizeof *t);
    for (int i = 0; i < n; i++) {
        int32_t hdr[3];
        if (fread(hdr, 4, 3, f) != 3) die("template header");
        t[i].len = hdr[0];
        t[i].opaque_pos = hdr[1];
        t[i].uniq_pos = hdr[2];
        t[i].frame = malloc((size_t)hdr[0]);
        if (fread(t[i].frame, 1, (size_t)hdr[0], f) != (size_t)hdr[0]) die("template frame");
    }
    fclose(f);
    *count = n;
    return t;
}

#include "loadgen_wait.h"

int main(int argc, char **argv) {
    if (argc != 8 && argc != 10) {
        fprintf(stderr, "usage: %s HOST PORT CONNS INFLIGHT TEMPLATE_FILE LAT_PATH WORKER_ID [TX_GROUP UNIQ_PREFIX]\n",
                argv[0]);
        return 2;
    }
    if (argc == 10) {
        tx_group = argv[8];
        tx_prefix = argv[9];
    }
    const char *host = argv[1];
    int port = atoi(argv[2]), nconn = atoi(argv[3]);
    inflight = atoi(argv[4]);
    const char *lat_path = argv[6];
    int wid = atoi(argv[7]);
    tmpls = load_templates(argv[5], &ntmpl);
    if (inflight < 1 || inflight > RING / 2 || nconn < 1 || nconn > 16 || wid < 0 || wid > 15) {
        fprintf(stderr, "bad conns/inflight/worker id (at most 16 workers x 16 connections)\n");
        return 2;
    }

    epfd = epoll_create1(0);
    if (epfd < 0) die("epoll_create1");
    conn_t *conns = calloc((size_t)nconn, sizeof *conns);
    for (int i = 0; i < nconn; i++) {
        conn_t *c = &conns[i];
        c->idx = i;
        c->base = (long long)(wid * 16 + i) * SPAN;
        c->sent = calloc(RING, sizeof(double));
        c->rbuf = malloc(RBUF);
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0) die("socket");
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) die("inet_pton");
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("connect");
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
    }
    printf("READY\n");
    fflush(stdout);
    char line[256];
    if (!fgets(line, sizeof line, stdin) || sscanf(line, "GO %lf %lf", &start_at, &end_at) != 2) {
        fprintf(stderr, "expected GO line\n");
        return 2;
    }
    double t_begin = now_s(), cpu0 = cpu_s(), last_recv = 0;
    for (int i = 0; i < nconn; i++) fill(&conns[i], t_begin);
    struct epoll_event evs[64];
    const char *spin_env = getenv("LOADGEN_SPIN_US");
    double spin_us = spin_env ? atof(spin_env) : 0, idle_s = 0;
    for (;;) {
        double t = now_s();
        if (t >= end_at) stopping = 1;
        int alive = 0;
        for (int i = 0; i < nconn; i++)
            alive += !conns[i].done && (!stopping || conns[i].outstanding > 0 || conns[i].wlen > 0);
        if (!alive || t > end_at + DRAIN) break;
        int n = wait_events(epfd, evs, 64, spin_us, &idle_s);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (c->done) continue;
            if (evs[i].events & EPOLLOUT) {
                flush_conn(c);
                if (stopping && c->outstanding == 0 && c->wlen == 0) c->done = 1;
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                on_readable(c);
                last_recv = now_s();
            }
        }
    }
    double cpu = cpu_s() - cpu0;
    int unfinished = 0;
    for (int i = 0; i < nconn; i++) {
        unfinished += conns[i].outstanding > 0;
        close(conns[i].fd);
    }
    FILE *lf = fopen(lat_path, "wb");
    if (lf) {
        fwrite(lat, sizeof(double), nlat, lf);
        fclose(lf);
    }
    printf("{\"mode\": \"produce\", \"ok\": %lld, \"ok_total\": %lld, \"errors\": %lld, \"error_samples\": {",
           ok_in_window, ok_total, errors);
    if (errors) printf("\"%s\": %lld", err_sample, errors);
    printf("}, \"msgs\": 0, \"bytes\": 0, \"expected\": null, \"unfinished_conns\": %d, \"failures\": [], "
           "\"t_begin\": %.6f, \"first_send\": %.6f, \"last_recv\": %.6f, \"window\": [%.6f, %.6f], "
           "\"cpu\": %.6f, \"idle_poll\": %.6f, \"native\": true}\n",
           unfinished, t_begin, t_begin, last_recv, start_at, end_at, cpu, idle_s);
    fflush(stdout);
    return 0;
}
