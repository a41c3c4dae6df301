// Layout.cu: being written.
