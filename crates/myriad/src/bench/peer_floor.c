/* The peer server of `myriad bench … --peer floor`: the floor of this box, the
 * "minimal C epoll server" the SPEC's reference figures name. It does only what a
 * push server cannot avoid: per connection a file descriptor and a few bytes; one
 * send() per delivery or beat, nothing coalesced, nothing logged.
 *
 * GET /sub/ID holds ID's messages in the transport the request asks for, as myriad
 * reads it from the same head: a chunked stream (each body + "\n" one chunk, as
 * `flood --transport stream` reads it), Server-Sent Events (`Accept:
 * text/event-stream`: "data: body\n\n") or a WebSocket (`Upgrade: websocket`: one
 * text frame a message; what the client sends is read and dropped). POST /pub/ID
 * sends the body to ID's streams; the reply is `{}` (no counts). GET /stats answers
 * {"connections":N,"connects":M,"beats":B,"lost":L} and closes: streams held, TCP
 * connections accepted (as nginx counts them), heartbeats sent, publishes or
 * hand-overs dropped. A stream whose socket is full keeps the rest in its own
 * buffer and sends it on EPOLLOUT, so nothing is lost and each stream stays in
 * order; past OUT_MAX it is closed.
 *
 * Heartbeats (HEARTBEAT_S > 0) as myriad beats: every HEARTBEAT_S ± 10 % a stream
 * whose output is empty gets a beat ("1\r\n\n\r\n", ": hb\n\n", an empty pong),
 * its due time rounded up to a GRID_MS wall-clock grid shifted by a phase from its
 * peer address (the sum of its bytes), on 10-ms ticks aligned to whole seconds and
 * shifted 2 ms per process modulo TICK_GROUPS.
 *
 * PROCESSES > 1 (one process may hold only 20,000 files here): forked processes
 * share the port by SO_REUSEPORT. A stream of user ID belongs to process ID mod
 * PROCESSES: a process that reads a head for another's user hands the socket over
 * (SCM_RIGHTS, the head with it), and a publish for another's user is handed to the
 * owner; both over the owner's unix datagram socket. One hop, as a publish that
 * lands on the wrong process of any multi-process server must take. Counters sit in
 * one shared page.
 *
 * Within a process, WORKERS threads each have their own SO_REUSEPORT listener and
 * epoll; a publish is handed to every other thread (queue + eventfd).
 *
 * Built by the bench with `cc -O2 -pthread`; run as
 * `peer_floor PORT WORKERS [PROCESSES [HEARTBEAT_S [GRID_MS [TICK_GROUPS]]]]`.
 * It dies with the bench (PR_SET_PDEATHSIG). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 65536
#define HEAD_MAX 4096
#define HEAD_FIRST 512 /* a head's first buffer, doubled up to HEAD_MAX as needed */
#define OUT_MAX (1 << 20)
#define TABLE_BITS 15
#define TABLE (1 << TABLE_BITS) /* users per thread, open addressing (16 B each) */
#define WHEEL 8192  /* 10-ms slots: more than the longest beat period (60 s × 1.1) */
#define TICK_MS 10
#define MAX_PROCS 256

enum { READING = 0, STREAM = 1 };
enum { T_STREAM = 0, T_SSE = 1, T_WS = 2 };

struct worker;

struct conn {
    uint8_t kind, transport, phase;
    int prev, next;     /* the other streams of its user (STREAM), -1 at the ends */
    uint64_t user;
    char *in;           /* request bytes (READING), freed once a stream */
    uint32_t in_len, in_cap;
    char *out;          /* what the socket did not take yet */
    size_t out_len;
    struct worker *w;   /* whose epoll and wheel it is in */
    int beat_prev, beat_next; /* its slot's list; beat_slot -1: not in the wheel */
    int beat_slot;
    uint32_t beat_due;
};

struct user { uint64_t id; int first; }; /* first stream's fd, -1: none */
struct mail { struct mail *next; uint64_t user; size_t len; char data[]; };

