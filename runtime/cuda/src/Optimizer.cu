// Optimizer.cu: being written.
