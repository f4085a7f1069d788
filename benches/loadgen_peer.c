/*
 * Native produce generator against broker_bench.py's peers, the same shape as loadgen_c.c: `conns`
 * connections, `inflight` requests outstanding on each, an epoll loop, one request frame pre-encoded at
 * start (only a fixed-width sequence number is patched per request), every request timed with
 * CLOCK_MONOTONIC, the same READY / GO / JSON-line protocol with the parent and the same output.
 *
 *   loadgen_peer redis HOST PORT CONNS INFLIGHT BODY_SIZE LAT_PATH WORKER_ID STREAM
 *   loadgen_peer nats  HOST PORT CONNS INFLIGHT BODY_SIZE LAT_PATH WORKER_ID SUBJECT
 *
 * redis: `XADD STREAM * f <body>` in RESP; every connection appends to the same stream (as Redis's own
 *   benchmark does with one key). Redis answers a connection's requests in order, so a reply completes the
 *   oldest request outstanding on it: a bulk string (the entry id) is a success, an error reply an error.
 * nats: `PUB SUBJECT _INBOX.<worker>.<conn>.<seq> <n>` to a subject a JetStream stream captures; the
 *   connection first sends CONNECT {"verbose":false,"pedantic":false,"headers":true} and SUB
 *   _INBOX.<worker>.<conn>.* and waits for the PONG of a PING, so the subscription is in place before the
 *   first publish. A request completes when its ack arrives on its reply subject (matched by <seq>): a
 *   PubAck (`{"stream":...,"seq":...}`) is a success, an ack holding "error" (or a header-only status
 *   message, HMSG) an error. The server's PINGs are answered.
 *
 * Build: cc -O2 -o loadgen_peer loadgen_peer.c (broker_bench.py does this into a temporary directory).
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

#define RING 65536  /* send-time slots per connection (max requests in flight) */
#define RBUF (1 << 20)
#define DRAIN 10.0
#define SEQ_DIGITS 10

enum { REDIS, NATS };

typedef struct {
    int fd;
    int idx;
    long long next;   /* sequence number of the next request */
    long long oldest; /* redis: sequence number of the oldest request outstanding */
    int outstanding;
    double *sent;     /* RING entries: send time, or 0 when free */
    unsigned char *rbuf;
    size_t rlen;
    unsigned char *wbuf;
    size_t wlen, woff, wcap;
    char *req;        /* this connection's pre-encoded request */
    size_t req_len, seq_pos;
    int want_out;
    int done;
} conn_t;

static int mode;
static double start_at, end_at;
static long long ok_in_window, ok_total, errors;
static double *lat;
static size_t nlat, caplat;
static int epfd;
static int stopping;
static char err_sample[256];
static int inflight;

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

static void note_error(const unsigned char *what, size_t n) {
    errors++;
    if (err_sample[0]) return;
    size_t m = n < sizeof err_sample - 1 ? n : sizeof err_sample - 1;
    for (size_t i = 0; i < m; i++) err_sample[i] = (what[i] == '"' || what[i] == '\\' || what[i] < 32) ? '\'' : (char)what[i];
}

