/* The peer server of `myriad bench … --peer floor`: the floor of this box, the
 * "minimal C epoll server" the SPEC's reference figures name. It does only what a
 * push server cannot avoid: one thread per core (WORKERS), each with its own
 * SO_REUSEPORT listener and epoll; per connection a file descriptor and a few
 * bytes; one send() per delivery, nothing coalesced, nothing logged.
 *
 * GET /sub/ID holds a chunked stream of ID's messages (each body + "\n" is one
 * chunk, as `flood --transport stream` reads it). POST /pub/ID hands a copy to every
 * other thread (queue + eventfd), then sends the body to ID's streams held by this
 * thread; the reply is `{}` (no counts: each thread knows only its own streams).
 * GET /stats answers {"connections":N,"connects":M} and closes: streams held, TCP
 * connections accepted (as nginx counts them). A stream whose socket is full keeps
 * the rest in its own buffer and sends it on EPOLLOUT, so nothing is lost and each
 * stream stays in order; past OUT_MAX it is closed.
 *
 * Built by the bench with `cc -O2 -pthread`; run as `peer_floor PORT WORKERS`.
 * It dies with the bench (PR_SET_PDEATHSIG). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FD 65536
#define HEAD_MAX 4096
#define OUT_MAX (1 << 20)
#define TABLE 65536 /* users per thread, open addressing */

enum { READING = 0, STREAM = 1 };

struct conn {
    uint8_t kind;
    int pos;            /* index in its user's list (STREAM) */
    uint64_t user;
    char *in;           /* request bytes (READING), freed once a stream */
    size_t in_len;
    char *out;          /* what the socket did not take yet */
    size_t out_len;
};

struct user { uint64_t id; int *fds; int n, cap; };
struct mail { struct mail *next; uint64_t user; size_t len; char data[]; };

struct worker {
    int epoll, listener, wake;
    struct user *users; /* TABLE entries; id 0 = empty (ids start at 1) */
    pthread_mutex_t lock;
    struct mail *head, *tail;
};

static struct conn conns[MAX_FD];
static struct worker *workers;
static int nworkers;
static atomic_long connections, connects;

static struct user *find(struct worker *w, uint64_t id, int create) {
    size_t i = (id * 11400714819323198485ull) >> 48;
    for (;; i = (i + 1) & (TABLE - 1)) {
        struct user *u = &w->users[i];
        if (u->id == id) return u;
        if (u->id == 0) {
            if (!create) return NULL;
            u->id = id;
            return u;
        }
    }
}

static void close_conn(struct worker *w, int fd) {
    struct conn *c = &conns[fd];
    if (c->kind == STREAM) {
        struct user *u = find(w, c->user, 0);
        if (u) {
            int last = u->fds[--u->n];
            u->fds[c->pos] = last;
            conns[last].pos = c->pos;
        }
        atomic_fetch_sub(&connections, 1);
    }
    free(c->in);
    free(c->out);
    memset(c, 0, sizeof *c);
    close(fd);
}

/* Sends what is queued, then `data`; keeps the rest. 0 = the connection is gone. */
static int send_to(struct worker *w, int fd, const char *data, size_t len) {
    struct conn *c = &conns[fd];
    if (c->out_len == 0 && len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == (ssize_t)len) return 1;
        if (n < 0 && errno != EAGAIN) { close_conn(w, fd); return 0; }
        if (n > 0) { data += n; len -= n; }
    }
    if (c->out_len + len > OUT_MAX) { close_conn(w, fd); return 0; }
    if (len) {
        c->out = realloc(c->out, c->out_len + len);
        memcpy(c->out + c->out_len, data, len);
        c->out_len += len;
    }
    return 1;
}

static void flush_out(struct worker *w, int fd) {
    struct conn *c = &conns[fd];
    if (!c->out_len) return;
    ssize_t n = send(fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) { if (errno != EAGAIN) close_conn(w, fd); return; }
    memmove(c->out, c->out + n, c->out_len - n);
    c->out_len -= n;
}

/* One chunk per message: "<hex>\r\n<body>\n\r\n". */
static void deliver(struct worker *w, uint64_t id, const char *body, size_t len) {
    struct user *u = find(w, id, 0);
    if (!u || u->n == 0) return;
    char chunk[HEAD_MAX + 32];
    int h = snprintf(chunk, 32, "%zx\r\n", len + 1);
    memcpy(chunk + h, body, len);
    memcpy(chunk + h + len, "\n\r\n", 3);
    /* Backwards: a close swaps the last stream into the closed one's place. */
    for (int i = u->n - 1; i >= 0; i--) send_to(w, u->fds[i], chunk, h + len + 3);
}

static void reply(struct worker *w, int fd, const char *status, const char *body) {
    char r[256];
    int n = snprintf(r, sizeof r,
                     "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s", status, strlen(body), body);
    send_to(w, fd, r, n);
}

/* What handle() returns besides a request's length (0: the request is incomplete). */
#define CLOSE ((size_t)-1) /* answered; close the connection */
#define STOP ((size_t)-2)  /* a stream now, or closed already: read no more requests */

