// kernels.h: the cpu device's kernels, one function per kernel of the catalog
// (coppelius/plan/kernels.py), parameters in the catalog's order and meaning.
//
// Shapes (llm.c's letters): B batch, T time, C channels, NH heads, hs = C/NH, N rows (B*T),
// OC output channels, V vocabulary, Vp padded vocabulary (row stride of wte and logits).
// Storage is the plan's: half = binary16 bits, float = binary32, int32 token ids. Each kernel
// loads fp16 to float32, computes in float32 and stores rounded to nearest even, exactly as the
// numpy reference device (coppelius/runtime/cpu.py) does; where that device rounds a sum once
// (an accumulation into an fp16 gradient), so does the kernel. Every output element is computed
// by one thread in a fixed order, so the results do not depend on the number of threads.
// A null pointer is allowed only where the catalog allows it (matmul bias, dbias).
#ifndef COPPELIUS_KERNELS_H
#define COPPELIUS_KERNELS_H
#include <stdint.h>

#include "half.h"

// out (B,T,C) = wte[tokens] (Vp,C) + wpe[:T] (T,C)
void encoder_forward(half* out, const int32_t* tokens, const half* wte, const half* wpe, int B, int T, int C, int Vp);
// order (N): the positions grouped by token, each group ascending; first (Vp+1): where each token's group starts
void encoder_sort(int32_t* order, int32_t* first, const int32_t* tokens, int N, int Vp);
// dwte (Vp,C) += scatter-sum of dout (B,T,C) by token (encoder_sort's groups); dwpe (T,C) = sum over the batch
void encoder_backward(half* dwte, half* dwpe, const half* dout, const int32_t* order, const int32_t* first, int B,
                      int T, int C, int Vp);
// out (N,C) = (inp - mean) * rstd * weight + bias; mean, rstd (N) float32 saved for the backward
void layernorm_forward(half* out, float* mean, float* rstd, const half* inp, const half* weight, const half* bias,
                       int N, int C);
// dinp (N,C) += input gradient; partials (P,2,C): each block of rows' sums of dweight and dbias
void layernorm_backward(half* dinp, float* partials, const half* dout, const half* inp, const half* weight,
                        const float* mean, const float* rstd, int N, int C);
// dweight, dbias (C) = the partials' P rows added in order
void layernorm_backward_weight(half* dweight, half* dbias, const float* partials, int N, int C);
// P, the partials' rows (formats/geometry.py: layernorm_backward_blocks)
int layernorm_backward_blocks(int N);
// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC, or null)
void matmul_forward(half* out, const half* inp, const half* weight, const half* bias, int N, int C, int OC);
// out (N,OC) as matmul_forward with a null bias; stats (N,P,2), P = ceil(OC / width): for each row and part j, the
// max m of out's fp16 values in columns [j*width, min((j+1)*width, V)) and the sum of exp(x - m) ((-inf, 0) if empty)
void matmul_forward_stats(half* out, float* stats, const half* inp, const half* weight, int N, int C, int OC, int V,
                          int width);
// stats (N,P,2) of x (N,cols) as matmul_forward_stats gives them for its out (its second half)
void softmax_stats(float* stats, const half* x, int N, int cols, int V, int width);
// dinp (N,C) = dout (N,OC) @ weight (OC,C)
void matmul_backward_input(half* dinp, const half* dout, const half* weight, int N, int C, int OC);
// dinp as matmul_backward_input, then gelu_backward of its fp16 values with slope (N,C), in place
void matmul_backward_input_gelu(half* dinp, const half* dout, const half* weight, const half* slope, int N, int C,
                                int OC);
// x as matmul_forward (its fp16 values, not stored): slope (N,OC) = gelu'(x), out_gelu (N,OC) = gelu(x)
void matmul_forward_gelu(half* slope, half* out_gelu, const half* inp, const half* weight, const half* bias, int N,
                         int C, int OC);
// dweight (OC,C) = dout^T @ inp (+ dweight when accumulate); dbias (OC) = column sums of dout (if not null)
void matmul_backward_weight(half* dweight, half* dbias, const half* dout, const half* inp, int N, int C, int OC,
                            uint32_t accumulate);
// out (B,T,C) = causal softmax(q k^T / sqrt(hs)) v per head from qkv (B,T,3C); lse (B,NH,T) float32
void attention_forward(half* out, float* lse, const half* qkv, int B, int T, int C, int NH);
// dqkv (B,T,3C) from dout (B,T,C), qkv, out and lse (probabilities recomputed)
void attention_backward(half* dqkv, const half* dout, const half* qkv, const half* out, const float* lse,
                        int B, int T, int C, int NH);
void gelu_forward(half* out, const half* inp, int N);
// dinp = dout * slope (matmul_forward_gelu's)
void gelu_backward(half* dinp, const half* slope, const half* dout, int N);
// out_gelu = gelu(x), x replaced by gelu'(x) (matmul_forward_gelu's second half)
void gelu_value_slope(half* x_to_slope, half* out_gelu, int N);
void residual_forward(half* out, const half* inp1, const half* inp2, int N);
// losses (N) = -log softmax(logits (N,Vp)[:, :V])[target]
void crossentropy_forward(float* losses, const half* logits, const int32_t* targets, int N, int V, int Vp);
// dlogits (N,Vp) = (softmax - onehot) * scale in the first V columns, zero in the padding
void crossentropy_backward(half* dlogits, const half* logits, const int32_t* targets, int N, int V, int Vp,
                           float scale);
// losses as crossentropy_forward and dlogits as crossentropy_backward
void crossentropy_forward_backward(float* losses, half* dlogits, const half* logits, const int32_t* targets, int N,
                                   int V, int Vp, float scale);
// losses and dlogits as crossentropy_forward_backward, each row's max and sum of exp merged from its P = ceil(Vp /
// width) parts of stats (N,P,2) (matmul_forward_stats's) in order; dlogits may be logits (in place)
void crossentropy_forward_backward_stats(float* losses, half* dlogits, const half* logits, const float* stats,
                                         const int32_t* targets, int N, int V, int Vp, int width, float scale);
// predictions (N) = first index of the row maximum among the first V columns
void argmax_forward(int32_t* predictions, const half* logits, int N, int V, int Vp);
// *flag = 1 when any of grads (N) is not finite (never written otherwise)
void nonfinite_check(int32_t* flag, const half* grads, int N);
// one AdamW step over N parameters unless *flag; half (N) = the updated params rounded to fp16
void adamw(float* params, float* m, float* v, const half* grads, half* half_params, const int32_t* flag, int N,
           float beta1, float beta2, float decay, float step_size, float eps);
void cast_half(half* out, const float* inp, int N);

#endif
