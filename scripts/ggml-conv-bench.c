// ggml-conv-bench: milliseconds per 3x3 convolution (stride 1, padding 1)
// of SD3's VAE decoder's shapes on llama.cpp's ggml (the engine make
// engine builds), the CPU backend: im2col + mul_mat with F16 weights, as
// ggml_conv_2d computes it, against ggml_conv_2d_direct with F16 and F32
// weights. The fastest of 5 runs after a warm-up (docs/image.md, "Not
// done", has the figures). Build and run with the pinned build's headers:
//
//	E=${GENQ_CACHE:-$HOME/.cache/genq}/llama.cpp; C=$(ls -d $E/src-*/ | head -1)
//	L=$(readlink -f lib/llama)
//	gcc -O2 -o /tmp/ggml-conv-bench scripts/ggml-conv-bench.c -I${C}ggml/include -L$L -lggml -lggml-base -lggml-cpu -lm
//	LD_LIBRARY_PATH=$L /tmp/ggml-conv-bench 2      # threads
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}

static double run(ggml_backend_t be, int W, int C, int K, int direct, enum ggml_type kt, int reps){
  struct ggml_init_params ip = { 16*1024*1024, NULL, true };
  struct ggml_context *ctx = ggml_init(ip);
  struct ggml_tensor *x = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, W, W, C, 1);
  struct ggml_tensor *k = ggml_new_tensor_4d(ctx, kt, 3, 3, C, K);
  struct ggml_tensor *y = direct ? ggml_conv_2d_direct(ctx, k, x, 1,1,1,1,1,1) : ggml_conv_2d(ctx, k, x, 1,1,1,1,1,1);
  struct ggml_cgraph *g = ggml_new_graph(ctx);
  ggml_build_forward_expand(g, y);
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be);
  // fill inputs
  size_t nx = ggml_nbytes(x), nk = ggml_nbytes(k);
  void *hx = calloc(1, nx), *hk = calloc(1, nk);
  float *fx = hx; for (size_t i=0;i<nx/4;i++) fx[i] = (float)((i*2654435761u)%1000)/1000.0f - 0.5f;
  if (kt == GGML_TYPE_F32) { float *f=hk; for(size_t i=0;i<nk/4;i++) f[i]=0.01f*(float)((i*40503u)%100)/100.0f; }
  else { ggml_fp16_t *h=hk; for(size_t i=0;i<nk/2;i++) h[i]=ggml_fp32_to_fp16(0.01f*(float)((i*40503u)%100)/100.0f); }
  ggml_backend_tensor_set(x, hx, 0, nx); ggml_backend_tensor_set(k, hk, 0, nk);
  ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_get_default_buffer_type(be));
  ggml_gallocr_alloc_graph(ga, g);
  ggml_backend_graph_compute(be, g); // warm
  double best = 1e18;
  for (int r=0;r<reps;r++){ double t0=now(); ggml_backend_graph_compute(be, g); double d=now()-t0; if(d<best)best=d; }
  ggml_gallocr_free(ga); ggml_backend_buffer_free(buf); ggml_free(ctx); free(hx); free(hk);
  return best;
}

int main(int argc, char **argv){
  int threads = argc>1 ? atoi(argv[1]) : 2;
  ggml_backend_t be = ggml_backend_cpu_init();
  ggml_backend_cpu_set_n_threads(be, threads);
  int shapes[][3] = {{64,512,512},{128,512,512},{128,256,256},{256,128,128}};
  for (int s=0;s<4;s++){
    int W=shapes[s][0], C=shapes[s][1], K=shapes[s][2];
    double a = run(be,W,C,K,0,GGML_TYPE_F16,5), b = run(be,W,C,K,1,GGML_TYPE_F16,5), c = run(be,W,C,K,1,GGML_TYPE_F32,5);
    printf("%4dx%-4d %3d->%-3d  im2col+mul_mat f16 %8.1f ms   direct f16 %8.1f ms   direct f32 %8.1f ms\n", W,W,C,K,a,b,c);
  }
  ggml_backend_free(be);
}