struct worker {
    int epoll, listener, wake, timer;
    struct user *users; /* TABLE entries; id 0 = empty (ids start at 1) */
    pthread_mutex_t lock;
    struct mail *head, *tail;
    int *wheel;         /* WHEEL slot heads, -1 empty */
    uint32_t tick, done; /* the current 10-ms tick; slots fired up to `done` */
    unsigned seed;
};

/* What every process counts, in one shared page. */
struct shared { atomic_long connections, connects, beats, lost; };

/* A hand-over between processes: a publish, or a socket with its request head. */
enum { MAIL_PUB = 1, MAIL_SOCKET = 2 };
struct handover { uint32_t kind; uint32_t len; uint64_t user; };

static struct conn conns[MAX_FD];
static struct worker *workers;
static int nworkers, nprocs = 1, me, groups = 5;
static int mailbox[MAX_PROCS][2]; /* [i][0]: read by process i; [i][1]: written to it */
static uint32_t hb_ticks, grid_ticks = 5;
static long shift_ms;
static struct shared *shared;

static struct user *find(struct worker *w, uint64_t id, int create) {
    size_t i = (id * 11400714819323198485ull) >> (64 - TABLE_BITS);
    for (;; i = (i + 1) & (TABLE - 1)) {
        struct user *u = &w->users[i];
        if (u->id == id) return u;
        if (u->id == 0) {
            if (!create) return NULL;
            u->id = id;
            u->first = -1;
            return u;
        }
    }
}

/* ---- heartbeats: a wheel of 10-ms slots per worker, doubly linked by fd ---- */

static uint32_t tick_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - shift_ms;
    return (uint32_t)(ms / TICK_MS);
}

static void unbeat(int fd) {
    struct conn *c = &conns[fd];
    if (c->beat_slot < 0) return;
    struct worker *w = c->w;
    if (c->beat_prev >= 0) conns[c->beat_prev].beat_next = c->beat_next;
    else w->wheel[c->beat_slot] = c->beat_next;
    if (c->beat_next >= 0) conns[c->beat_next].beat_prev = c->beat_prev;
    c->beat_slot = -1;
}

/* Due in HEARTBEAT_S - 10 % + up to 20 %, rounded up to the grid plus its phase. */
static void arm(int fd) {
    struct conn *c = &conns[fd];
    struct worker *w = c->w;
    if (!hb_ticks) return;
    uint32_t spread = hb_ticks / 5 ? hb_ticks / 5 : 1;
    uint32_t t = w->tick + hb_ticks - hb_ticks / 10 + (uint32_t)rand_r(&w->seed) % (spread + 1);
    uint32_t phase = c->phase % grid_ticks;
    t += (phase + grid_ticks - t % grid_ticks) % grid_ticks;
    int slot = t % WHEEL;
    c->beat_due = t;
    c->beat_slot = slot;
    c->beat_prev = -1;
    c->beat_next = w->wheel[slot];
    if (c->beat_next >= 0) conns[c->beat_next].beat_prev = fd;
    w->wheel[slot] = fd;
}

static int send_to(int fd, const char *data, size_t len);

static void fire(struct worker *w, uint32_t t) {
    static const char stream_beat[] = "1\r\n\n\r\n", sse_beat[] = ": hb\n\n", ws_beat[] = "\x8a\x00";
    int fd = w->wheel[t % WHEEL];
    while (fd >= 0) {
        struct conn *c = &conns[fd];
        int next = c->beat_next;
        if (c->beat_due == t) {
            unbeat(fd);
            if (c->out_len == 0) {
                int ok = c->transport == T_SSE ? send_to(fd, sse_beat, sizeof sse_beat - 1)
                       : c->transport == T_WS  ? send_to(fd, ws_beat, 2)
                                               : send_to(fd, stream_beat, sizeof stream_beat - 1);
                if (!ok) { fd = next; continue; }
                atomic_fetch_add(&shared->beats, 1);
            }
            arm(fd);
        }
        fd = next;
    }
}

static void on_tick(struct worker *w) {
    uint64_t v;
    (void)!read(w->timer, &v, 8);
    w->tick = tick_now();
    if (w->tick - w->done > WHEEL) w->done = w->tick - WHEEL;
    while (w->done != w->tick) fire(w, ++w->done);
}

/* ---- connections ---- */

