/*
 * Dynamic processes through our btl/ofi: a job meets processes that were
 * not there at MPI_Init, talks to them two-sided and one-sided, and parts
 * from them again.
 *
 * Usage: dpm [-m spawn|multiple|accept|join|die|serve|reach] [-n CHILDREN] [-c CYCLES]
 *            [-h HOST] [-p FILE]
 *   spawn     MPI_Comm_spawn of CHILDREN copies of this program (default)
 *   multiple  MPI_Comm_spawn_multiple: two commands, CHILDREN in all
 *   accept    spawned children meet the parents again through a port:
 *             MPI_Open_port, MPI_Comm_accept / MPI_Comm_connect
 *   join      the first parent and the first child meet through a TCP
 *             socket: MPI_Comm_join
 *   die       spawn, then the last child SIGKILLs itself ("KILL rank=R
 *             at=<epoch seconds>") while the others exchange with it: the
 *             job must end (tests/robustness, dpm-death); a parent whose
 *             calls come back prints "SURVIVED" (exit 4)
 *   serve     no children: MPI_Open_port, the port into FILE, MPI_Comm_accept
 *   reach     no children: the port from FILE, MPI_Comm_connect to a job
 *             started apart in the same runtime (tests/mpi/dvm_connect.sh)
 *   -h HOST   the children start on HOST (the "host" info key)
 *   -p FILE   serve/reach: where the port name is passed
 *
 * Each cycle: the parents start the children, both sides build one
 * communicator over all of them, pass a token round it, exchange a
 * rendezvous-sized message with their neighbours, and through windows of
 * the three flavours (created, dynamic, allocated) put a pattern into the
 * right neighbour and fetch-and-add a counter on rank 0; every byte and
 * every fetched value is checked.  Then they free everything and
 * disconnect.  From the second cycle on, the parents' file descriptors,
 * threads and registrations held (mr_count - mr_release_count) must stay
 * what they were after the first.  The address-vector entries held
 * (av_insert_count - av_remove_count) leave when the children leave (they
 * say so at MPI_Finalize; Open MPI 5 also announces their job's end): they
 * never grow past a few cycles' share, and after the last cycle they come
 * back to what they were before the first, under Open MPI 4.1 too.  Run
 * the cycles with btl_ofi_mr_cache_max 0: the registration cache otherwise
 * keeps a released registration of memory that osc/rdma allocates anew for
 * each window, up to that bound.
 */
#include "common.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>

#define TAG_TOKEN  71
#define TAG_BULK   72
#define TAG_PORT   73
#define BULK_BYTES (1u << 20)
#define WIN_BYTES  4096

enum mode { MODE_SPAWN, MODE_MULTIPLE, MODE_ACCEPT, MODE_JOIN, MODE_DIE, MODE_SERVE, MODE_REACH };
static const char *const mode_names[] = { "spawn", "multiple", "accept", "join",
                                          "die",   "serve",    "reach" };

typedef struct {
    enum mode mode;
    int children;
    int cycles;
    const char *host;
    const char *port_file;
} options_t;

static void parse_options(int argc, char **argv, options_t *o)
{
    o->mode = MODE_SPAWN;
    o->children = 2;
    o->cycles = 1;
    o->host = NULL;
    o->port_file = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "-m")) {
            for (int m = 0; m <= MODE_REACH; ++m) {
                if (0 == strcmp(argv[i + 1], mode_names[m])) {
                    o->mode = (enum mode) m;
                }
            }
        } else if (0 == strcmp(argv[i], "-n")) {
            o->children = atoi(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-c")) {
            o->cycles = atoi(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-h")) {
            o->host = argv[i + 1];
        } else if (0 == strcmp(argv[i], "-p")) {
            o->port_file = argv[i + 1];
        }
    }
}

/* In the die mode an error coming back is the right answer: say so and
 * wait for the runtime to end the job (the parents must not hang, and
 * must not carry on either). */
