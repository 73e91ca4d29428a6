/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * The progress subsystem: the thread that serves a rank away from MPI,
 * the channel on which origins wake it, and when it looks.
 *
 * Why a thread.  With manual progress nothing moves unless someone calls
 * the provider, and a passive target that computes, sleeps or spins on its
 * own window (osc/rdma does a compare-and-swap on the local rank in place)
 * calls nobody.  One thread per process looks at the contexts every
 * btl_ofi_progress_idle_us; what a look does is the component's callback
 * (mca_btl_ofi_contexts_look), which drives only the contexts the
 * application left alone since the previous look.  So while the rank is
 * in MPI the thread takes no lock of the application's and reads no CQ: a
 * look costs one wake-up and one read of a counter per context.
 *
 * Why a wake channel.  The providers here apply a peer's write or answer
 * its read only when the target calls them, and leave the target nothing
 * to wait on.  So the origin, the one side that knows it waits, says so:
 * after btl_ofi_progress_wake_us without a completion it sends the
 * target's thread a datagram, and the thread looks at once (or as soon as
 * its least gap between looks allows).
 *
 * Only the job may wake a rank.  The channel is a UDP socket bound to
 * 127.0.0.1 for peers on this node and, where the provider's endpoint has
 * an IPv4 address, one bound to that address for peers on other nodes;
 * never to every address.  Each process draws a random 64-bit key and
 * publishes it in the modex with its ports; a wake-up is that key and
 * nothing else.  A socket filter drops every other datagram in the kernel,
 * before any thread is woken, and the thread checks the key again on what
 * it reads (for a kernel that refused the filter).  A stranger's flood
 * therefore costs the rank no wake-up and no look.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "btl_ofi.h"

/* ------------------------------------------------------------------ */
/* The wake channel                                                    */

enum { WAKE_LO, WAKE_NET, WAKE_SOCKETS };

static struct {
    int fd[WAKE_SOCKETS];        /**< -1 when closed */
    uint16_t port[WAKE_SOCKETS]; /**< host order; meaningful while fd >= 0 */
    uint32_t ip4;                /**< network order, the WAKE_NET socket's address */
    uint64_t key;                /**< what a wake-up of ours must carry */
    bool listening;              /**< a progress thread reads the sockets */
} channel = { .fd = { -1, -1 } };

/* Where the key can come from: the kernel's generator, else a mix of what
 * differs between processes (weak, but a key nobody outside the job sees
 * still keeps a blind flood out). */
static uint64_t draw_key(void)
{
    uint64_t key = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd >= 0) {
        if (read(fd, &key, sizeof(key)) != (ssize_t) sizeof(key)) {
            key = 0;
        }
        close(fd);
    }
    if (0 == key) {
        key = ((uint64_t) getpid() << 32) ^ (uint64_t) mca_btl_ofi_now_ns() ^ (uint64_t) &key;
    }
    return 0 != key ? key : 1;
}

/* The key's bytes as the two big-endian words a socket filter loads. */
static void key_words(uint64_t key, uint32_t words[2])
{
    unsigned char b[sizeof(key)];

    memcpy(b, &key, sizeof(b));
    for (int w = 0; w < 2; ++w) {
        words[w] = (uint32_t) b[4 * w] << 24 | (uint32_t) b[4 * w + 1] << 16
                   | (uint32_t) b[4 * w + 2] << 8 | b[4 * w + 3];
    }
}

/* Keep only datagrams whose payload, @p payload bytes into what the filter
 * sees, is exactly the key. */
static int attach_key_filter(int fd, uint32_t payload)
{
    uint32_t w[2];

    key_words(channel.key, w);
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, payload + 8, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, payload),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, w[0], 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, payload + 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, w[1], 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0xffff),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };

    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
}

/* Reads one datagram: 1 when it was the key, 0 when it was anything
 * else, -1 when none was queued. */
static int read_datagram(int fd)
{
    uint64_t got;
    ssize_t len = recv(fd, &got, sizeof(got), MSG_DONTWAIT | MSG_TRUNC);

    if (len < 0) {
        return -1;
    }
    return len == (ssize_t) sizeof(got) && got == channel.key;
}

/* Reads every datagram queued on @p fd; returns how many were wake-ups of
 * the job (the rest are dropped unseen). */
static int drain_wakeups(int fd)
{
    int n = 0, got;

    while ((got = read_datagram(fd)) >= 0) {
        n += got;
    }
    return n;
}

/* Whether what the filter lets through is the key and only the key: a
 * wrong datagram sent to ourselves must vanish, the key that follows it
 * must arrive (loopback delivers in order, within the send). */
static bool filter_works(int fd, const struct sockaddr_in *self)
{
    uint64_t wrong = ~channel.key;
    struct pollfd pfd = { .fd = fd, .events = POLLIN };

    if (sendto(fd, &wrong, sizeof(wrong), 0, (const struct sockaddr *) self, sizeof(*self)) < 0
        || sendto(fd, &channel.key, sizeof(channel.key), 0, (const struct sockaddr *) self,
                  sizeof(*self))
               < 0
        || poll(&pfd, 1, 100) <= 0) {
        return false;
    }
    return 1 == read_datagram(fd);
}

/* The filter sees a UDP datagram from its header on (8 bytes) on the
 * kernels we know, from its payload on others: the offset that passes the
 * self-test is kept; none, and the thread's own check is all there is. */