static void close_conn(int fd) {
    struct conn *c = &conns[fd];
    if (c->kind == STREAM) {
        if (c->prev >= 0) conns[c->prev].next = c->next;
        else find(c->w, c->user, 0)->first = c->next;
        if (c->next >= 0) conns[c->next].prev = c->prev;
        atomic_fetch_sub(&shared->connections, 1);
    }
    unbeat(fd);
    free(c->in);
    free(c->out);
    memset(c, 0, sizeof *c);
    c->beat_slot = -1;
    close(fd);
}

/* Sends what is queued, then `data`; keeps the rest. 0 = the connection is gone. */
static int send_to(int fd, const char *data, size_t len) {
    struct conn *c = &conns[fd];
    if (c->out_len == 0 && len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == (ssize_t)len) return 1;
        if (n < 0 && errno != EAGAIN) { close_conn(fd); return 0; }
        if (n > 0) { data += n; len -= n; }
    }
    if (c->out_len + len > OUT_MAX) { close_conn(fd); return 0; }
    if (len) {
        c->out = realloc(c->out, c->out_len + len);
        memcpy(c->out + c->out_len, data, len);
        c->out_len += len;
    }
    return 1;
}

static void flush_out(int fd) {
    struct conn *c = &conns[fd];
    if (!c->out_len) return;
    ssize_t n = send(fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) { if (errno != EAGAIN) close_conn(fd); return; }
    memmove(c->out, c->out + n, c->out_len - n);
    c->out_len -= n;
}

/* One message in each of the user's streams, framed per transport: a chunk
 * "<hex>\r\n<body>\n\r\n", an event "data: <body>\n\n", or a text frame. */
static void deliver(struct worker *w, uint64_t id, const char *body, size_t len) {
    struct user *u = find(w, id, 0);
    if (!u || u->first < 0) return;
    char frames[3][HEAD_MAX + 32];
    size_t sizes[3];
    int h = snprintf(frames[T_STREAM], 32, "%zx\r\n", len + 1);
    memcpy(frames[T_STREAM] + h, body, len);
    memcpy(frames[T_STREAM] + h + len, "\n\r\n", 3);
    sizes[T_STREAM] = h + len + 3;
    memcpy(frames[T_SSE], "data: ", 6);
    memcpy(frames[T_SSE] + 6, body, len);
    memcpy(frames[T_SSE] + 6 + len, "\n\n", 2);
    sizes[T_SSE] = len + 8;
    unsigned char *ws = (unsigned char *)frames[T_WS];
    ws[0] = 0x81;
    if (len < 126) { ws[1] = len; h = 2; }
    else { ws[1] = 126; ws[2] = len >> 8; ws[3] = len & 0xff; h = 4; }
    memcpy(ws + h, body, len);
    sizes[T_WS] = h + len;
    for (int fd = u->first; fd >= 0;) {
        int next = conns[fd].next; /* read first: a failed send closes fd */
        send_to(fd, frames[conns[fd].transport], sizes[conns[fd].transport]);
        fd = next;
    }
}

/* A publish for a user of this process: every other thread first (they send their
 * share while this one sends its own), then this thread's streams. */
static void publish_here(struct worker *w, uint64_t id, const char *body, size_t len) {
    for (int i = 0; i < nworkers; i++) {
        struct worker *o = &workers[i];
        if (o == w) continue;
        struct mail *m = malloc(sizeof *m + len);
        m->next = NULL;
        m->user = id;
        m->len = len;
        memcpy(m->data, body, len);
        pthread_mutex_lock(&o->lock);
        if (o->tail) o->tail->next = m; else o->head = m;
        o->tail = m;
        pthread_mutex_unlock(&o->lock);
        uint64_t one = 1;
        (void)!write(o->wake, &one, 8);
    }
    deliver(w, id, body, len);
}

/* Hands a publish or a socket (`fd` ≥ 0) to process `to`; 0 if it could not
 * (counted as lost). Waits up to a second for room in the owner's queue. */
