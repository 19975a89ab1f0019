//! Generates the pprof message types from the vendored `proto/profile.proto` with prost-build.
//! prost-build runs `protoc` (Debian's `protobuf-compiler`, installed by `scripts/setup.sh`; the
//! `PROTOC` environment variable names another one): the generated code then always matches
//! the vendored schema instead of drifting from a hand-written copy.

fn main() -> std::io::Result<()> {
    println!("cargo:rerun-if-changed=proto/profile.proto");
    prost_build::compile_protos(&["proto/profile.proto"], &["proto/"])
}