static void filter_socket(int fd, const struct sockaddr_in *self)
{
    static const uint32_t offsets[] = { 8, 0 };

    for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); ++i) {
        if (0 == attach_key_filter(fd, offsets[i]) && filter_works(fd, self)) {
            return;
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, NULL, 0);
        (void) drain_wakeups(fd); /* what the failed test left queued */
    }
    MCA_BTL_OFI_VERBOSE(1, "wake-ups: the kernel took no socket filter; the progress thread "
                           "checks each datagram itself");
}

/* A socket bound to @p ip4 (network order) on an ephemeral port; -1 and
 * errno on failure. */
static int open_wake_socket(uint32_t ip4, uint16_t *port)
{
    struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = ip4 };
    socklen_t len = sizeof(me);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err;

    if (fd < 0) {
        return -1;
    }
    if (0 != bind(fd, (struct sockaddr *) &me, sizeof(me))
        || 0 != getsockname(fd, (struct sockaddr *) &me, &len)) {
        err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    filter_socket(fd, &me);
    *port = ntohs(me.sin_port);
    return fd;
}

/* An address the network socket may take: a real one of this host. */
static bool network_address(uint32_t ip4)
{
    return 0 != ip4 && htonl(INADDR_ANY) != ip4 && htonl(INADDR_BROADCAST) != ip4
           && IN_LOOPBACKNET != (ntohl(ip4) >> IN_CLASSA_NSHIFT);
}

int mca_btl_ofi_wake_open(uint32_t net_ip4)
{
    if (channel.fd[WAKE_LO] >= 0) {
        return 0;
    }
    channel.key = draw_key();
    channel.fd[WAKE_LO] = open_wake_socket(htonl(INADDR_LOOPBACK), &channel.port[WAKE_LO]);
    if (channel.fd[WAKE_LO] < 0) {
        return errno;
    }
    if (network_address(net_ip4)) {
        channel.fd[WAKE_NET] = open_wake_socket(net_ip4, &channel.port[WAKE_NET]);
        if (channel.fd[WAKE_NET] < 0) {
            MCA_BTL_OFI_VERBOSE(1,
                                "wake-ups: no socket on the network address (%s): peers on "
                                "other nodes cannot wake the progress thread",
                                strerror(errno));
        }
        channel.ip4 = net_ip4;
    }
    return 0;
}

void mca_btl_ofi_wake_close(void)
{
    for (int i = 0; i < WAKE_SOCKETS; ++i) {
        if (channel.fd[i] >= 0) {
            close(channel.fd[i]);
            channel.fd[i] = -1;
        }
    }
}

void mca_btl_ofi_wake_listen(bool on)
{
    channel.listening = on;
}

void mca_btl_ofi_wake_self(mca_btl_ofi_wake_addr_t *addr)
{
    memset(addr, 0, sizeof(*addr));
    if (channel.fd[WAKE_LO] < 0 || !channel.listening) {
        return;
    }
    addr->port = channel.port[WAKE_LO];
    addr->key = channel.key;
    if (channel.fd[WAKE_NET] >= 0) {
        addr->ip4 = channel.ip4;
        addr->net_port = channel.port[WAKE_NET];
    }
}

uint32_t mca_btl_ofi_wake_ip4(const void *ep_name, size_t len, uint32_t addr_format)
{
    struct sockaddr_in sin;

    if (NULL == ep_name || len < sizeof(sin)
        || (FI_SOCKADDR_IN != addr_format && FI_SOCKADDR != addr_format)) {
        return 0;
    }
    memcpy(&sin, ep_name, sizeof(sin));
    return AF_INET == sin.sin_family ? sin.sin_addr.s_addr : 0;
}

