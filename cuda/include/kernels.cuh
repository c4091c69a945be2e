// Defines the kernels of the policy table (kernels.def) that belong to the including
// kernel file. The file defines K2RPQ_IN_<its name> first, as K2RPQ_FAMILIES to define
// its families (from their device function templates `<kernel><Semiring>(p)`, with the
// launch bounds of their `bounds` macro); every other file's rows expand to nothing.
// Kernels of K2RPQ_STEP and K2RPQ_HELPER rows are written out in their files.
#ifndef K2RPQ_KERNELS_CUH
#define K2RPQ_KERNELS_CUH

#include "params.cuh"

// One kernel of a family: `<kernel>_<op>` runs `kernel<Semiring>`.
#define K2RPQ_FAMILY_KERNEL(op, Semiring, kernel, bounds) \
    extern "C" __global__ void bounds(Semiring) kernel##_##op(StepParams p) { kernel<Semiring>(p); }
// A family's kernels, one per operation.
#define K2RPQ_FAMILIES(kernel, bounds) K2RPQ_OPS(K2RPQ_FAMILY_KERNEL, kernel, bounds)
// The launch bounds of a family without any.
#define UNBOUNDED(Semiring)

#ifndef K2RPQ_IN_leaves_codes
#define K2RPQ_IN_leaves_codes(kernel, bounds)
#endif
#ifndef K2RPQ_IN_octets
#define K2RPQ_IN_octets(kernel, bounds)
#endif
#ifndef K2RPQ_IN_leaves_blocks
#define K2RPQ_IN_leaves_blocks(kernel, bounds)
#endif
#ifndef K2RPQ_IN_subtrees
#define K2RPQ_IN_subtrees(kernel, bounds)
#endif
#ifndef K2RPQ_IN_lone_cells
#define K2RPQ_IN_lone_cells(kernel, bounds)
#endif

#define K2RPQ_LEAF(file, kernel, step, variants, frontier, bounds) K2RPQ_IN_##file(kernel, bounds)
#define K2RPQ_STEP(file, kernel, step, variants)
#define K2RPQ_HELPER(file, kernel, launch)

#include "kernels.def"

#endif
