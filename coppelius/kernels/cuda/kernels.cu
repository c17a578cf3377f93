// Every Coppelius CUDA kernel, as one translation unit: coppelius/realize/nvrtc.py compiles this
// file with NVRTC into one cubin per arch, the .cuh files beside it passed as its headers. Each
// kernel is `extern "C"` with the parameters of the catalog (coppelius/formats/kernels.py), in its
// order; its launch geometry is the catalog's geometry().
#include "common.cuh"
#include "encoder.cuh"
#include "layernorm.cuh"
#include "elementwise.cuh"
#include "loss.cuh"
#include "matmul.cuh"
#include "attention.cuh"
#include "attention_backward.cuh"