void mca_btl_ofi_wake_to_init(mca_btl_ofi_wake_to_t *wake, const mca_btl_ofi_wake_addr_t *peer,
                              bool same_node)
{
    mca_btl_ofi_wake_route_t route =
        mca_btl_ofi_wake_route(peer->ip4, same_node ? peer->port : peer->net_port, same_node);

    memset(wake, 0, sizeof(*wake));
    wake->reachable = MCA_BTL_OFI_WAKE_NONE != route && 0 != peer->key;
    wake->remote = MCA_BTL_OFI_WAKE_REMOTE == route;
    wake->key = peer->key;
    wake->to.sin_family = AF_INET;
    if (wake->remote) {
        wake->to.sin_port = htons(peer->net_port);
        wake->to.sin_addr.s_addr = peer->ip4;
    } else {
        wake->to.sin_port = htons(peer->port);
        wake->to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
}

bool mca_btl_ofi_wake_send(const mca_btl_ofi_wake_to_t *wake)
{
    int fd = channel.fd[wake->remote ? WAKE_NET : WAKE_LO];

    if (fd < 0 || !wake->reachable) {
        return false;
    }
    return sendto(fd, &wake->key, sizeof(wake->key), MSG_DONTWAIT,
                  (const struct sockaddr *) &wake->to, sizeof(wake->to))
           == (ssize_t) sizeof(wake->key);
}

/* ------------------------------------------------------------------ */
/* The thread                                                          */

/*
 * A look costs the rank whose core the thread shares about 10 us (the
 * wake-up, two context switches, the provider's progress, a colder cache):
 * one every 100 us took 9.5 % of a computing rank's time.  So the thread
 * looks only as often as a peer may need it (mca_btl_ofi_look_after_us):
 * - while no registration of ours takes remote access, no peer can aim a
 *   one-sided operation at us: no thread until the first one, then no
 *   timer, only the kick of the next exposure;
 * - while memory is exposed but nothing has been aimed at us for
 *   btl_ofi_progress_linger_us: a look every btl_ofi_progress_sleep_us, a
 *   safety net, provided every peer can wake the thread (an origin that
 *   waits btl_ofi_progress_wake_us without completions sends a datagram);
 * - within the linger time of a sign of traffic (a wake-up, a look that
 *   found completions or operations of our own outstanding): a look every
 *   period (btl_ofi_progress_idle_us, times the ranks each CPU carries
 *   where they outnumber the CPUs), and at once when woken; after a look
 *   that found the application in MPI, on a core no sample has read
 *   contended for a while (cpu_calm), a look in a second
 *   (MCA_BTL_OFI_PRESENT_LOOK_US): peers that wait wake it.
 * A thread that sleeps for milliseconds is also one the scheduler lets
 * preempt the computation as soon as it wakes.
 */
typedef enum {
    LOOK_STOP,  /**< the thread must end */
    LOOK_KICK,  /**< memory became exposed */
    LOOK_TIMER, /**< the period is over */
    LOOK_WOKEN, /**< a waiting origin's datagram */
    LOOK_NONE,  /**< only datagrams without the key: no look */
} look_cause_t;

static struct {
    pthread_t thread;
    int kick_fd;                /**< eventfd: exposure began, or stopping is set */
    int timer_fd;               /**< timerfd: the thread's period, with nudges */
    bool timer_armed;           /**< timer_fd may fire: a timeout-less wait disarms it */
    bool nudge_waits;           /**< the next timed wait is a look that may serve a peer */
    volatile bool stopping;     /**< set before the last kick */
    bool enabled;               /**< component init wants a thread */
    bool can_sleep;             /**< peers can wake it: the sleep period applies */
    mca_btl_ofi_look_fn_t look; /**< what a look does */
    int period_us;              /**< its period while traffic shows */
    bool crowded;               /**< the job's ranks outnumber the CPUs */
    bool running;               /**< created and not joined; under start_lock */
    /** the thread waits in a way that only a kick ends soon enough (no
     * timer, or one longer than some peer may wait): an exposure that
     * begins then must kick it */
    volatile int32_t parked;
    opal_atomic_int64_t exposed; /**< registrations with remote access held */
    pthread_mutex_t start_lock;  /**< serialises creation against stop */
} progress_thread = { .kick_fd = -1, .timer_fd = -1, .start_lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * The nudge.  Linux decides whether a woken thread preempts the running
 * task when it wakes it, and not again until the next tick (4 ms at HZ
 * 250) or the next wake-up on that CPU.  Traced here: when the thread's
 * timer fires as its computing rank's time slice nears its end, the rank
 * keeps the core and the thread waits for the tick, an operation 1-4 ms
 * late each time.  Where the rank and its thread have a core to
 * themselves that is rare (1 timed wake-up in 2 600 on one node); where
 * the thread competes with another process's scheduling group (2
 * simulated hosts on the same CPUs), 1-5 % of them.  A second timer,
 * firing btl_ofi_progress_nudge_us after the thread's, wakes a helper
 * bound to the thread's CPU: that wake-up makes the scheduler choose
 * again, and by then the rank's slice is over.  The thread's own timer is
 * then a timerfd armed just before the helper's, so the helper's, later,
 * reprograms no timer device: 0-3 us of thread time per look more than a
 * ppoll timeout, measured under a stream of puts.  Nudging only after a
 * late wake-up saved little of that (late wake-ups come often enough
 * under traffic) and left the first of each burst unrescued.  The helper
 * is not disarmed: a thread that ran in time re-arms it for its next wait
 * before it fires, or it finds the thread in a look and goes back to
 * sleep.  A look that nobody waits for gets no nudge
 * (mca_btl_ofi_look_is_nudged).
 */
static struct {
    pthread_t thread;
    int timer_fd;            /**< -1: no helper (yet) */
    int cpu;                 /**< the CPU the helper is bound to; -1: none yet */
    bool unavailable;        /**< the helper could not start: never again */
    volatile bool armed;     /**< the look thread waits on a timer, due at due_ns */
    volatile int64_t due_ns; /**< CLOCK_MONOTONIC */
} nudger = { .timer_fd = -1, .cpu = -1 };

static void ask_short_slice(int slice_us);

static inline int64_t nudge_ns(void)
{
    return (int64_t) mca_btl_ofi_component.progress_nudge_us * 1000;
}

/* Arms timerfd @p fd to fire at @p at_ns (CLOCK_MONOTONIC); 0 disarms it
 * (and clears what fired). */
static void arm_at(int fd, int64_t at_ns)
{
    struct itimerspec when = { .it_value = { .tv_sec = (time_t) (at_ns / 1000000000),
                                             .tv_nsec = (long) (at_ns % 1000000000) } };

    (void) timerfd_settime(fd, TFD_TIMER_ABSTIME, &when, NULL);
}

/* The helper's timer fired while the look thread waits.  Past the thread's
 * own timer, the thread was woken and has not run: the scheduler may pass
 * it over again, so nudge until it runs.  Before it (the thread armed its
 * next wait as the timer fired), put that wait's nudge back. */
static void nudge_again(void)
{
    int64_t now = mca_btl_ofi_now_ns(), due = nudger.due_ns;

    if (now < due + nudge_ns()) {
        arm_at(nudger.timer_fd, due + nudge_ns());
        return;
    }
    mca_btl_ofi_count(mca_btl_ofi_component.modules[0], MCA_BTL_OFI_CNT_NUDGE, 1);
    arm_at(nudger.timer_fd, now + nudge_ns());
}

static void *nudger_main(void *arg)
{
    uint64_t fired;

    (void) arg;
    (void) pthread_setname_np(pthread_self(), "btl-ofi-nudge");
    ask_short_slice(mca_btl_ofi_component.progress_slice_us);
    for (;;) {
        ssize_t n = read(nudger.timer_fd, &fired, sizeof(fired));

        if (progress_thread.stopping || (n < 0 && EINTR != errno)) {
            break;
        }
        if (n == (ssize_t) sizeof(fired) && nudger.armed) {
            nudge_again();
        }
    }
    return NULL;
}

/* Started by the look thread's first timed wait; without it the thread
 * runs as before. */
static bool start_nudger(void)
{
    pthread_attr_t attr;
    int rc;

    if (nudger.timer_fd >= 0 || nudger.unavailable) {
        return nudger.timer_fd >= 0;
    }
    nudger.unavailable = true;
    nudger.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (nudger.timer_fd < 0) {
        MCA_BTL_OFI_VERBOSE(1, "progress thread without nudges: timerfd_create failed: %s",
                            strerror(errno));
        return false;
    }
    nudger.cpu = -1;
    pthread_attr_init(&attr);
    (void) pthread_attr_setstacksize(&attr, 64 * 1024);
    rc = pthread_create(&nudger.thread, &attr, nudger_main, NULL);
    pthread_attr_destroy(&attr);
    if (0 != rc) {
        MCA_BTL_OFI_VERBOSE(1, "progress thread without nudges: pthread_create failed: %s",
                            strerror(rc));
        close(nudger.timer_fd);
        nudger.timer_fd = -1;
        return false;
    }
    nudger.unavailable = false;
    return true;
}

/* After the look thread is joined: nothing arms the timer any more. */
static void stop_nudger(void)
{
    if (nudger.timer_fd < 0) {
        nudger.unavailable = false;
        return;
    }
    progress_thread.stopping = true;
    arm_at(nudger.timer_fd, 1);
    pthread_join(nudger.thread, NULL);
    close(nudger.timer_fd);
    nudger.timer_fd = -1;
}

/* The helper's wake-up must land on the CPU where the thread waits. */
static void bind_nudger_here(void)
{
    int cpu = sched_getcpu();
    cpu_set_t here;

    if (cpu < 0 || cpu == nudger.cpu || cpu >= CPU_SETSIZE) {
        return;
    }
    CPU_ZERO(&here);
    CPU_SET(cpu, &here);
    if (0 == pthread_setaffinity_np(nudger.thread, sizeof(here), &here)) {
        nudger.cpu = cpu;
    }
}

/* A timed wait that ended more than the nudge time after its timeout. */
static void note_lateness(int64_t due)
{
    if (mca_btl_ofi_now_ns() > due + nudge_ns()) {
        mca_btl_ofi_count(mca_btl_ofi_component.modules[0], MCA_BTL_OFI_CNT_LOOK_LATE, 1);
    }
}

/* A wait whose timer is the thread's timerfd (one of @p fds), due at
 * @p due, with the helper's armed after it to fire the nudge time later. */
static int wait_nudged(struct pollfd *fds, nfds_t nfds, int64_t due)
{
    int rc;

    arm_at(progress_thread.timer_fd, due);
    progress_thread.timer_armed = true;
    bind_nudger_here();
    nudger.due_ns = due;
    nudger.armed = true;
    arm_at(nudger.timer_fd, due + nudge_ns());
    rc = ppoll(fds, nfds, NULL, NULL);
    nudger.armed = false;
    return rc;
}

/* Waits until one of @p fds is readable or @p timeout_us (-1: no timeout)
 * passed: with nudges, on the thread's timerfd; otherwise with ppoll's own
 * timeout.  Returns ppoll's answer. */
static int wait_with_timer(struct pollfd *fds, nfds_t nfds, int timeout_us)
{
    struct timespec timeout = { .tv_sec = timeout_us / 1000000,
                                .tv_nsec = (long) (timeout_us % 1000000) * 1000 };
    bool timed = timeout_us >= 0 && nudge_ns() > 0;
    bool nudged = timed && progress_thread.nudge_waits && start_nudger();
    int64_t due;
    int rc;

    if (!nudged && progress_thread.timer_armed) {
        /* left armed by a nudged wait that the eventfd or a datagram ended */
        arm_at(progress_thread.timer_fd, 0);
        progress_thread.timer_armed = false;
    }
    if (!timed) {
        return ppoll(fds, nfds, timeout_us >= 0 ? &timeout : NULL, NULL);
    }
    due = mca_btl_ofi_now_ns() + (int64_t) timeout_us * 1000;
    rc = nudged ? wait_nudged(fds, nfds, due) : ppoll(fds, nfds, &timeout, NULL);
    note_lateness(due);
    return rc;
}

/* Every wake-up takes a core from a rank that may be spinning in MPI, and
 * its partner waits meanwhile.  While the application progresses
 * everything itself, a thread that peers can wake goes straight to
 * MCA_BTL_OFI_WAKEABLE_BACKOFF periods between looks: should the rank leave
 * MPI, an origin that waits wakes the thread within
 * btl_ofi_progress_wake_us (halving the interval instead cost an 8-byte
 * put on shm a fifth of its time in the first milliseconds after a window
 * appeared; at 16 periods instead of 64, 8-byte put and fetch-and-op on
 * tcp;ofi_rxm took 4-5 % longer than with no thread).  One that some
 * peer cannot wake halves its rate each time, to MCA_BTL_OFI_IDLE_BACKOFF.
 * Either looks every btl_ofi_progress_idle_us again as soon as a context
 * was left idle. */
static int next_interval_us(int interval, bool stepped_in)
{
    int base = progress_thread.period_us, longest = base * MCA_BTL_OFI_IDLE_BACKOFF;

    if (stepped_in) {
        return base;
    }
    if (progress_thread.can_sleep) {
        return base * MCA_BTL_OFI_WAKEABLE_BACKOFF;
    }
    return (interval < longest / 2) ? interval * 2 : longest;
}

static void drain_kicks(void)
{
    uint64_t count;

    while (read(progress_thread.kick_fd, &count, sizeof(count)) < 0 && EINTR == errno) {
    }
}

/* The look thread's descriptors: what ends its waits. */
enum { FD_KICK, FD_TIMER, FD_WAKE, FD_WAKE_NET, FD_COUNT };

/* Wake-ups read from whichever socket has some; a datagram without the
 * key (a kernel that refused the filter) neither counts nor starts a look. */
static look_cause_t take_wakeups(const struct pollfd *fds, int *wakeups)
{
    int n = 0;

    for (int i = FD_WAKE; i < FD_COUNT; ++i) {
        if (fds[i].fd >= 0 && (fds[i].revents & POLLIN)) {
            n += drain_wakeups(fds[i].fd);
        }
    }
    *wakeups += n;
    return n > 0 ? LOOK_WOKEN : LOOK_NONE;
}

/* Waits on the kick eventfd, the thread's timer (@p timeout_us, -1: none)
 * and, when @p nfds is FD_COUNT, the wake-up sockets. */
static look_cause_t wait_on(struct pollfd *fds, nfds_t nfds, int timeout_us, int *wakeups)
{
    if (wait_with_timer(fds, nfds, timeout_us) <= 0) {
        return LOOK_TIMER; /* a signal: look either way */
    }
    if (fds[FD_KICK].revents & POLLIN) {
        drain_kicks();
        return progress_thread.stopping ? LOOK_STOP : LOOK_KICK;
    }
    if (nfds > FD_WAKE) {
        return take_wakeups(fds, wakeups);
    }
    return LOOK_TIMER;
}

/* Without wake-ups, or with nothing exposed, one wait will do.  With them,
 * one wait for the period or a wake-up; a wake-up that comes within the
 * gap of the last look (the caller's previous return) waits out the rest
 * of the gap before the look.  So a thread that nothing wakes, the usual
 * case while nothing is aimed at its rank, is woken once per look, not
 * twice (a wait for the gap, then one for the rest).  The first @p deaf_us
 * of the wait listen to the timer alone; wake-ups that came meanwhile end
 * the rest of it at once. */
static look_cause_t sleep_until_look(struct pollfd *fds, int timeout_us, int gap, int deaf_us,
                                     int *wakeups)
{
    int64_t start = mca_btl_ofi_now_ns(), left, due;
    look_cause_t cause;

    if (fds[FD_WAKE].fd < 0 || timeout_us < 0 || gap >= timeout_us || deaf_us >= timeout_us) {
        return wait_on(fds, FD_WAKE, timeout_us, wakeups);
    }
    if (deaf_us > 0 && LOOK_TIMER != (cause = wait_on(fds, FD_WAKE, deaf_us, wakeups))) {
        return cause;
    }
    due = start + (int64_t) timeout_us * 1000;
    do {
        left = due - mca_btl_ofi_now_ns();
        cause = left > 0 ? wait_on(fds, FD_COUNT, (int) (left / 1000), wakeups) : LOOK_TIMER;
    } while (LOOK_NONE == cause);
    if (LOOK_WOKEN == cause) {
        left = (int64_t) gap * 1000 - (mca_btl_ofi_now_ns() - start);
        if (left > 0) {
            /* the timer alone: a kick meanwhile waits in the eventfd */
            (void) wait_with_timer(fds + FD_TIMER, 1, (int) (left / 1000));
        }
    }
    return cause;
}

/*
 * A kick at every exposure woke the thread once per rendezvous message
 * (ob1 exposes each large send buffer for the peer's read, then releases
 * it): on shm, 1 MiB pingpong took 1.36 times as long as with no thread,
 * a wake-up and two context switches on the rank's core per message.  A
 * thread that waits with a timer it may keep sees such an exposure at its
 * next look, so only one that waits with no timer, or where some peer
 * cannot wake it with a timer longer than its period, asks for the kick.
 * A window still kicks it (mca_btl_ofi_progress_expose).  The flag is set
 * before exposed is read again, and an exposure reads the flag after it
 * counts, so one of the two sees the other.
 */
static bool exposure_must_kick(int timeout_us, int interval_us)
{
    return timeout_us < 0 || (!progress_thread.can_sleep && timeout_us > interval_us);
}

/* Returns false when memory became exposed meanwhile: plan again. */
static bool park(void)
{
    __atomic_store_n(&progress_thread.parked, 1, __ATOMIC_SEQ_CST);
    if (0 == __atomic_load_n(&progress_thread.exposed, __ATOMIC_SEQ_CST)) {
        return true;
    }
    /* an exposer that took the flag first kicked: the eventfd keeps it,
     * and the next wait ends at once */
    __atomic_store_n(&progress_thread.parked, 0, __ATOMIC_SEQ_CST);
    return false;
}

static void unpark(void)
{
    if (0 != progress_thread.parked) {
        __atomic_store_n(&progress_thread.parked, 0, __ATOMIC_RELAXED);
    }
}

static void count_look(look_cause_t cause, int wakeups)
{
    mca_btl_ofi_module_t *first = mca_btl_ofi_component.modules[0];

    mca_btl_ofi_count(first, MCA_BTL_OFI_CNT_LOOK, 1);
    mca_btl_ofi_count(
        first, LOOK_WOKEN == cause ? MCA_BTL_OFI_CNT_LOOK_WOKEN : MCA_BTL_OFI_CNT_LOOK_TIMER, 1);
    if (wakeups > 0) {
        mca_btl_ofi_count(first, MCA_BTL_OFI_CNT_WAKE_RECV, (uint64_t) wakeups);
    }
}

/* A look happens when the plan's period is over or a peer wakes the
 * thread, but never sooner than btl_ofi_progress_gap_us after the last
 * one: a thread that wakes too often for the scheduler to let it preempt
 * a computing rank at once (measured: looks 40 us apart) makes 1-2 % of
 * the operations wait for the next tick, 4 ms here. */
/* What sched_setattr(2) reads, up to sched_period: glibc before 2.41
 * declares neither the call nor the structure. */
typedef struct {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
} look_sched_attr_t;

/*
 * Linux's EEVDF scheduler (6.6 on) lets a woken task run at once only when
 * its virtual deadline comes before the running one's.  A thread that
 * looks every 100 us has used its share by then, so a rank that computes
 * keeps the core until its slice or the tick ends: 1-5 ms seen across
 * hosts.  A shorter slice (6.12 on; the default is 3 ms) gives the thread
 * an earlier deadline on every wake-up; the CPU time it takes does not
 * change.  The thread's nice value stays what it is.
 */
static void ask_short_slice(int slice_us)
{
#if defined(__linux__) && defined(SYS_sched_setattr)
    look_sched_attr_t attr = { .size = sizeof(attr), .sched_policy = SCHED_OTHER };
    pid_t tid = (pid_t) syscall(SYS_gettid);

    if (slice_us <= 0) {
        return;
    }
    errno = 0;
    attr.sched_nice = getpriority(PRIO_PROCESS, (id_t) tid);
    if (0 != errno) {
        return;
    }
    attr.sched_runtime = (uint64_t) slice_us * 1000;
    if (0 != syscall(SYS_sched_setattr, tid, &attr, 0)) {
        MCA_BTL_OFI_VERBOSE(10, "progress thread: the scheduler kept its slice: %s",
                            strerror(errno));
    }
#else
    (void) slice_us;
#endif
}

/* btl_ofi_progress_rt_priority: refused where the process may not have a
 * real-time priority; the thread then runs as before, and says so once. */
static void ask_real_time(int priority)
{
    struct sched_param param = { .sched_priority = priority };
    int rc;

    if (priority <= 0) {
        return;
    }
    rc = pthread_setschedparam(progress_thread.thread, SCHED_RR, &param);
    if (0 != rc) {
        opal_show_help("help-mpi-btl-ofi.txt", "progress rt refused", true,
                       opal_process_info.nodename, priority, strerror(rc));
        return;
    }
    MCA_BTL_OFI_VERBOSE(10, "progress thread: SCHED_RR priority %d", priority);
}

/* How long the rank's main thread waited for a CPU (the second field of
 * the process's schedstat, its thread group leader's), sampled every
 * MCA_BTL_OFI_CONTENDED_SAMPLE_NS by the thread; a kernel without
 * schedstats never reads as contended. */
static struct {
    int fd;
    int64_t at_ns;
    int64_t waited_ns;
    bool contended;
    bool judged;          /**< contended compares two samples */
    int64_t contended_at; /**< the last sample that read contended */
} cpu_wait = { .fd = -1 };

/* Whether the rank's core has been free of other work for a while: two
 * samples read, none contended within MCA_BTL_OFI_CALM_NS. */
static bool cpu_calm(int64_t now)
{
    if (cpu_wait.fd < 0) {
        return true;
    }
    return cpu_wait.judged
           && (0 == cpu_wait.contended_at || now - cpu_wait.contended_at > MCA_BTL_OFI_CALM_NS);
}

static void cpu_wait_open(void)
{
    if (!progress_thread.crowded) {
        cpu_wait.fd = open("/proc/self/schedstat", O_RDONLY | O_CLOEXEC);
    }
}

static void cpu_wait_close(void)
{
    if (cpu_wait.fd >= 0) {
        (void) close(cpu_wait.fd);
        cpu_wait.fd = -1;
    }
}

/* The rank's run-queue wait so far, in ns; false where it cannot be read. */
static bool read_cpu_wait(int64_t *waited_ns)
{
    char text[96];
    unsigned long long ran, waited;
    ssize_t n = pread(cpu_wait.fd, text, sizeof(text) - 1, 0);

    if (n <= 0) {
        return false;
    }
    text[n] = '\0';
    if (2 != sscanf(text, "%llu %llu", &ran, &waited)) {
        return false;
    }
    *waited_ns = (int64_t) waited;
    return true;
}

static bool cpu_contended(int64_t now)
{
    int64_t waited;

    if (cpu_wait.fd < 0 || now - cpu_wait.at_ns < MCA_BTL_OFI_CONTENDED_SAMPLE_NS) {
        return cpu_wait.contended;
    }
    if (!read_cpu_wait(&waited)) {
        cpu_wait_close();
        return cpu_wait.contended = false;
    }
    if (0 != cpu_wait.at_ns) {
        cpu_wait.contended =
            mca_btl_ofi_cpu_contended(waited - cpu_wait.waited_ns, now - cpu_wait.at_ns);
        cpu_wait.judged = true;
        if (cpu_wait.contended) {
            cpu_wait.contended_at = now;
        }
    }
    cpu_wait.at_ns = now;
    cpu_wait.waited_ns = waited;
    return cpu_wait.contended;
}

/*
 * Sends are watched for the linger time after the last sign of traffic
 * while memory is exposed, and for SEND_WATCH_PERIODS periods while it is
 * not; then the flag is cleared, and the next send kicks the thread.
 * The plan that clears it still counts as watching: a send posted just
 * before the clear saw the flag set and kicked nobody, and the look this
 * plan leads to moves it.
 */
#define SEND_WATCH_PERIODS 4

static bool watch_sends(int64_t quiet_ns, int64_t linger_ns)
{
    if (0 == mca_btl_ofi_progress_watching_sends) {
        return false;
    }
    if (quiet_ns >= linger_ns) {
        __atomic_store_n(&mca_btl_ofi_progress_watching_sends, 0, __ATOMIC_SEQ_CST);
    }
    return true;
}

static void *progress_thread_main(void *arg)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    struct pollfd fds[FD_COUNT] = {
        [FD_KICK] = { .fd = progress_thread.kick_fd, .events = POLLIN },
        /* armed only by nudged waits: without nudges, nothing to poll */
        [FD_TIMER] = { .fd = c->progress_nudge_us > 0 ? progress_thread.timer_fd : -1,
                       .events = POLLIN },
        [FD_WAKE] = { .fd = channel.fd[WAKE_LO], .events = POLLIN },
        [FD_WAKE_NET] = { .fd = channel.fd[WAKE_NET], .events = POLLIN },
    };
    mca_btl_ofi_look_plan_t plan = { .can_sleep = progress_thread.can_sleep,
                                     .linger_ns = (int64_t) c->progress_linger_us * 1000,
                                     .interval_us = progress_thread.period_us,
                                     .sleep_us = c->progress_sleep_us,
                                     .crowded = progress_thread.crowded };
    int64_t last_traffic = mca_btl_ofi_now_ns();
    /* with nothing exposed only our own sends need the thread, and they
     * show as traffic while queued or in flight: a few periods after the
     * last of them are enough, and a rank that computes after a barrier
     * pays for a few looks, not for a whole linger time of them */
    const int64_t send_linger_ns = (int64_t) SEND_WATCH_PERIODS * progress_thread.period_us * 1000;
    int64_t watch_began = last_traffic; /* the kick that began the send watch */
    bool woken_for_nothing = false, in_flight = false;

    (void) arg;
    /* so that top -H, ps -L and perf name it */
    (void) pthread_setname_np(pthread_self(), "btl-ofi-look");
    if (0 == c->progress_rt_priority) {
        ask_short_slice(c->progress_slice_us); /* (it would undo SCHED_RR) */
    }
    /* Linux lets a timed wait overrun by 50 us by default, half of a
     * whole idle period: ask for 1 us (a timerfd has no slack) */
    (void) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    cpu_wait_open();
    for (;;) {
        int wakeups = 0, timeout_us;
        bool busy = false, stepped_in;
        int64_t now;
        look_cause_t cause;

        now = mca_btl_ofi_now_ns();
        plan.exposed = progress_thread.exposed > 0;
        plan.quiet_ns = now - last_traffic;
        plan.contended = cpu_contended(now);
        plan.cpu_calm = cpu_calm(now);
        plan.sending = watch_sends(plan.quiet_ns, plan.exposed ? plan.linger_ns : send_linger_ns);
        /* a send the last look saw in flight or queued may complete only through
         * our provider (sockets, ofi_rxm's connection set-up): it must not
         * be left with no look at all while the application blocks outside
         * MPI (in PMIx_Connect during a spawn) and its peer is still
         * starting */
        plan.own_sends = in_flight;
        timeout_us = mca_btl_ofi_look_after_us(&plan);
        if (exposure_must_kick(timeout_us, plan.interval_us) && !park()) {
            continue;
        }
        progress_thread.nudge_waits = mca_btl_ofi_look_is_nudged(&plan);
        /* A wake-up started the last look and the application was in every
         * context: origins are waking a rank that is communicating (a
         * competing load slows it), and the thread would not look within
         * the gap anyway, so it hears only its timer until then.  Otherwise
         * it listens at once: a second timed wait per look is one more point
         * where a loaded core passes to another process (8-byte atomics on
         * shm were 5-8 % slower). */
        cause = sleep_until_look(fds, timeout_us, c->progress_gap_us,
                                 woken_for_nothing ? c->progress_gap_us : 0, &wakeups);
        unpark();
        if (LOOK_STOP == cause) {
            break;
        }
        if (LOOK_KICK == cause) {
            watch_began = mca_btl_ofi_now_ns();
        }
        if (LOOK_KICK == cause) {
            /* the next plan sees the new exposure or send; either is
             * likely followed by traffic */
            last_traffic = mca_btl_ofi_now_ns();
            continue;
        }
        if (!(progress_thread.exposed > 0 || plan.sending || plan.own_sends)) {
            /* nothing to look at: the plan parks the thread once the
             * linger time is over (refreshed here, it woke a computing
             * rank's thread every sleep period for good) */
            continue;
        }
        in_flight = false;
        stepped_in = progress_thread.look(&busy, &in_flight);
        count_look(cause, wakeups);
        now = mca_btl_ofi_now_ns();
        /* a send in flight keeps the thread looking for one linger time
         * from the send that began the watch, no longer: one to a peer
         * that computes completes only when that peer progresses */
        if (busy || LOOK_WOKEN == cause || (in_flight && now - watch_began < plan.linger_ns)) {
            last_traffic = now;
        }
        plan.interval_us = next_interval_us(plan.interval_us, stepped_in);
        plan.app_present = !stepped_in;
        woken_for_nothing = LOOK_WOKEN == cause && !stepped_in;
    }
    cpu_wait_close();
    return NULL;
}

