// Elementwise.cu: being written.
