// scratch.h: float32 working buffers that outlive one kernel call (grown, never shrunk), so
// that a step does not map and fault fresh memory for every launch. Kernels run one at a time
// from the host thread; each uses distinct slots. Exits with one line if memory runs out.
#ifndef COPPELIUS_SCRATCH_H
#define COPPELIUS_SCRATCH_H
#include "half.h"

enum { SCRATCH_SLOTS = 4 };
float* scratch(int slot, long count);
// Convert n halves to float32 in parallel (the staging step of matmul and attention).
void halves_to_floats_parallel(float* out, const half* in, long n);
#endif
