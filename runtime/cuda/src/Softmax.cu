// Softmax.cu: being written.