static int hand_over(int to, uint32_t kind, uint64_t user, const char *data, size_t len, int fd) {
    struct handover h = { kind, (uint32_t)len, user };
    struct iovec iov[2] = { { &h, sizeof h }, { (void *)data, len } };
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
    if (fd >= 0) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }
    for (int tries = 0; tries < 100; tries++) {
        if (sendmsg(mailbox[to][1], &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return 1;
        if (errno != EAGAIN) break;
        struct pollfd p = { mailbox[to][1], POLLOUT, 0 };
        poll(&p, 1, 10);
    }
    atomic_fetch_add(&shared->lost, 1);
    return 0;
}

static void reply(int fd, const char *status, const char *body) {
    char r[256];
    int n = snprintf(r, sizeof r,
                     "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s", status, strlen(body), body);
    send_to(fd, r, n);
}

/* The value of header `name` (with its "\n" and ":") in the head [p, end), or NULL. */
static const char *header(const char *p, const char *end, const char *name, size_t *len) {
    size_t n = strlen(name);
    for (; p + n < end; p++) {
        if (strncasecmp(p, name, n) != 0) continue;
        const char *v = p + n;
        while (v < end && *v == ' ') v++;
        const char *e = v;
        while (e < end && *e != '\r' && *e != '\n') e++;
        *len = e - v;
        return v;
    }
    return NULL;
}

/* SHA-1 (RFC 3174) of the WebSocket key and the protocol's GUID, for the accept. */
static void sha1(const unsigned char *m, size_t len, unsigned char out[20]) {
    uint32_t h[5] = { 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0 };
    unsigned char block[64];
    size_t total = ((len + 8) / 64 + 1) * 64;
    for (size_t off = 0; off < total; off += 64) {
        for (int i = 0; i < 64; i++) {
            size_t at = off + i;
            block[i] = at < len ? m[at] : at == len ? 0x80 : 0;
        }
        if (off + 64 == total)
            for (int i = 0; i < 8; i++) block[56 + i] = (uint64_t)len * 8 >> (56 - 8 * i);
        uint32_t wd[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 16; i++)
            wd[i] = block[4 * i] << 24 | block[4 * i + 1] << 16 | block[4 * i + 2] << 8 | block[4 * i + 3];
        for (int i = 16; i < 80; i++) {
            uint32_t x = wd[i - 3] ^ wd[i - 8] ^ wd[i - 14] ^ wd[i - 16];
            wd[i] = x << 1 | x >> 31;
        }
        for (int i = 0; i < 80; i++) {
            uint32_t f, k;
            if (i < 20) { f = (b & c) | (~b & d); k = 0x5A827999; }
            else if (i < 40) { f = b ^ c ^ d; k = 0x6ED9EBA1; }
            else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8F1BBCDC; }
            else { f = b ^ c ^ d; k = 0xCA62C1D6; }
            uint32_t t = (a << 5 | a >> 27) + f + e + k + wd[i];
            e = d; d = c; c = b << 30 | b >> 2; b = a; a = t;
        }
        h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
    }
    for (int i = 0; i < 20; i++) out[i] = h[i / 4] >> (24 - 8 * (i % 4));
}

static void base64(const unsigned char *in, size_t len, char *out) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = in[i] << 16 | (i + 1 < len ? in[i + 1] << 8 : 0) | (i + 2 < len ? in[i + 2] : 0);
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        out[o++] = i + 1 < len ? abc[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? abc[v & 63] : '=';
    }
    out[o] = 0;
}

