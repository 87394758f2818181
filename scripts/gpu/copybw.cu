// copybw measures the GPU's device-to-device copy bandwidth, the memory
// bound the GPU benchmark holds genq's decode against: each copied byte is
// read once and written once, so bandwidth = 2 × bytes / time. It prints
// GB/s (10^9 bytes) on one line.
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
	fprintf(stderr, "copybw: %s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

int main() {
	const size_t bytes = size_t(2) << 30; // 2 GiB each way
	const int rounds = 20;
	void *src, *dst;
	CHECK(cudaMalloc(&src, bytes));
	CHECK(cudaMalloc(&dst, bytes));
	CHECK(cudaMemset(src, 1, bytes));
	CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice)); // warm-up
	cudaEvent_t start, stop;
	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));
	CHECK(cudaEventRecord(start));
	for (int i = 0; i < rounds; i++) {
		CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
	}
	CHECK(cudaEventRecord(stop));
	CHECK(cudaEventSynchronize(stop));
	float ms = 0;
	CHECK(cudaEventElapsedTime(&ms, start, stop));
	printf("%.0f\n", 2.0 * bytes * rounds / (ms / 1e3) / 1e9);
	return 0;
}
