// threads.h: a fixed pool of worker threads and a parallel for with a fixed work split.
//
// parallel_for(count, body, context) runs body(context, start, end) over [0, count) split into
// one contiguous range per thread: thread i gets [count*i/n, count*(i+1)/n). The calling thread
// runs range 0 and waits for the others. The kernels give every item its own outputs and
// compute each output in a fixed order, so results never depend on the number of threads nor
// on their timing (zig cc has no OpenMP runtime; this is the part of it the kernels need).
#ifndef COPPELIUS_THREADS_H
#define COPPELIUS_THREADS_H

typedef void (*range_body)(void* context, long start, long end);

// Start the pool (threads <= 0: one per CPU this process may run on). Returns the thread count.
int threads_start(int threads);
int threads_count(void);
// Run body over [0, count). Items per thread below `grain` use fewer threads.
void parallel_for(long count, long grain, range_body body, void* context);
void threads_stop(void);

#endif