/* The head's transport, and the answer that opens the stream (into `ok`). */
static int open_stream(const char *head, const char *end, char *ok, size_t room, size_t *ok_len) {
    size_t len;
    const char *key = header(head, end, "\nsec-websocket-key:", &len);
    if (header(head, end, "\nupgrade:", &len) && key) {
        static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
        unsigned char buf[128], digest[20];
        char accept[32];
        size_t klen;
        header(head, end, "\nsec-websocket-key:", &klen);
        if (klen > 64) klen = 64;
        memcpy(buf, key, klen);
        memcpy(buf + klen, guid, sizeof guid - 1);
        sha1(buf, klen + sizeof guid - 1, digest);
        base64(digest, 20, accept);
        *ok_len = snprintf(ok, room, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", accept);
        return T_WS;
    }
    const char *accept = header(head, end, "\naccept:", &len);
    if (accept && len >= 17 && memmem(accept, len, "text/event-stream", 17)) {
        *ok_len = snprintf(ok, room, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                     "Cache-Control: no-cache\r\n\r\n");
        return T_SSE;
    }
    *ok_len = snprintf(ok, room, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                 "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n");
    return T_STREAM;
}

/* What handle() returns besides a request's length (0: the request is incomplete). */
#define CLOSE ((size_t)-1) /* answered; close the connection */
#define STOP ((size_t)-2)  /* a stream now, closed, or handed over: read no more requests */

/* One complete request at the head of c->in; returns its length, 0, CLOSE or STOP. */
static size_t handle(struct worker *w, int fd) {
    struct conn *c = &conns[fd];
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = end + 4 - c->in, body = 0;
    for (char *p = c->in; p < end; p++) {
        if (strncasecmp(p, "\ncontent-length:", 16) == 0) body = strtoul(p + 16, NULL, 10);
    }
    if (head + body > HEAD_MAX) { reply(fd, "413 Too Large", "{}"); return c->in ? CLOSE : STOP; }
    if (c->in_len < head + body) return 0;
    uint64_t id;
    if (sscanf(c->in, "GET /sub/%" SCNu64 " ", &id) == 1 && id > 0) {
        int owner = (int)(id % nprocs);
        if (owner != me) {
            /* Not ours: the owner takes the socket and the head. */
            epoll_ctl(w->epoll, EPOLL_CTL_DEL, fd, NULL);
            hand_over(owner, MAIL_SOCKET, id, c->in, c->in_len, fd);
            free(c->in);
            memset(c, 0, sizeof *c);
            c->beat_slot = -1;
            close(fd);
            return STOP;
        }
        char ok[512];
        size_t ok_len;
        int transport = open_stream(c->in, end, ok, sizeof ok, &ok_len);
        if (!send_to(fd, ok, ok_len)) return STOP;
        struct user *u = find(w, id, 1);
        c->kind = STREAM;
        c->transport = transport;
        c->user = id;
        c->prev = -1;
        c->next = u->first;
        if (u->first >= 0) conns[u->first].prev = fd;
        u->first = fd;
        atomic_fetch_add(&shared->connections, 1);
        free(c->in);
        c->in = NULL;
        c->in_len = 0;
        arm(fd);
        return STOP;
    }
    if (sscanf(c->in, "POST /pub/%" SCNu64 " ", &id) == 1) {
        int owner = (int)(id % nprocs);
        if (owner == me) publish_here(w, id, c->in + head, body);
        else hand_over(owner, MAIL_PUB, id, c->in + head, body, -1);
        reply(fd, "200 OK", "{}");
        return c->in ? head + body : STOP;
    }
    if (strncmp(c->in, "GET /stats ", 11) == 0) {
        char s[160];
        snprintf(s, sizeof s, "{\"connections\":%ld,\"connects\":%ld,\"beats\":%ld,\"lost\":%ld}",
                 atomic_load(&shared->connections), atomic_load(&shared->connects),
                 atomic_load(&shared->beats), atomic_load(&shared->lost));
        reply(fd, "200 OK", s);
        return c->in ? CLOSE : STOP; /* the bench reads /stats to the end */
    }
    reply(fd, "404 Not Found", "{}");
    return c->in ? CLOSE : STOP;
}

static void on_readable(struct worker *w, int fd) {
    struct conn *c = &conns[fd];
    char scratch[512];
    for (;;) {
        if (c->kind == READING && c->in_len == c->in_cap) {
            if (c->in_cap == HEAD_MAX) { close_conn(fd); return; }
            c->in_cap *= 2;
            c->in = realloc(c->in, c->in_cap);
        }
        char *at = c->kind == READING ? c->in + c->in_len : scratch;
        size_t room = c->kind == READING ? c->in_cap - c->in_len : sizeof scratch;
        ssize_t n = recv(fd, at, room, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) { close_conn(fd); return; }
        if (n < 0) return;
        if (c->kind == STREAM) continue; /* a stream's client says nothing that matters */
        c->in_len += n;
        for (;;) {
            size_t used = handle(w, fd);
            if (used == 0) break;
            if (used == CLOSE) { close_conn(fd); return; }
            if (used == STOP) break;
            memmove(c->in, c->in + used, c->in_len - used);
            c->in_len -= used;
        }
        if (c->kind == READING && c->in == NULL) return; /* closed or handed over */
    }
}

/* A new socket in worker `w`: accepted here or handed over with `head`. */
static void adopt(struct worker *w, int s, const char *head, size_t len) {
    if (s >= MAX_FD) { close(s); return; }
    struct conn *c = &conns[s];
    memset(c, 0, sizeof *c);
    c->beat_slot = -1;
    c->w = w;
    c->in_cap = len > HEAD_FIRST ? HEAD_MAX : HEAD_FIRST;
    c->in = malloc(c->in_cap);
    struct sockaddr_in peer;
    socklen_t plen = sizeof peer;
    if (getpeername(s, (struct sockaddr *)&peer, &plen) == 0 && peer.sin_family == AF_INET) {
        uint32_t a = peer.sin_addr.s_addr;
        c->phase = (uint8_t)((a & 0xff) + (a >> 8 & 0xff) + (a >> 16 & 0xff) + (a >> 24));
    }
    struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = s };
    epoll_ctl(w->epoll, EPOLL_CTL_ADD, s, &e);
    if (len) {
        c->in_len = len < c->in_cap ? len : c->in_cap;
        memcpy(c->in, head, c->in_len);
        if (handle(w, s) == CLOSE) close_conn(s);
    }
}