#define TC_MPI_RETURNED(call)                                                                      \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (MPI_SUCCESS != rc_) {                                                                  \
            printf("[dpm rank %d] %s returned error %d after the child died\n", tc_rank, #call,    \
                   rc_);                                                                           \
            fflush(stdout);                                                                        \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                          \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------ */
/* What a leak would grow                                              */

typedef struct {
    long fds;
    long threads;
    long regions; /* registrations held by our component */
    long peers;   /* address-vector entries held */
} usage_t;

static long count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    long n = 0;

    if (NULL == d) {
        return -1;
    }
    while (NULL != readdir(d)) {
        ++n;
    }
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own descriptor */
}

static long count_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long n = -1;

    if (NULL == f) {
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        if (1 == sscanf(line, "Threads: %ld", &n)) {
            break;
        }
    }
    fclose(f);
    return n;
}

static long peers_held(void)
{
    return btl_ofi_pvars_get("av_insert_count") - btl_ofi_pvars_get("av_remove_count");
}

static void measure(usage_t *u)
{
    u->fds = count_fds();
    u->threads = count_threads();
    u->regions = btl_ofi_pvars_mr_held();
    u->peers = peers_held();
}

/* the children's entries leave once they said they leave (their
 * MPI_Finalize) or the runtime announced their job's end (Open MPI 5), and
 * our progress next finds nothing to do: a cycle or two late */
#define PEERS_AFTER(start, per_cycle) ((start) + 3 * (per_cycle))

/* START: before the first cycle; FIRST: after it.  Open MPI never tells
 * the BTLs of a disconnect (no del_procs before MPI_Finalize), so the
 * address-vector entries of the processes met leave only when they have
 * left (PEERS_AFTER); the rest must not grow at all. */
static void check_flat(const usage_t *start, const usage_t *first, const usage_t *now, int cycle)
{
    long per_cycle = first->peers - start->peers;

    TC_CHECK(now->fds <= first->fds, "cycle %d: %ld file descriptors, %ld after cycle 1", cycle,
             now->fds, first->fds);
    TC_CHECK(now->threads <= first->threads, "cycle %d: %ld threads, %ld after cycle 1", cycle,
             now->threads, first->threads);
    TC_CHECK(now->regions <= first->regions, "cycle %d: %ld registrations held, %ld after cycle 1",
             cycle, now->regions, first->regions);
    TC_CHECK(now->peers <= PEERS_AFTER(start->peers, per_cycle),
             "cycle %d: %ld address-vector entries held, %ld before the first cycle, %ld after it",
             cycle, now->peers, start->peers, first->peers);
}

/* After the last cycle: the entries of every child leave once it has
 * left and progress runs idle (MPI_Iprobe finds nothing). */
static void check_peers_return(const usage_t *start, const usage_t *first)
{
    long peers = 0, left;

    for (int waited_ms = 0; waited_ms < 20000; waited_ms += 10) {
        int flag;

        TC_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        peers = peers_held();
        if (peers <= start->peers) {
            break;
        }
        usleep(10000);
    }
    TC_CHECK(peers <= start->peers,
             "%ld address-vector entries held 20 s after the last cycle, %ld before the first",
             peers, start->peers);
    /* a child this rank met says it leaves at its MPI_Finalize: under
     * Open MPI 4.1 nothing else tells */
    left = btl_ofi_pvars_get("peer_left_count");
    TC_CHECK(left > 0 || first->peers == start->peers,
             "no child said it leaves (peer_left_count %ld), %ld met in the first cycle", left,
             first->peers - start->peers);
    tc_phase("after the last cycle: %ld address-vector entries held, %ld before the first; "
             "%ld children said they leave",
             peers, start->peers, left);
}

/* ------------------------------------------------------------------ */
/* Traffic on the communicator over parents and children               */

