"""Run-time compilation and launching of the CUDA kernels under kernels/ (CuPy/NVRTC), and
offline resource reports (nvcc/ptxas) that need no GPU."""
