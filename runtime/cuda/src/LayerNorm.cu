// LayerNorm.cu: being written.