/* This process's hand-overs: publishes for its users and sockets of its users. */
static void on_mailbox(struct worker *w) {
    static char buf[sizeof(struct handover) + HEAD_MAX];
    for (;;) {
        union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
        struct iovec iov = { buf, sizeof buf };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                              .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
        ssize_t n = recvmsg(mailbox[me][0], &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < (ssize_t)sizeof(struct handover)) return;
        struct handover h;
        memcpy(&h, buf, sizeof h);
        const char *data = buf + sizeof h;
        size_t len = (size_t)n - sizeof h < h.len ? (size_t)n - sizeof h : h.len;
        if (h.kind == MAIL_PUB) {
            publish_here(w, h.user, data, len);
        } else if (h.kind == MAIL_SOCKET) {
            struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
            if (cm && cm->cmsg_type == SCM_RIGHTS) {
                int s;
                memcpy(&s, CMSG_DATA(cm), sizeof s);
                adopt(w, s, data, len);
            }
        }
    }
}

static void *run(void *arg) {
    struct worker *w = arg;
    struct epoll_event ev[256];
    for (;;) {
        int n = epoll_wait(w->epoll, ev, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (fd == w->listener) {
                for (;;) {
                    int s = accept4(w->listener, NULL, NULL, SOCK_NONBLOCK);
                    if (s < 0) break;
                    atomic_fetch_add(&shared->connects, 1);
                    adopt(w, s, NULL, 0);
                }
            } else if (fd == w->timer) {
                on_tick(w);
            } else if (fd == mailbox[me][0] && w == &workers[0]) {
                on_mailbox(w);
            } else if (fd == w->wake) {
                uint64_t v;
                (void)!read(w->wake, &v, 8);
                pthread_mutex_lock(&w->lock);
                struct mail *m = w->head;
                w->head = w->tail = NULL;
                pthread_mutex_unlock(&w->lock);
                while (m) {
                    struct mail *next = m->next;
                    deliver(w, m->user, m->data, m->len);
                    free(m);
                    m = next;
                }
            } else {
                if (ev[i].events & EPOLLOUT) flush_out(fd);
                if (conns[fd].in || conns[fd].kind == STREAM)
                    if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) on_readable(w, fd);
            }
        }
    }
    return NULL;
}

