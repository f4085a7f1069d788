/*
 * The loopback request/response ceiling for benches/broker_bench.py: a single-threaded epoll server in C that
 * speaks just enough of the RocketMQ remoting frame format (REMOTING.md §1.1) to be driven by the same load
 * generators as the broker, and does no broker work. (It replaces benches/echo_server.py, a uvloop server that
 * was slower than the broker, so broker rows read above 100 % of their "ceiling".)
 *
 * Per request frame (4-byte length, 4-byte header length word, JSON header, body) it finds "code" and "opaque"
 * in the header and answers with a response of the size the broker's answer has:
 *
 *   SEND_MESSAGE / _V2 / BATCH (10, 310, 320): a ~200-byte JSON header shaped like the broker's send response
 *       (msgId, queueId, queueOffset, MSG_REGION, TRACE_ON), no body;
 *   PULL_MESSAGE (11): a pull response header plus maxMsgNums copies of one stored-message record (the bytes of
 *       RECORD_FILE, written by broker_bench.py with echo_server.build_record), so pulls count real records;
 *   GET_ROUTEINFO_BY_TOPIC (105): a route whose only broker is this server (so a client can use it as both its
 *       name server and its broker);
 *   anything else: an empty success response.
 *
 * Responses to the frames of one read leave in one write.
 *
 *   echo_server_c RECORD_FILE [PORT]
 *
 * Prints "ECHO-READY 127.0.0.1:<port>" once listening; exits when stdin closes (the parent went away) or on
 * SIGTERM/SIGINT. Build: cc -O2 -o echo_server_c echo_server.c (broker_bench.py does this for each run).
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
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FRAME (16 << 20)

typedef struct {
    int fd;
    unsigned char *rbuf;
    size_t rlen, rcap;
    unsigned char *wbuf;
    size_t wlen, woff, wcap;
    int want_out;
} conn_t;

static unsigned char *record;
static size_t record_len;
static int port;
static unsigned long long queue_offset;
static int epfd;

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n);
    if (!p) die("realloc");
    return p;
}

static long long find_num(const unsigned char *h, size_t n, const char *key, int *found) {
    size_t klen = strlen(key);
    const unsigned char *p = memmem(h, n, key, klen);
    *found = 0;
    if (!p) return 0;
    p += klen;
    const unsigned char *e = h + n;
    while (p < e && (*p == ' ' || *p == ':' || *p == '"')) p++;
    int neg = 0;
    if (p < e && *p == '-') {
        neg = 1;
        p++;
    }
    long long v = 0;
    while (p < e && *p >= '0' && *p <= '9') {
        v = v * 10 + (*p - '0');
        p++;
        *found = 1;
    }
    return neg ? -v : v;
}

static void reserve(conn_t *c, size_t extra) {
    if (c->wlen + extra <= c->wcap) return;
    if (c->woff) {
        memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
        c->wlen -= c->woff;
        c->woff = 0;
    }
    while (c->wlen + extra > c->wcap) c->wcap = c->wcap ? c->wcap * 2 : 65536;
    c->wbuf = xrealloc(c->wbuf, c->wcap);
}

/* Append one response frame: header text, then nrec copies of the record (the body). */
static void respond(conn_t *c, const char *hdr, int hlen, size_t nrec) {
    size_t body = nrec * record_len;
    reserve(c, 8 + (size_t)hlen + body);
    unsigned char *f = c->wbuf + c->wlen;
    uint32_t len_be = htonl((uint32_t)(4 + hlen + body)), word_be = htonl((uint32_t)hlen);
    memcpy(f, &len_be, 4);
    memcpy(f + 4, &word_be, 4);
    memcpy(f + 8, hdr, (size_t)hlen);
    f += 8 + hlen;
    for (size_t i = 0; i < nrec; i++, f += record_len) memcpy(f, record, record_len);
    c->wlen += 8 + (size_t)hlen + body;
}

