/* Shared by benches/loadgen_c.c and benches/loadgen_peer.c (each defines now_s() before including
   this): how a load generator waits for answers. */
#ifndef LOADGEN_WAIT_H
#define LOADGEN_WAIT_H

#include <sched.h>
#include <sys/epoll.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wait for events. With a spin budget (LOADGEN_SPIN_US), poll with a zero timeout, yielding the CPU
   between polls, for up to spin_us before sleeping: an answer that arrives meanwhile finds the process
   awake, so the server's send wakes nobody. The CPU spent polling without finding anything is added to
   *idle (this process's own CPU, not the time another process ran while it yielded). */
static int wait_events(int ep, struct epoll_event *evs, int max, double spin_us, double *idle) {
    if (spin_us > 0) {
        int n = epoll_wait(ep, evs, max, 0);
        if (n != 0) return n;
        double until = now_s() + spin_us * 1e-6, c0 = cpu_now();
        do {
            sched_yield();
            n = epoll_wait(ep, evs, max, 0);
        } while (n == 0 && now_s() < until);
        *idle += cpu_now() - c0;
        if (n != 0) return n;
    }
    return epoll_wait(ep, evs, max, 20);
}

#endif
