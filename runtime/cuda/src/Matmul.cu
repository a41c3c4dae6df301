// Matmul.cu: being written.