static void pass_token(MPI_Comm comm, int rank, int size)
{
    long token = 0;

    if (0 == rank) {
        token = 1;
        TC_MPI(MPI_Send(&token, 1, MPI_LONG, 1 % size, TAG_TOKEN, comm));
        TC_MPI(MPI_Recv(&token, 1, MPI_LONG, size - 1, TAG_TOKEN, comm, MPI_STATUS_IGNORE));
        /* 1 + 1 + 2 + ... + (size - 1) */
        TC_CHECK_EQ_INT("token after one round", 1 + (long) size * (size - 1) / 2, token);
    } else {
        TC_MPI(MPI_Recv(&token, 1, MPI_LONG, rank - 1, TAG_TOKEN, comm, MPI_STATUS_IGNORE));
        token += rank;
        TC_MPI(MPI_Send(&token, 1, MPI_LONG, (rank + 1) % size, TAG_TOKEN, comm));
    }
}

static void exchange_bulk(MPI_Comm comm, int rank, int size, int cycle)
{
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    static uint8_t *out, *in; /* the same every cycle: see window_memory */
    MPI_Request reqs[2];

    if (NULL == out) {
        out = tc_malloc(BULK_BYTES);
        in = tc_malloc(BULK_BYTES);
    }

    tc_fill_pattern(out, BULK_BYTES, (uint32_t) (rank * 1000 + cycle));
    memset(in, 0, BULK_BYTES);
    TC_MPI(MPI_Irecv(in, BULK_BYTES, MPI_BYTE, left, TAG_BULK, comm, &reqs[0]));
    TC_MPI(MPI_Isend(out, BULK_BYTES, MPI_BYTE, right, TAG_BULK, comm, &reqs[1]));
    TC_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
    TC_CHECK_PATTERN("1 MiB message from the left neighbour", in, BULK_BYTES,
                     (uint32_t) (left * 1000 + cycle));
}

/* The memory of a created or dynamic window of each flavour, the same in
 * every cycle: the registration cache keeps a released registration until
 * its memory is unmapped (up to btl_ofi_mr_cache_max), so fresh memory
 * every cycle would grow the count up to that bound with no leak. */
static uint8_t *window_memory(enum tc_flavour flavour)
{
    static uint8_t *memory[TC_NUM_FLAVOURS];

    if (NULL == memory[flavour]) {
        memory[flavour] = tc_malloc(WIN_BYTES);
    }
    memset(memory[flavour], 0, WIN_BYTES);
    return memory[flavour];
}

static MPI_Win open_window(MPI_Comm comm, enum tc_flavour flavour, uint8_t **base, MPI_Aint *disp)
{
    MPI_Win win;
    MPI_Aint mine = 0;
    int size;

    MPI_Comm_size(comm, &size);
    switch (flavour) {
    case TC_WIN_CREATE:
        *base = window_memory(flavour);
        TC_MPI(MPI_Win_create(*base, WIN_BYTES, 1, MPI_INFO_NULL, comm, &win));
        break;
    case TC_WIN_DYNAMIC:
        *base = window_memory(flavour);
        TC_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, comm, &win));
        TC_MPI(MPI_Win_attach(win, *base, WIN_BYTES));
        TC_MPI(MPI_Get_address(*base, &mine));
        break;
    default:
        TC_MPI(MPI_Win_allocate(WIN_BYTES, 1, MPI_INFO_NULL, comm, base, &win));
        memset(*base, 0, WIN_BYTES);
        break;
    }
    tc_win_errors_return(win);
    TC_MPI(MPI_Allgather(&mine, 1, MPI_AINT, disp, 1, MPI_AINT, comm));
    TC_MPI(MPI_Barrier(comm));
    return win;
}

static void close_window(MPI_Win *win, enum tc_flavour flavour, uint8_t *base)
{
    if (TC_WIN_DYNAMIC == flavour) {
        TC_MPI(MPI_Win_detach(*win, base));
    }
    TC_MPI(MPI_Win_free(win));
}

/* Half of a window: a pattern put by the left neighbour; its first 8
 * bytes: a counter every rank adds its rank + 1 to on rank 0. */
