// Attention.cu: being written.
