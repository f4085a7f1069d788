//! Compiles RocketMQ 5.x's protos (proto/apache/rocketmq/v2, vendored from apache/rocketmq-apis)
//! into Rust types for the gRPC port, with protox (a protobuf compiler in Rust: no protoc needed).

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = [
        root.join("apache/rocketmq/v2/definition.proto"),
        root.join("apache/rocketmq/v2/service.proto"),
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let descriptors = protox::compile(&files, [&root]).expect("the vendored protos compile");
    prost_build::Config::new()
        .compile_fds(descriptors)
        .expect("prost generates the 5.x types");
}
