// Programmatic dependent launch (sm_90 and later): the plan may mark a launch programmatic (docs/formats.md, a
// command's flags), so that the kernel starts while the launch before it finishes. Every kernel therefore first waits
// for its prerequisite grid to complete and its memory to be visible (griddepcontrol.wait; it returns at once after a
// normal launch), then lets its own dependents be scheduled (their blocks wait in the same way). Before sm_90 there
// is neither instruction, and admission refuses programmatic launches there.
#ifndef COPPELIUS_LAUNCH_CUH
#define COPPELIUS_LAUNCH_CUH

namespace cpl {

__device__ __forceinline__ void grid_dependency() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace cpl
#endif