static void one_sided(MPI_Comm comm, int rank, int size, enum tc_flavour flavour, int cycle)
{
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    const size_t half = WIN_BYTES / 2;
    MPI_Aint *disp = tc_malloc((size_t) size * sizeof(MPI_Aint));
    uint8_t *base = NULL, *pattern = tc_malloc(half);
    long one = rank + 1, fetched = -1, total = 0;
    char what[96];
    MPI_Win win = open_window(comm, flavour, &base, disp);

    tc_fill_pattern(pattern, half, (uint32_t) (rank * 31 + cycle * 7 + (int) flavour));
    TC_MPI(MPI_Win_lock_all(0, win));
    TC_MPI(MPI_Put(pattern, (int) half, MPI_BYTE, right, disp[right] + (MPI_Aint) half, (int) half,
                   MPI_BYTE, win));
    TC_MPI(MPI_Fetch_and_op(&one, &fetched, MPI_LONG, 0, disp[0], MPI_SUM, win));
    TC_MPI(MPI_Win_flush_all(win));
    TC_MPI(MPI_Win_unlock_all(win));
    TC_CHECK(fetched >= 0 && fetched <= (long) size * (size + 1) / 2 - one,
             "%s window: fetch-and-add fetched %ld", tc_flavour_names[flavour], fetched);
    TC_MPI(MPI_Barrier(comm));

    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    snprintf(what, sizeof(what), "%s window: bytes the left neighbour put",
             tc_flavour_names[flavour]);
    TC_CHECK_PATTERN(what, base + half, half, (uint32_t) (left * 31 + cycle * 7 + (int) flavour));
    memcpy(&total, base, sizeof(total));
    TC_MPI(MPI_Win_unlock(rank, win));
    if (0 == rank) {
        TC_CHECK_EQ_INT("fetch-and-add counter on rank 0", (long) size * (size + 1) / 2, total);
    }
    TC_MPI(MPI_Barrier(comm));
    close_window(&win, flavour, base);
    free(pattern);
    free(disp);
}

/* Where the processes run, on the first cycle: the log shows children on
 * another host where the test asked for it. */
static void show_hosts(MPI_Comm comm, int rank, int size, int cycle)
{
    char name[MPI_MAX_PROCESSOR_NAME] = "", *all = NULL;
    int len = 0;

    if (1 != cycle) {
        return;
    }
    MPI_Get_processor_name(name, &len);
    if (0 == rank) {
        all = tc_malloc((size_t) size * MPI_MAX_PROCESSOR_NAME);
    }
    TC_MPI(MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                      0, comm));
    for (int i = 0; 0 == rank && i < size; ++i) {
        tc_phase("process %d of %d met: %s", i, size, all + (size_t) i * MPI_MAX_PROCESSOR_NAME);
    }
    free(all);
}

static void talk(MPI_Comm comm, int cycle)
{
    int rank, size;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    show_hosts(comm, rank, size, cycle);
    pass_token(comm, rank, size);
    exchange_bulk(comm, rank, size, cycle);
    for (int f = 0; f < TC_NUM_FLAVOURS; ++f) {
        one_sided(comm, rank, size, (enum tc_flavour) f, cycle);
    }
}

/* ------------------------------------------------------------------ */
/* Meeting                                                             */

/* The address of HOST (IPv4), or loopback when it has none. */
static struct in_addr address_of(const char *host)
{
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
    struct in_addr addr = { .s_addr = htonl(INADDR_LOOPBACK) };

    if (0 == getaddrinfo(host, NULL, &hints, &res) && NULL != res) {
        addr = ((struct sockaddr_in *) res->ai_addr)->sin_addr;
    }
    if (NULL != res) {
        freeaddrinfo(res);
    }
    return addr;
}

/* The first child listens on a TCP port of its host and tells the first
 * parent (its host name and the port) through the spawn
 * intercommunicator; the parent connects.  A parent that cannot connect
 * aborts the job: the child would wait in accept for good. */
