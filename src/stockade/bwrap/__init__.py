"""The Linux backend: policy -> bwrap argv, seccomp filter, network bridge, supervision."""
