// Embedding.cu: being written.