static void wbuf_append(conn_t *c, const void *p, size_t n) {
    if (c->wlen + n > c->wcap) {
        if (c->woff) {
            memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
            c->wlen -= c->woff;
            c->woff = 0;
        }
        while (c->wlen + n > c->wcap) c->wcap = c->wcap ? c->wcap * 2 : 65536;
        c->wbuf = realloc(c->wbuf, c->wcap);
        if (!c->wbuf) die("realloc");
    }
    memcpy(c->wbuf + c->wlen, p, n);
    c->wlen += n;
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

static void fill(conn_t *c, double t) {
    if (t >= end_at) stopping = 1;
    if (stopping) return;
    int k = inflight - c->outstanding;
    for (int i = 0; i < k; i++) {
        long long seq = c->next;
        if (c->sent[seq % RING] != 0.0) break; /* an old request is still out: ring full */
        if (mode == NATS) {
            char tmp[SEQ_DIGITS + 1];
            snprintf(tmp, sizeof tmp, "%0*lld", SEQ_DIGITS, seq);
            memcpy(c->req + c->seq_pos, tmp, SEQ_DIGITS);
        }
        wbuf_append(c, c->req, c->req_len);
        c->sent[seq % RING] = t;
        c->next++;
        c->outstanding++;
    }
    flush_conn(c);
}

/* The request `seq` of `c` was answered at `t`: success or not. */
static void complete(conn_t *c, long long seq, int ok, double t) {
    if (seq < 0 || seq >= c->next) return;
    double t0 = c->sent[seq % RING];
    if (t0 == 0.0) return;
    c->sent[seq % RING] = 0.0;
    c->outstanding--;
    if (!ok) return; /* counted by the caller, with its sample */
    ok_total++;
    if (t >= start_at && t <= end_at) {
        ok_in_window++;
        if (t0 >= start_at) lat_push((t - t0) * 1e6);
    }
}

static const unsigned char *find_crlf(const unsigned char *p, const unsigned char *e) {
    const unsigned char *q = memmem(p, (size_t)(e - p), "\r\n", 2);
    return q;
}

/* Parse Redis replies in c->rbuf[0..rlen); returns the bytes consumed. */
static size_t parse_redis(conn_t *c, double t) {
    const unsigned char *b = c->rbuf, *e = c->rbuf + c->rlen, *p = b;
    while (p < e) {
        const unsigned char *nl = find_crlf(p, e);
        if (!nl) break;
        const unsigned char *next = nl + 2;
        int ok;
        if (*p == '$') { /* a bulk string: the entry id XADD answers */
            long long n = atoll((const char *)p + 1);
            if (n >= 0) {
                if (e - next < n + 2) break;
                next += n + 2;
            }
            ok = n >= 0;
        } else {
            ok = *p == '+' || *p == ':';
        }
        if (!ok) note_error(p, (size_t)(nl - p)); /* an error reply, or not the reply XADD gives */
        complete(c, c->oldest++, ok, t);
        p = next;
    }
    return (size_t)(p - b);
}

/* The request sequence at the end of a reply subject `_INBOX.w.c.<seq>`, or -1. */
static long long subject_seq(const unsigned char *s, size_t n) {
    if (n < SEQ_DIGITS) return -1;
    long long v = 0;
    for (size_t i = n - SEQ_DIGITS; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* Parse NATS protocol lines and messages in c->rbuf[0..rlen); returns the bytes consumed. */
static size_t parse_nats(conn_t *c, double t) {
    const unsigned char *b = c->rbuf, *e = c->rbuf + c->rlen, *p = b;
    while (p < e) {
        const unsigned char *nl = find_crlf(p, e);
        if (!nl) break;
        size_t ll = (size_t)(nl - p);
        const unsigned char *next = nl + 2;
        if (ll >= 4 && (memcmp(p, "MSG ", 4) == 0 || memcmp(p, "HMSG", 4) == 0)) {
            int hmsg = p[0] == 'H';
            /* MSG <subject> <sid> [reply] <size> / HMSG <subject> <sid> [reply] <hdr> <total> */
            char line[512];
            size_t m = ll < sizeof line - 1 ? ll : sizeof line - 1;
            memcpy(line, p, m);
            line[m] = 0;
            char *tok[6];
            int nt = 0;
            for (char *s = strtok(line, " "); s && nt < 6; s = strtok(NULL, " ")) tok[nt++] = s;
            if (nt < 4) {
                note_error(p, ll);
                p = next;
                continue;
            }
            long long total = atoll(tok[nt - 1]);
            if (e - next < total + 2) break;
            const unsigned char *payload = next;
            long long seq = subject_seq((const unsigned char *)tok[1], strlen(tok[1]));
            int ok = !hmsg && memmem(payload, (size_t)total, "\"error\"", 7) == NULL;
            if (!ok) note_error(payload, (size_t)total);
            complete(c, seq, ok, t);
            next += total + 2;
        } else if (ll == 4 && memcmp(p, "PING", 4) == 0) {
            wbuf_append(c, "PONG\r\n", 6);
        } else if (ll >= 4 && memcmp(p, "-ERR", 4) == 0) {
            note_error(p, ll);
        } /* INFO, PONG, +OK: nothing to do */
        p = next;
    }
    return (size_t)(p - b);
}

static void on_readable(conn_t *c) {
    /* One read per wake-up (level-triggered epoll calls again if more is buffered). */
    if (c->rlen == RBUF) {
        fprintf(stderr, "a reply larger than %d bytes\n", RBUF);
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
    size_t pos = mode == REDIS ? parse_redis(c, t) : parse_nats(c, t);
    if (pos) {
        memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
        c->rlen -= pos;
    }
    fill(c, t);
    if (stopping && c->outstanding == 0) c->done = 1;
}

/* Blocking: read until `want` has arrived (NATS: the PONG after CONNECT and SUB); -ERR stops the run. */
static void await_line(int fd, const char *want) {
    char buf[8192];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n <= 0) die("handshake read");
        len += (size_t)n;
        buf[len] = 0;
        char *err = strstr(buf, "-ERR");
        if (err) {
            fprintf(stderr, "server refused the handshake: %s\n", err);
            exit(2);
        }
        if (strstr(buf, want)) return;
        if (len > sizeof buf / 2) { /* drop what was read but keep a tail a match may straddle */
            memmove(buf, buf + len - 16, 16);
            len = 16;
        }
    }
}

static void write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            die("handshake write");
        }
        p += w;
        n -= (size_t)w;
    }
}