static void answer(conn_t *c, const unsigned char *h, size_t hlen) {
    int fo, fc;
    long long opaque = find_num(h, hlen, "\"opaque\"", &fo);
    long long code = find_num(h, hlen, "\"code\"", &fc);
    if (!fo || !fc) return;
    char hdr[1024];
    int n;
    if (code == 10 || code == 310 || code == 320) {
        queue_offset++;
        n = snprintf(hdr, sizeof hdr,
                     "{\"code\":0,\"extFields\":{\"msgId\":\"7F00000100002A9F00000000%08llX\",\"queueId\":\"0\","
                     "\"queueOffset\":\"%llu\",\"MSG_REGION\":\"DefaultRegion\",\"TRACE_ON\":\"true\"},\"flag\":1,"
                     "\"language\":\"JAVA\",\"opaque\":%lld,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":409}",
                     queue_offset & 0xFFFFFFFFULL, queue_offset, opaque);
        respond(c, hdr, n, 0);
    } else if (code == 11) {
        int fm, fq;
        long long nums = find_num(h, hlen, "\"maxMsgNums\"", &fm);
        long long offset = find_num(h, hlen, "\"queueOffset\"", &fq);
        if (!fm || nums < 0 || nums > 4096) nums = 32;
        n = snprintf(hdr, sizeof hdr,
                     "{\"code\":0,\"extFields\":{\"suggestWhichBrokerId\":\"0\",\"nextBeginOffset\":\"%lld\","
                     "\"minOffset\":\"0\",\"maxOffset\":\"%lld\"},\"flag\":1,\"language\":\"JAVA\",\"opaque\":%lld,"
                     "\"remark\":\"FOUND\",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":409}",
                     offset + nums, 1LL << 40, opaque);
        respond(c, hdr, n, (size_t)nums);
    } else if (code == 105) {
        char body[512];
        int bl = snprintf(body, sizeof body,
                          "{\"brokerDatas\":[{\"brokerAddrs\":{\"0\":\"127.0.0.1:%d\"},\"brokerName\":\"echo-broker\","
                          "\"cluster\":\"DefaultCluster\"}],\"filterServerTable\":{},\"queueDatas\":[{\"brokerName\":"
                          "\"echo-broker\",\"perm\":6,\"readQueueNums\":8,\"topicSynFlag\":0,\"writeQueueNums\":8}]}",
                          port);
        n = snprintf(hdr, sizeof hdr,
                     "{\"code\":0,\"flag\":1,\"language\":\"JAVA\",\"opaque\":%lld,\"serializeTypeCurrentRPC\":"
                     "\"JSON\",\"version\":409}",
                     opaque);
        reserve(c, 8 + (size_t)n + (size_t)bl);
        unsigned char *f = c->wbuf + c->wlen;
        uint32_t len_be = htonl((uint32_t)(4 + n + bl)), word_be = htonl((uint32_t)n);
        memcpy(f, &len_be, 4);
        memcpy(f + 4, &word_be, 4);
        memcpy(f + 8, hdr, (size_t)n);
        memcpy(f + 8 + n, body, (size_t)bl);
        c->wlen += 8 + (size_t)n + (size_t)bl;
    } else {
        n = snprintf(hdr, sizeof hdr,
                     "{\"code\":0,\"extFields\":{\"offset\":\"0\"},\"flag\":1,\"language\":\"JAVA\",\"opaque\":%lld,"
                     "\"serializeTypeCurrentRPC\":\"JSON\",\"version\":409}",
                     opaque);
        respond(c, hdr, n, 0);
    }
}

static void set_out(conn_t *c, int out) {
    if (c->want_out == out) return;
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) die("epoll_ctl");
    c->want_out = out;
}

static void close_conn(conn_t *c) {
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->rbuf);
    free(c->wbuf);
    free(c);
}

/* Returns 0 when the connection was closed. */
static int flush_conn(conn_t *c) {
    while (c->woff < c->wlen) {
        ssize_t n = write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            close_conn(c);
            return 0;
        }
        c->woff += (size_t)n;
    }
    if (c->woff == c->wlen) c->woff = c->wlen = 0;
    set_out(c, c->wlen != 0);
    return 1;
}

static void on_readable(conn_t *c) {
    if (c->rcap - c->rlen < 65536) {
        c->rcap = c->rcap ? c->rcap * 2 : 262144;
        if (c->rcap > 2 * MAX_FRAME) {
            fprintf(stderr, "echo_server_c: a request frame above %d bytes; closing\n", MAX_FRAME);
            close_conn(c);
            return;
        }
        c->rbuf = xrealloc(c->rbuf, c->rcap);
    }
    ssize_t n;
    do {
        n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
        close_conn(c);
        return;
    }
    c->rlen += (size_t)n;
    size_t pos = 0;
    while (c->rlen - pos >= 8) {
        uint32_t len_be, word_be;
        memcpy(&len_be, c->rbuf + pos, 4);
        memcpy(&word_be, c->rbuf + pos + 4, 4);
        size_t len = ntohl(len_be), hlen = ntohl(word_be) & 0xFFFFFF;
        if (len > MAX_FRAME || hlen + 4 > len) {
            fprintf(stderr, "echo_server_c: bad frame (length %zu, header %zu); closing\n", len, hlen);
            close_conn(c);
            return;
        }
        if (c->rlen - pos < 4 + len) break;
        answer(c, c->rbuf + pos + 8, hlen);
        pos += 4 + len;
    }
    if (pos) {
        memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
        c->rlen -= pos;
    }
    if (c->wlen) flush_conn(c);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s RECORD_FILE [PORT]\n", argv[0]);
        return 2;
    }
    FILE *rf = fopen(argv[1], "rb");
    if (!rf) die("record file");
    record = malloc(1 << 20);
    record_len = fread(record, 1, 1 << 20, rf);
    fclose(rf);
    if (record_len == 0) {
        fprintf(stderr, "empty record file\n");
        return 2;
    }
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) die("socket");
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(argc == 3 ? atoi(argv[2]) : 0))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0) die("bind");
    if (listen(lfd, 1024) < 0) die("listen");
    socklen_t sl = sizeof sa;
    if (getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) die("getsockname");
    port = ntohs(sa.sin_port);
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    epfd = epoll_create1(0);
    if (epfd < 0) die("epoll_create1");
    /* data.ptr NULL: the listener; &epfd: stdin. */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) < 0) die("epoll_ctl listen");
    struct epoll_event evin = {.events = EPOLLIN, .data.ptr = &epfd};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, 0, &evin) < 0) die("epoll_ctl stdin");
    printf("ECHO-READY 127.0.0.1:%d\n", port);
    fflush(stdout);
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(epfd, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &epfd) {
                char buf[4096];
                if (read(0, buf, sizeof buf) <= 0) return 0;
                continue;
            }
            if (p == NULL) {
                for (;;) {
                    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                    if (fd < 0) break;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conn_t *c = calloc(1, sizeof *c);
                    if (!c) die("calloc");
                    c->fd = fd;
                    struct epoll_event ce = {.events = EPOLLIN, .data.ptr = c};
                    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ce) < 0) die("epoll_ctl conn");
                }
                continue;
            }
            conn_t *c = p;
            if (evs[i].events & EPOLLOUT) {
                if (!flush_conn(c)) continue;
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(c);
        }
    }
}