/* One process's workers: listeners, epolls, wakes, beat timers; then serve. */
static void serve(int port) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    shift_ms = (long)(me % groups) * 2;
    workers = calloc(nworkers, sizeof *workers);
    for (int i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];
        int one = 1;
        w->listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        setsockopt(w->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(w->listener, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        setsockopt(w->listener, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (bind(w->listener, (struct sockaddr *)&a, sizeof a) || listen(w->listener, 65535)) {
            perror("floor peer: cannot listen");
            exit(1);
        }
        w->epoll = epoll_create1(0);
        w->wake = eventfd(0, EFD_NONBLOCK);
        w->users = calloc(TABLE, sizeof *w->users);
        w->wheel = malloc(WHEEL * sizeof(int));
        memset(w->wheel, 0xff, WHEEL * sizeof(int));
        w->seed = (unsigned)(me * 7919 + i);
        w->tick = w->done = tick_now();
        pthread_mutex_init(&w->lock, NULL);
        struct epoll_event e = { .events = EPOLLIN | EPOLLET, .data.fd = w->listener };
        epoll_ctl(w->epoll, EPOLL_CTL_ADD, w->listener, &e);
        e.data.fd = w->wake;
        epoll_ctl(w->epoll, EPOLL_CTL_ADD, w->wake, &e);
        if (hb_ticks) {
            /* 10-ms ticks on the wall clock's whole seconds, shifted by the group. */
            w->timer = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            long long ns = (long long)now.tv_sec * 1000000000 + now.tv_nsec;
            long long period = TICK_MS * 1000000LL;
            long long first = (ns - shift_ms * 1000000LL) / period * period + period + shift_ms * 1000000LL;
            struct itimerspec it = { { 0, period }, { first / 1000000000, first % 1000000000 } };
            timerfd_settime(w->timer, TFD_TIMER_ABSTIME, &it, NULL);
            e.events = EPOLLIN;
            e.data.fd = w->timer;
            epoll_ctl(w->epoll, EPOLL_CTL_ADD, w->timer, &e);
        } else {
            w->timer = -1;
        }
    }
    if (nprocs > 1) {
        struct epoll_event e = { .events = EPOLLIN, .data.fd = mailbox[me][0] };
        epoll_ctl(workers[0].epoll, EPOLL_CTL_ADD, mailbox[me][0], &e);
    }
    for (int i = 1; i < nworkers; i++) {
        pthread_t t;
        pthread_create(&t, NULL, run, &workers[i]);
    }
    if (me == 0)
        fprintf(stderr, "floor peer serving listen=127.0.0.1:%d threads=%d processes=%d heartbeat=%ds\n",
                port, nworkers, nprocs, (int)(hb_ticks * TICK_MS / 1000));
    run(&workers[0]);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 7) {
        fprintf(stderr, "usage: peer_floor PORT WORKERS [PROCESSES [HEARTBEAT_S [GRID_MS [TICK_GROUPS]]]]\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int port = atoi(argv[1]);
    nworkers = atoi(argv[2]);
    nprocs = argc > 3 ? atoi(argv[3]) : 1;
    int hb = argc > 4 ? atoi(argv[4]) : 0;
    int grid_ms = argc > 5 ? atoi(argv[5]) : 50;
    groups = argc > 6 ? atoi(argv[6]) : 5;
    if (nworkers < 1 || nprocs < 1 || nprocs > MAX_PROCS || hb < 0 || hb > 60 || grid_ms < TICK_MS || groups < 1) {
        fprintf(stderr, "floor peer: WORKERS ≥ 1, 1 ≤ PROCESSES ≤ %d, 0 ≤ HEARTBEAT_S ≤ 60, GRID_MS ≥ 10, TICK_GROUPS ≥ 1\n", MAX_PROCS);
        return 2;
    }
    hb_ticks = (uint32_t)hb * 1000 / TICK_MS;
    grid_ticks = (uint32_t)grid_ms / TICK_MS;
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) { perror("floor peer: mmap"); return 1; }
    for (int i = 0; nprocs > 1 && i < nprocs; i++) {
        if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, mailbox[i])) {
            perror("floor peer: socketpair");
            return 1;
        }
        int big = 4 << 20;
        setsockopt(mailbox[i][0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        setsockopt(mailbox[i][1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    }
    for (me = 1; me < nprocs; me++) {
        pid_t pid = fork();
        if (pid < 0) { perror("floor peer: fork"); return 1; }
        if (pid == 0) { serve(port); return 0; }
    }
    me = 0;
    serve(port);
    return 0;
}