static int join_socket(MPI_Comm inter, int is_child, int rank)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    char where[MPI_MAX_PROCESSOR_NAME + 8] = "";
    int fd = -1, listener, port = 0, name_len = 0;

    if (0 != rank) {
        return -1;
    }
    if (is_child) {
        addr.sin_addr.s_addr = htonl(INADDR_ANY);
        listener = socket(AF_INET, SOCK_STREAM, 0);
        if (listener < 0 || 0 != bind(listener, (struct sockaddr *) &addr, sizeof(addr))
            || 0 != listen(listener, 1)
            || 0 != getsockname(listener, (struct sockaddr *) &addr, &len)) {
            TC_FAIL("MPI_Comm_join: no listening socket");
        }
        MPI_Get_processor_name(where + sizeof(int), &name_len);
        port = ntohs(addr.sin_port);
        memcpy(where, &port, sizeof(port));
        TC_MPI(MPI_Send(where, (int) sizeof(where), MPI_CHAR, 0, TAG_PORT, inter));
        fd = accept(listener, NULL, NULL);
        close(listener);
    } else {
        TC_MPI(
            MPI_Recv(where, (int) sizeof(where), MPI_CHAR, 0, TAG_PORT, inter, MPI_STATUS_IGNORE));
        memcpy(&port, where, sizeof(port));
        addr.sin_addr = address_of(where + sizeof(int));
        addr.sin_port = htons((uint16_t) port);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && 0 != connect(fd, (struct sockaddr *) &addr, sizeof(addr))) {
            close(fd);
            fd = -1;
        }
        if (fd < 0) {
            fprintf(stderr, "[dpm rank 0] FAIL MPI_Comm_join: cannot reach the child at %s:%d\n",
                    where + sizeof(int), port);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    TC_CHECK(fd >= 0, "MPI_Comm_join: no socket to the other side");
    return fd;
}

/* Every rank of MPI_COMM_WORLD accepts on PORT (rank 0's; it closes the
 * port after) or connects to it. */
static MPI_Comm meet_at_port(char *port, int accept)
{
    MPI_Comm met;

    if (accept) {
        TC_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &met));
        if (0 == tc_rank) {
            TC_MPI(MPI_Close_port(port));
        }
    } else {
        TC_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &met));
    }
    return met;
}

/* From the spawn intercommunicator to the one the mode tests; the spawn
 * one is then disconnected, unless it is the one. */
static MPI_Comm meet(MPI_Comm inter, enum mode mode, int is_child)
{
    MPI_Comm met = MPI_COMM_NULL;
    char port[MPI_MAX_PORT_NAME] = "";
    int rank;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (MODE_ACCEPT == mode) {
        if (!is_child && 0 == rank) {
            TC_MPI(MPI_Open_port(MPI_INFO_NULL, port));
            TC_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, TAG_PORT, inter));
        } else if (is_child && 0 == rank) {
            TC_MPI(
                MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, TAG_PORT, inter, MPI_STATUS_IGNORE));
        }
        met = meet_at_port(port, !is_child);
    } else if (MODE_JOIN == mode) {
        int fd = join_socket(inter, is_child, rank);

        if (fd >= 0) {
            /* only the two first ranks take part */
            TC_MPI(MPI_Comm_join(fd, &met));
            close(fd);
        }
    } else {
        return inter;
    }
    TC_MPI(MPI_Comm_disconnect(&inter));
    return met;
}

/* A child's failures show in its own job's exit status only: the
 * parents fail too when any process they met did. */
static void report_other_side(MPI_Comm all, int is_child)
{
    long theirs = is_child ? tc_failures : 0, total = 0;

    TC_MPI(MPI_Allreduce(&theirs, &total, 1, MPI_LONG, MPI_SUM, all));
    TC_CHECK(is_child || 0 == total, "the children failed %ld checks", total);
}

/* The last process of ALL (a child) dies; the parents wait on it,
 * two-sided and one-sided, until the job ends. */