/* One complete request at the head of c->in; returns its length, 0, CLOSE or STOP. */
static size_t handle(struct worker *w, int fd) {
    struct conn *c = &conns[fd];
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = end + 4 - c->in, body = 0;
    for (char *p = c->in; p < end; p++) {
        if (strncasecmp(p, "\ncontent-length:", 16) == 0) body = strtoul(p + 16, NULL, 10);
    }
    if (head + body > HEAD_MAX) { reply(w, fd, "413 Too Large", "{}"); return c->in ? CLOSE : STOP; }
    if (c->in_len < head + body) return 0;
    uint64_t id;
    if (sscanf(c->in, "GET /sub/%" SCNu64 " ", &id) == 1 && id > 0) {
        static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                 "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
        if (!send_to(w, fd, ok, sizeof ok - 1)) return STOP;
        struct user *u = find(w, id, 1);
        if (u->n == u->cap) {
            u->cap = u->cap ? 2 * u->cap : 4;
            u->fds = realloc(u->fds, u->cap * sizeof(int));
        }
        c->kind = STREAM;
        c->user = id;
        c->pos = u->n;
        u->fds[u->n++] = fd;
        atomic_fetch_add(&connections, 1);
        free(c->in);
        c->in = NULL;
        c->in_len = 0;
        return STOP;
    }
    if (sscanf(c->in, "POST /pub/%" SCNu64 " ", &id) == 1) {
        /* The other threads first: they send their share while this one sends its own. */
        for (int i = 0; i < nworkers; i++) {
            struct worker *o = &workers[i];
            if (o == w) continue;
            struct mail *m = malloc(sizeof *m + body);
            m->next = NULL;
            m->user = id;
            m->len = body;
            memcpy(m->data, c->in + head, body);
            pthread_mutex_lock(&o->lock);
            if (o->tail) o->tail->next = m; else o->head = m;
            o->tail = m;
            pthread_mutex_unlock(&o->lock);
            uint64_t one = 1;
            (void)!write(o->wake, &one, 8);
        }
        deliver(w, id, c->in + head, body);
        reply(w, fd, "200 OK", "{}");
        return c->in ? head + body : STOP;
    }
    if (strncmp(c->in, "GET /stats ", 11) == 0) {
        char s[96];
        snprintf(s, sizeof s, "{\"connections\":%ld,\"connects\":%ld}",
                 atomic_load(&connections), atomic_load(&connects));
        reply(w, fd, "200 OK", s);
        return c->in ? CLOSE : STOP; /* the bench reads /stats to the end */
    }
    reply(w, fd, "404 Not Found", "{}");
    return c->in ? CLOSE : STOP;
}

static void on_readable(struct worker *w, int fd) {
    struct conn *c = &conns[fd];
    char scratch[512];
    for (;;) {
        char *at = c->kind == READING ? c->in + c->in_len : scratch;
        size_t room = c->kind == READING ? HEAD_MAX - c->in_len : sizeof scratch;
        if (room == 0) { close_conn(w, fd); return; }
        ssize_t n = recv(fd, at, room, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) { close_conn(w, fd); return; }
        if (n < 0) return;
        if (c->kind == STREAM) continue; /* a stream's client has nothing more to say */
        c->in_len += n;
        for (;;) {
            size_t used = handle(w, fd);
            if (used == 0) break;
            if (used == CLOSE) { close_conn(w, fd); return; }
            if (used == STOP) break;
            memmove(c->in, c->in + used, c->in_len - used);
            c->in_len -= used;
        }
        if (c->kind == READING && c->in == NULL) return; /* closed while answering */
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
                    if (s >= MAX_FD) { close(s); continue; }
                    atomic_fetch_add(&connects, 1);
                    conns[s].in = malloc(HEAD_MAX);
                    struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                             .data.fd = s };
                    epoll_ctl(w->epoll, EPOLL_CTL_ADD, s, &e);
                }
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
                if (ev[i].events & EPOLLOUT) flush_out(w, fd);
                if (conns[fd].in || conns[fd].kind == STREAM)
                    if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) on_readable(w, fd);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: peer_floor PORT WORKERS\n"); return 2; }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int port = atoi(argv[1]);
    nworkers = atoi(argv[2]);
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
            return 1;
        }
        w->epoll = epoll_create1(0);
        w->wake = eventfd(0, EFD_NONBLOCK);
        w->users = calloc(TABLE, sizeof *w->users);
        pthread_mutex_init(&w->lock, NULL);
        struct epoll_event e = { .events = EPOLLIN | EPOLLET, .data.fd = w->listener };
        epoll_ctl(w->epoll, EPOLL_CTL_ADD, w->listener, &e);
        e.data.fd = w->wake;
        epoll_ctl(w->epoll, EPOLL_CTL_ADD, w->wake, &e);
    }
    for (int i = 1; i < nworkers; i++) {
        pthread_t t;
        pthread_create(&t, NULL, run, &workers[i]);
    }
    fprintf(stderr, "floor peer serving listen=127.0.0.1:%d threads=%d\n", port, nworkers);
    run(&workers[0]);
    return 0;
}