/* 1 while there is no thread to tell (none enabled, or stopped) */
volatile int32_t mca_btl_ofi_progress_watching_sends = 1;

void mca_btl_ofi_progress_thread_enable(const mca_btl_ofi_progress_setup_t *setup)
{
    progress_thread.enabled = true;
    mca_btl_ofi_progress_watching_sends = 0;
    progress_thread.can_sleep = setup->can_sleep;
    progress_thread.look = setup->look;
    progress_thread.period_us =
        setup->period_us > 0 ? setup->period_us : mca_btl_ofi_component.progress_idle_us;
    progress_thread.crowded = setup->crowded;
}

static void close_thread_fds(void)
{
    if (progress_thread.kick_fd >= 0) {
        close(progress_thread.kick_fd);
    }
    if (progress_thread.timer_fd >= 0) {
        close(progress_thread.timer_fd);
    }
    progress_thread.kick_fd = progress_thread.timer_fd = -1;
}

static int start_locked(void)
{
    int rc;

    if (progress_thread.running || !progress_thread.enabled) {
        return OPAL_SUCCESS;
    }
    progress_thread.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    progress_thread.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (progress_thread.kick_fd < 0 || progress_thread.timer_fd < 0) {
        MCA_BTL_OFI_VERBOSE(1, "no progress thread: %s failed: %s",
                            progress_thread.kick_fd < 0 ? "eventfd" : "timerfd_create",
                            strerror(errno));
        close_thread_fds();
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    progress_thread.stopping = false;
    rc = pthread_create(&progress_thread.thread, NULL, progress_thread_main, NULL);
    if (0 != rc) {
        close_thread_fds();
        MCA_BTL_OFI_VERBOSE(1, "no progress thread: pthread_create failed: %s", strerror(rc));
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    progress_thread.running = true;
    MCA_BTL_OFI_VERBOSE(10, "progress thread started: memory is exposed or a send was posted");
    ask_real_time(mca_btl_ofi_component.progress_rt_priority);
    return OPAL_SUCCESS;
}

static void kick(void)
{
    uint64_t one = 1;

    while (write(progress_thread.kick_fd, &one, sizeof(one)) < 0 && EINTR == errno) {
    }
}

/* Something for the thread to watch began: wake it, or create it. */
static void kick_or_start(void)
{
    pthread_mutex_lock(&progress_thread.start_lock);
    if (progress_thread.running) {
        kick();
    } else {
        (void) start_locked();
    }
    pthread_mutex_unlock(&progress_thread.start_lock);
}

/*
 * A window (memory that takes remote atomics: osc/rdma's, never ob1's)
 * kicks the thread even when it has a timer: the thread plans from the
 * window on.  Beside one CPU-bound process per core, shm 8-byte cas_lat
 * stalled about 8 ms in 10 of 12 launches when windows kicked only a
 * thread with no timer, in 2 of 12 when every window kicked it.
 */
void mca_btl_ofi_progress_expose(int delta, bool window)
{
    if (1 != delta) {
        (void) opal_atomic_fetch_add_64(&progress_thread.exposed, delta);
        return; /* the thread sees it at its next look */
    }
    if (0 != opal_atomic_fetch_add_64(&progress_thread.exposed, 1) || !progress_thread.enabled) {
        return;
    }
    if (mca_btl_ofi_component.module_count > 0) {
        mca_btl_ofi_count(mca_btl_ofi_component.modules[0], MCA_BTL_OFI_CNT_EXPOSE, 1);
    }
    if (0 != __atomic_exchange_n(&progress_thread.parked, 0, __ATOMIC_SEQ_CST) || window
        || !__atomic_load_n(&progress_thread.running, __ATOMIC_ACQUIRE)) {
        kick_or_start();
    }
}

bool mca_btl_ofi_progress_exposed(void)
{
    return progress_thread.exposed > 0;
}

/* The first send after the thread stopped watching: wake it, or start it. */
void mca_btl_ofi_progress_watch_sends(void)
{
    int32_t idle = 0;

    if (!__atomic_compare_exchange_n(&mca_btl_ofi_progress_watching_sends, &idle, 1, false,
                                     __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
        return; /* another thread of the rank told it */
    }
    kick_or_start();
}

void mca_btl_ofi_progress_thread_stop(void)
{
    pthread_mutex_lock(&progress_thread.start_lock);
    progress_thread.enabled = false;
    mca_btl_ofi_progress_watching_sends = 1;
    mca_btl_ofi_wake_listen(false);
    if (!progress_thread.running) {
        pthread_mutex_unlock(&progress_thread.start_lock);
        return;
    }
    progress_thread.stopping = true;
    kick();
    pthread_join(progress_thread.thread, NULL);
    stop_nudger();
    close_thread_fds();
    progress_thread.running = false;
    pthread_mutex_unlock(&progress_thread.start_lock);
    MCA_BTL_OFI_VERBOSE(10, "progress thread stopped");
}