static void die_among(MPI_Comm all, int is_child)
{
    int rank, size, victim;
    long value = 0;
    MPI_Win win;
    uint8_t *base = NULL;
    MPI_Aint *disp;

    MPI_Comm_rank(all, &rank);
    MPI_Comm_size(all, &size);
    victim = size - 1;
    disp = tc_malloc((size_t) size * sizeof(MPI_Aint));
    win = open_window(all, TC_WIN_CREATE, &base, disp);
    if (rank == victim) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        printf("KILL rank=%d at=%.3f\n", tc_rank, (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec);
        fflush(stdout);
        raise(SIGKILL);
    }
    if (is_child) {
        /* the runtime ends the victim's job; only the parents wait on it */
        TC_MPI_RETURNED(MPI_Recv(&value, 1, MPI_LONG, 0, TAG_TOKEN, all, MPI_STATUS_IGNORE));
    }
    for (int i = 0; i < 1000; ++i) {
        TC_MPI_RETURNED(MPI_Win_lock(MPI_LOCK_SHARED, victim, 0, win));
        TC_MPI_RETURNED(MPI_Put(&value, 1, MPI_LONG, victim, disp[victim], 1, MPI_LONG, win));
        TC_MPI_RETURNED(MPI_Win_unlock(victim, win));
        TC_MPI_RETURNED(MPI_Sendrecv(&value, 1, MPI_LONG, victim, TAG_TOKEN, &value, 1, MPI_LONG,
                                     victim, TAG_TOKEN, all, MPI_STATUS_IGNORE));
        usleep(10000);
    }
    printf("SURVIVED rank=%d: still running 10 s after the child died\n", tc_rank);
    fflush(stdout);
    exit(4);
}

/* Both sides of MET (an intercommunicator) talk over the merged one, then
 * part. */
static void talk_across(MPI_Comm met, enum mode mode, int is_child, int cycle)
{
    MPI_Comm all;

    MPI_Comm_set_errhandler(met, MPI_ERRORS_RETURN);
    TC_MPI(MPI_Intercomm_merge(met, is_child, &all));
    MPI_Comm_set_errhandler(all, MPI_ERRORS_RETURN);
    if (MODE_DIE == mode) {
        die_among(all, is_child);
    }
    talk(all, cycle);
    report_other_side(all, is_child);
    TC_MPI(MPI_Comm_free(&all));
    TC_MPI(MPI_Comm_disconnect(&met));
}

static void run_cycle(MPI_Comm inter, enum mode mode, int is_child, int cycle)
{
    MPI_Comm met = meet(inter, mode, is_child);

    if (MPI_COMM_NULL != met) { /* join: only two take part */
        talk_across(met, mode, is_child, cycle);
    }
}

/* serve/reach: two jobs that did not start each other meet through a port
 * the first one writes into a file */
static void publish_port(const char *file, const char *port)
{
    char tmp[PATH_MAX];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", file);
    f = fopen(tmp, "w");
    TC_CHECK(NULL != f && fputs(port, f) >= 0 && 0 == fclose(f) && 0 == rename(tmp, file),
             "cannot write the port to %s", file);
}

static void read_port(const char *file, char *port)
{
    for (int tries = 0; tries < 6000; ++tries) {
        FILE *f = fopen(file, "r");

        if (NULL != f) {
            bool got = NULL != fgets(port, MPI_MAX_PORT_NAME, f);

            fclose(f);
            if (got) {
                return;
            }
        }
        usleep(10000);
    }
    TC_CHECK(false, "no port in %s after 60 s", file);
}

static void meet_other_job(const options_t *o)
{
    char port[MPI_MAX_PORT_NAME] = "";
    int serve = MODE_SERVE == o->mode;

    TC_CHECK(NULL != o->port_file, "-m %s needs -p FILE", mode_names[o->mode]);
    if (NULL == o->port_file) {
        return;
    }
    if (0 == tc_rank) {
        if (serve) {
            TC_MPI(MPI_Open_port(MPI_INFO_NULL, port));
            publish_port(o->port_file, port);
        } else {
            read_port(o->port_file, port);
        }
    }
    talk_across(meet_at_port(port, serve), o->mode, !serve, 1);
    if (serve && 0 == tc_rank) {
        unlink(o->port_file);
    }
}

