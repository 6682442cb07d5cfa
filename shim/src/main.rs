//! `containerd-shim-cordon-v2`: containerd's shim v2 for cordon.
//!
//! Not implemented yet. Until it is, containerd drives cordon through its
//! runc shim: `runtime_type = "io.containerd.runc.v2"` with
//! `options.BinaryName = "/usr/local/bin/cordon"` (see README.md).

fn main() {
    eprintln!(
        "containerd-shim-cordon-v2: not implemented yet; use io.containerd.runc.v2 with BinaryName=/usr/local/bin/cordon"
    );
    std::process::exit(1);
}
