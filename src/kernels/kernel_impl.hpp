// The per-instruction-set kernel entry points that dispatch.cpp chooses between.
#pragma once
#include <cstddef>

#include "attnlab/flash_attention.hpp"

#define ATTNLAB_DECLARE_KERNELS(ns)                                                                          \
  namespace attnlab::kernels::ns {                                                                         \
  void flash_attention_f32(const float* q, const float* k, const float* v, float* out,                     \
                           const AttentionShape& shape, const AttentionOptions& options);                  \
  /* bf16 operands, f32 accumulation: the CPU's bf16 dot product where options.isa is */                  \
  /* avx512_bf16 (and the build has it), else a portable step that computes the same. */                  \
  void flash_attention_bf16(const float* q, const float* k, const float* v, float* out,                    \
                            const AttentionShape& shape, const AttentionOptions& options);                 \
  double fma_peak_gflops(int threads, long iterations);                                                    \
  double bf16_peak_gflops(int threads, long iterations);                                                   \
  double read_bandwidth_gbps(int threads, const float* data, std::size_t count, int passes);               \
  }

ATTNLAB_DECLARE_KERNELS(generic)
ATTNLAB_DECLARE_KERNELS(avx2)
ATTNLAB_DECLARE_KERNELS(avx512)