#include "loadgen_wait.h"

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: %s redis|nats HOST PORT CONNS INFLIGHT BODY_SIZE LAT_PATH WORKER_ID STREAM|SUBJECT\n",
                argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "redis") == 0) mode = REDIS;
    else if (strcmp(argv[1], "nats") == 0) mode = NATS;
    else {
        fprintf(stderr, "unknown mode %s (redis | nats)\n", argv[1]);
        return 2;
    }
    const char *host = argv[2];
    int port = atoi(argv[3]), nconn = atoi(argv[4]);
    inflight = atoi(argv[5]);
    int body_size = atoi(argv[6]);
    const char *lat_path = argv[7];
    int wid = atoi(argv[8]);
    const char *target = argv[9];
    if (inflight < 1 || inflight > RING / 2 || nconn < 1 || nconn > 99 || wid < 0 || wid > 99 || body_size < 1 ||
        body_size > (1 << 20) || !*target || strlen(target) > 200) {
        fprintf(stderr, "bad conns/inflight/body size/worker id/target\n");
        return 2;
    }
    char *body = malloc((size_t)body_size);
    for (int i = 0; i < body_size; i++) body[i] = "0123456789abcdef"[i % 16];

    epfd = epoll_create1(0);
    if (epfd < 0) die("epoll_create1");
    conn_t *conns = calloc((size_t)nconn, sizeof *conns);
    for (int i = 0; i < nconn; i++) {
        conn_t *c = &conns[i];
        c->idx = i;
        c->sent = calloc(RING, sizeof(double));
        c->rbuf = malloc(RBUF);
        /* The request: header, body, CRLF. */
        char head[512];
        int hl;
        if (mode == REDIS) {
            hl = snprintf(head, sizeof head, "*5\r\n$4\r\nXADD\r\n$%zu\r\n%s\r\n$1\r\n*\r\n$1\r\nf\r\n$%d\r\n",
                          strlen(target), target, body_size);
        } else {
            hl = snprintf(head, sizeof head, "PUB %s _INBOX.%02d.%02d.%0*d %d\r\n", target, wid, i, SEQ_DIGITS, 0,
                          body_size);
            c->seq_pos = (size_t)hl - 2 - (size_t)snprintf(NULL, 0, " %d", body_size) - SEQ_DIGITS;
        }
        c->req_len = (size_t)hl + (size_t)body_size + 2;
        c->req = malloc(c->req_len);
        memcpy(c->req, head, (size_t)hl);
        memcpy(c->req + hl, body, (size_t)body_size);
        memcpy(c->req + hl + body_size, "\r\n", 2);

        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0) die("socket");
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) die("inet_pton");
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("connect");
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (mode == NATS) {
            char hs[256];
            int n = snprintf(hs, sizeof hs,
                             "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"name\":\"loadgen_peer\"}"
                             "\r\nSUB _INBOX.%02d.%02d.* 1\r\nPING\r\n",
                             wid, i);
            write_all(c->fd, hs, (size_t)n);
            await_line(c->fd, "PONG\r\n");
        } else {
            write_all(c->fd, "PING\r\n", 6);
            await_line(c->fd, "+PONG\r\n");
        }
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
        for (int i = 0; i < nconn; i++) alive += !conns[i].done && (!stopping || conns[i].outstanding > 0);
        if (!alive || t > end_at + DRAIN) break;
        int n = wait_events(epfd, evs, 64, spin_us, &idle_s);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (c->done) continue;
            if (evs[i].events & EPOLLOUT) flush_conn(c);
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
           "\"cpu\": %.6f, \"idle_poll\": %.6f, \"native\": true, \"peer\": \"%s\"}\n",
           unfinished, t_begin, t_begin, last_recv, start_at, end_at, cpu, idle_s, argv[1]);
    fflush(stdout);
    return 0;
}
