// threads.c: the worker pool behind parallel_for (threads.h). One mutex, two condition
// variables, a generation counter: workers sleep until the generation changes, run their
// range, and the last one to finish wakes the caller.
#include "threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 256

static struct {
    int count;                  // threads including the caller
    pthread_t workers[MAX_THREADS];
    pthread_mutex_t lock;
    pthread_cond_t start, done;
    long generation;            // bumped once per parallel_for
    int pending;                // workers still running the current generation
    int active;                 // threads taking part in the current generation
    int stopping;
    range_body body;
    void* context;
    long items;
} pool = {1, {0}, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 1, 0,
          NULL, NULL, 0};

static void run_share(int index, int active, range_body body, void* context, long items) {
    long start = items * index / active, end = items * (index + 1) / active;
    if (start < end) body(context, start, end);
}

static void* worker(void* argument) {
    int index = (int)(long)argument;
    long seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.generation == seen && !pool.stopping) pthread_cond_wait(&pool.start, &pool.lock);
        if (pool.stopping) break;
        seen = pool.generation;
        if (index < pool.active) {
            range_body body = pool.body;
            void* context = pool.context;
            long items = pool.items;
            int active = pool.active;
            pthread_mutex_unlock(&pool.lock);
            run_share(index, active, body, context, items);
            pthread_mutex_lock(&pool.lock);
            if (--pool.pending == 0) pthread_cond_signal(&pool.done);
        }
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

static int cpus_available(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return 1;
}

int threads_start(int threads) {
    if (threads <= 0) threads = cpus_available();
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    pool.count = 1;
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&pool.workers[i], NULL, worker, (void*)(long)i) != 0) break;  // fewer is still correct
        pool.count = i + 1;
    }
    return pool.count;
}

int threads_count(void) { return pool.count; }

void parallel_for(long count, long grain, range_body body, void* context) {
    if (count <= 0) return;
    long by_grain = grain > 0 ? (count + grain - 1) / grain : count;
    int active = by_grain < pool.count ? (int)by_grain : pool.count;
    if (active <= 1) {
        body(context, 0, count);
        return;
    }
    pthread_mutex_lock(&pool.lock);
    pool.body = body, pool.context = context, pool.items = count;
    pool.active = active, pool.pending = active - 1;
    pool.generation++;
    pthread_cond_broadcast(&pool.start);
    pthread_mutex_unlock(&pool.lock);
    run_share(0, active, body, context, count);
    pthread_mutex_lock(&pool.lock);
    while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

void threads_stop(void) {
    pthread_mutex_lock(&pool.lock);
    pool.stopping = 1;
    pthread_cond_broadcast(&pool.start);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 1; i < pool.count; i++) pthread_join(pool.workers[i], NULL);
    pool.count = 1, pool.stopping = 0;
}