static MPI_Comm start_children(const options_t *o, char *self, int cycle)
{
    char cycle_arg[16], children_arg[16];
    char *args[] = {
        "-m", (char *) mode_names[o->mode], "-n", children_arg, "-c", cycle_arg, NULL
    };
    MPI_Comm inter;
    MPI_Info info = MPI_INFO_NULL;
    int *errs = tc_malloc((size_t) o->children * sizeof(int));

    snprintf(cycle_arg, sizeof(cycle_arg), "%d", cycle);
    snprintf(children_arg, sizeof(children_arg), "%d", o->children);
    if (NULL != o->host) {
        TC_MPI(MPI_Info_create(&info));
        TC_MPI(MPI_Info_set(info, "host", o->host));
    }
    if (MODE_MULTIPLE == o->mode) {
        char *cmds[2] = { self, self };
        char **argvs[2] = { args, args };
        int counts[2] = { o->children - o->children / 2, o->children / 2 };
        MPI_Info infos[2] = { info, info };

        TC_MPI(MPI_Comm_spawn_multiple(counts[1] > 0 ? 2 : 1, cmds, argvs, counts, infos, 0,
                                       MPI_COMM_WORLD, &inter, errs));
    } else {
        TC_MPI(MPI_Comm_spawn(self, args, o->children, info, 0, MPI_COMM_WORLD, &inter, errs));
    }
    for (int i = 0; i < o->children; ++i) {
        TC_CHECK(MPI_SUCCESS == errs[i], "child %d did not start: error %d", i, errs[i]);
    }
    if (MPI_INFO_NULL != info) {
        MPI_Info_free(&info);
    }
    free(errs);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    return inter;
}

/* Open MPI 5 adds a peer on first contact: every parent meets every other
 * before the start count, or one met later inside a cycle (spawn's own
 * collectives across hosts) would count as an entry the children left. */
static void meet_world(void)
{
    int size, *buf;

    MPI_Comm_size(MPI_COMM_WORLD, &size);
    buf = calloc((size_t) size, sizeof(*buf));
    TC_CHECK(NULL != buf, "out of memory");
    if (NULL != buf) {
        TC_MPI(MPI_Alltoall(MPI_IN_PLACE, 1, MPI_INT, buf, 1, MPI_INT, MPI_COMM_WORLD));
        free(buf);
    }
}

int main(int argc, char **argv)
{
    options_t o;
    MPI_Comm parent;
    usage_t start, first = { 0 }, now;

    tc_init(&argc, &argv, "dpm");
    parse_options(argc, argv, &o);
    MPI_Comm_get_parent(&parent);
    if (MPI_COMM_NULL != parent) {
        int cycle = o.cycles; /* the parents pass theirs */

        MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
        run_cycle(parent, o.mode, 1, cycle);
        tc_expect_pvars(TC_PVAR_SUM, "send_count put_count");
        return tc_finish();
    }
    if (MODE_SERVE == o.mode || MODE_REACH == o.mode) {
        tc_phase("%s through %s", mode_names[o.mode], o.port_file ? o.port_file : "(no file)");
        meet_other_job(&o);
        tc_expect_pvars(TC_PVAR_SUM, "send_count put_count");
        return tc_finish();
    }
    tc_phase("%s, %d children, %d cycles%s%s", mode_names[o.mode], o.children, o.cycles,
             o.host ? " on " : "", o.host ? o.host : "");
    meet_world();
    measure(&start);
    for (int cycle = 1; cycle <= o.cycles; ++cycle) {
        run_cycle(start_children(&o, argv[0], cycle), o.mode, 0, cycle);
        measure(&now);
        if (1 == cycle) {
            first = now;
        } else {
            check_flat(&start, &first, &now, cycle);
        }
        if (1 == cycle || cycle == o.cycles || getenv("DPM_VERBOSE")) {
            tc_phase("cycle %d: fds %ld threads %ld registrations %ld peers %ld", cycle, now.fds,
                     now.threads, now.regions, now.peers);
        }
    }
    check_peers_return(&start, &first);
    tc_expect_pvars(TC_PVAR_SUM, "send_count put_count");
    return tc_finish();
}
